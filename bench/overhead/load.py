"""Load generators for the overhead benchmark: `wrk` (with a POST Lua script) or
bench/overhead/loadgen.py.

Both are closed-loop (each connection sends its next request when the previous answer is
complete) and run in their own process, pinned away from the process under test. `wrk` measures
non-streaming cells when it is installed (cheaper per request than any Python client); the
Python client measures streaming cells (time to first byte) and everything when `wrk` is absent.
"""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.overhead.procs import Processes

HERE = Path(__file__).resolve().parent
WRK_SCRIPT = """\
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = os.getenv("BENCH_AUTHORIZATION")
local f = assert(io.open(os.getenv("BENCH_BODY"), "rb"))
wrk.body = f:read("*a")
f:close()
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "BENCH_JSON {\\"requests\\":%d,\\"duration_us\\":%d,\\"connect\\":%d,\\"read\\":%d,"
    .. "\\"write\\":%d,\\"status\\":%d,\\"timeout\\":%d,\\"p50_us\\":%d,\\"p99_us\\":%d}\\n",
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
"""


@dataclass
class Load:
    url: str
    body: Path
    concurrency: int
    duration: float
    warmup: float
    authorization: str
    stream: bool


def wrk_path() -> str | None:
    return shutil.which("wrk")


class Loader:
    def __init__(self, procs: Processes, cpus: set[int] | None, kind: str, workdir: Path):
        self.procs = procs
        self.cpus = cpus
        self.wrk = wrk_path() if kind in ("auto", "wrk") else None
        if kind == "wrk" and self.wrk is None:
            raise RuntimeError("--loader wrk: wrk is not installed (apt-get install -y wrk)")
        self.script = workdir / "post.lua"
        self.script.write_text(WRK_SCRIPT)

    def name(self, stream: bool) -> str:
        return "wrk" if self.wrk and not stream else "python"

    def run(self, load: Load) -> dict[str, Any]:
        """One cell (`load.warmup` applies to the Python client only)."""
        if self.wrk and not load.stream:
            return self._wrk(load)
        return self._python(load)

    def _python(self, load: Load) -> dict[str, Any]:
        argv = [
            sys.executable,
            str(HERE / "loadgen.py"),
            load.url,
            str(load.body),
            "-c",
            str(load.concurrency),
            "-d",
            str(load.duration),
            "-w",
            str(load.warmup),
            "--authorization",
            load.authorization,
        ]
        timeout = load.duration + load.warmup + 30
        out = self.procs.run(argv, self.cpus, {}, timeout)
        result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        return result

    def _wrk(self, load: Load) -> dict[str, Any]:
        return self._wrk_once(load, load.duration)

    def _wrk_once(self, load: Load, seconds: float) -> dict[str, Any]:
        argv = [
            self.wrk,
            "-t1",
            f"-c{load.concurrency}",
            f"-d{max(1, round(seconds))}s",
            "--timeout",
            "30s",
            "-s",
            str(self.script),
            load.url,
        ]
        env = {"BENCH_BODY": str(load.body), "BENCH_AUTHORIZATION": load.authorization}
        out = self.procs.run(argv, self.cpus, env, seconds + 40)
        line = next(x for x in out.splitlines() if x.startswith("BENCH_JSON "))
        raw = json.loads(line.removeprefix("BENCH_JSON "))
        errors = sum(raw[k] for k in ("connect", "read", "write", "status", "timeout"))
        ok = max(0, raw["requests"] - raw["status"])
        duration = raw["duration_us"] / 1e6
        return {
            "loader": "wrk",
            "requests": ok,
            "completed": raw["requests"],
            "errors": errors,
            "duration_s": duration,
            "rps": ok / duration if duration else 0.0,
            "p50_us": float(raw["p50_us"]),
            "p99_us": float(raw["p99_us"]),
            "ttfb_p50_us": float("nan"),
            "ttfb_p99_us": float("nan"),
        }
