"""Runs a server under cProfile, profiling only between two signals (bench.overhead.profile_pass).

    python bench/overhead/profiled.py OUT.prof -m proxy.cli serve ...
    python bench/overhead/profiled.py OUT.prof bench/overhead/ref_forwarder.py ...

SIGUSR1 starts the profile (after start-up and warm-up requests), SIGUSR2 stops it and writes
OUT.prof. Times are the main thread's CPU time (`time.thread_time`), not wall time: with wall time
a call that waits for the GIL while a worker thread parses a large body (a socket `recv`, the
thread pool's queue) would look expensive. Worker threads are not profiled. The server itself
runs as `python -m MODULE ...` or `python SCRIPT ...` would run it.
"""

from __future__ import annotations

import cProfile
import runpy
import signal
import sys
import time
from typing import Any


def main() -> None:
    out, target, rest = sys.argv[1], sys.argv[2], sys.argv[3:]
    profile = cProfile.Profile(time.thread_time)

    def start(*_: Any) -> None:
        profile.enable()

    def stop(*_: Any) -> None:
        profile.disable()
        profile.dump_stats(out)

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    if target == "-m":
        sys.argv = [rest[0], *rest[1:]]
        runpy.run_module(rest[0], run_name="__main__", alter_sys=True)
    else:
        sys.argv = [target, *rest]
        runpy.run_path(target, run_name="__main__")


if __name__ == "__main__":
    main()
