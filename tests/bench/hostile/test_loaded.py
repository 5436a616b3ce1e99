"""The loaded-machine helpers of the availability run (bench/hostile/loaded.py): the CPU hogs
run for their block only, and the prober process probes `/healthz` from outside."""

from __future__ import annotations

import http.server
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from bench.hostile.loaded import Latencies, cpu_hogs, probing


def test_quantiles_are_nearest_rank_over_the_answered_probes() -> None:
    probes = Latencies(sent=5, answered=[0.004, 0.001, 0.003, 0.002])
    more = Latencies(sent=2, answered=[0.010])
    probes.add(more)
    assert (probes.sent, len(probes.answered)) == (7, 5)
    assert probes.ms(0.5) == 3.0
    assert probes.ms(0.99) == 10.0
    assert probes.ms(1.0) == 10.0
    assert probes.cells() == "5/7 | 3.0 | 10.0 | 10.0"
    assert Latencies().cells() == "0/0 | nan | nan | nan"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie is gone too
        return stat.read().split(") ", 1)[1][0] != "Z"


def test_the_hogs_run_during_their_block_and_stop_after() -> None:
    with cpu_hogs(2) as pids:
        assert len(pids) == 2
        assert all(_alive(pid) for pid in pids)
    assert not any(_alive(pid) for pid in pids)
    with cpu_hogs(0) as none:
        assert none == []


class _Healthz(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        status = 200 if self.path == "/healthz" else 404
        self.send_response(status)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def _server() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Healthz)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_the_prober_counts_answered_probes_from_another_process() -> None:
    with _server() as port, probing(port, settle_s=0.1) as probes:
        pass
    assert probes.sent >= 2
    assert 2 <= len(probes.answered) <= probes.sent
    assert all(0 < latency < 2 for latency in probes.answered)


def test_a_proxy_that_does_not_answer_leaves_probes_unanswered() -> None:
    with _server() as port:
        pass  # closed: nothing listens on the port any more
    with probing(port, settle_s=0.1) as probes:
        pass
    assert probes.sent >= 1
    assert probes.answered == []
