"""A large request is prepared off the event loop: `/healthz` keeps answering meanwhile.

The proxy runs on its own event loop in a thread; a prober thread polls `/healthz` every 20 ms
over one keep-alive connection while the test posts a large dry run. Before preparation moved to
worker threads, a 12 MB tool result held a probe for ~1-2 s and 100,000 tiny messages for
~1.5-5.6 s (2 shared cores); since, the worst probe takes ~0.1-0.3 s there (the GIL is shared:
orjson holds it while it parses, ~0.1 s for 100,000 messages). The bound sits between.
"""

from __future__ import annotations

import asyncio
import http.client
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson
import pytest
from proxy_harness import RunningProxy, make_settings, start_proxy

MAX_PROBE_SECONDS = 0.5
PROBE_EVERY_SECONDS = 0.02


@contextmanager
def proxy_in_thread() -> Iterator[RunningProxy]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    settings = make_settings("http://127.0.0.1:9")  # dry runs never call the upstream
    running = asyncio.run_coroutine_threadsafe(start_proxy(settings), loop).result(60)
    try:
        yield running
    finally:
        asyncio.run_coroutine_threadsafe(running.stop(), loop).result(60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


class Prober:
    """Polls `/healthz` until stopped; keeps the latency of every probe."""

    def __init__(self, port: int) -> None:
        self.latencies: list[float] = []
        self.failures = 0
        self._port = port
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Prober:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", self._port, timeout=30)
        while not self._stop.is_set():
            started = time.perf_counter()
            try:
                connection.request("GET", "/healthz")
                response = connection.getresponse()
                response.read()
                ok = response.status == 200
            except OSError:
                ok = False
                connection.close()
            if not ok:
                self.failures += 1
            self.latencies.append(time.perf_counter() - started)
            self._stop.wait(PROBE_EVERY_SECONDS)
        connection.close()


def dry_run(port: int, body: dict[str, Any]) -> dict[str, Any]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        headers = {"Content-Type": "application/json", "Authorization": "Bearer sk-test-client"}
        connection.request("POST", "/v1/context/prepare", orjson.dumps(body), headers)
        response = connection.getresponse()
        payload = response.read()
        assert response.status == 200, payload[:300]
        answer: dict[str, Any] = orjson.loads(payload)
        return answer
    finally:
        connection.close()


def large_tool_result(megabytes: int) -> dict[str, Any]:
    """One fresh (never counted before) tool result the default policy must offload."""
    words = " ".join(f"w{i % 997}" for i in range(megabytes * 200_000))
    return {
        "model": "gpt-4.1",
        "messages": [
            {"role": "user", "content": "summarise the file"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": f"{uuid.uuid4()} {words}"},
            {"role": "user", "content": "go on"},
        ],
    }


def many_messages(count: int) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:8]
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"{tag} message {i}"}
        for i in range(count)
    ]
    return {"model": "gpt-4.1", "messages": messages}


def worst_probe_while(body: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    with proxy_in_thread() as proxy:
        dry_run(proxy.port, {"model": "gpt-4.1", "messages": [{"role": "user", "content": "hi"}]})
        with Prober(proxy.port) as prober:
            time.sleep(0.1)
            answer = dry_run(proxy.port, body)
            time.sleep(0.1)
    assert prober.failures == 0
    assert len(prober.latencies) >= 5
    return max(prober.latencies), answer


@pytest.mark.parametrize("megabytes", [12])
def test_healthz_answers_while_a_large_tool_result_is_prepared(megabytes: int) -> None:
    worst, answer = worst_probe_while(large_tool_result(megabytes))
    assert answer["changed"] is True
    assert answer["manifest"]["outcome"] == "reduced"
    assert worst < MAX_PROBE_SECONDS, f"/healthz took {worst:.3f}s"


def test_healthz_answers_while_many_messages_are_prepared() -> None:
    worst, answer = worst_probe_while(many_messages(100_000))
    assert answer["manifest"]["tokens_before"] > 1_000_000  # over the trigger: reduced too
    assert answer["manifest"]["outcome"] in ("reduced", "reduced_above_target")
    assert worst < MAX_PROBE_SECONDS, f"/healthz took {worst:.3f}s"
