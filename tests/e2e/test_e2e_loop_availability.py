"""A large request is parsed, prepared and answered off the event loop: `/healthz` answers
meanwhile.

The proxy runs on its own event loop in a thread. Each costly phase of a large dry run (parsing
the body, counting and planning it, serialising the answer) is held at its start until a
`/healthz` probe has been answered: in a worker thread the hold leaves the loop free and the probe
answers during the phase; on the loop, the hold blocks it, and the probe answers only after the
phase (the hold gives up after `HOLD_S`, so a broken proxy fails the test instead of hanging it).
What is checked is that order, not how long anything took; how long a probe waits while the
proxy works hard is measured by bench/availability.py (before preparation moved to worker
threads, a 12 MB tool result held a probe for ~1-2 s and 100,000 tiny messages for ~1.5-5.6 s on
2 shared cores; since, ~0.1-0.3 s).
"""

from __future__ import annotations

import asyncio
import http.client
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import orjson
import pytest
from proxy_harness import RunningProxy, make_settings, start_proxy
from shared_tokens import shared_counters

from proxy.engine.manifest import Prepared
from proxy.http import body as body_module
from proxy.http import handlers
from proxy.http.body import LARGE_BODY_BYTES
from proxy.tokens.counters import TokenCounter

HOLD_S = 60.0
"""How long a held phase waits for the probe before it gives up (only a broken proxy waits)."""


class Hold:
    """Holds the first call of one phase of the large request (once armed) until the test has
    seen `/healthz` answer, and remembers whether it did within the hold."""

    def __init__(self, phase: str) -> None:
        self.phase = phase
        self.armed = False
        self.entered = threading.Event()
        self.probe_answered = threading.Event()
        self.answered_during: bool | None = None

    def hold(self) -> None:
        if not self.armed or self.entered.is_set():
            return
        self.entered.set()
        self.answered_during = self.probe_answered.wait(HOLD_S)


class HeldCounter:
    """A counter whose first count (when armed) holds the preparation."""

    def __init__(self, counter: TokenCounter, hold: Hold) -> None:
        self.method = counter.method
        self._counter = counter
        self._hold = hold

    def count_text(self, text: str) -> int:
        self._hold.hold()
        return self._counter.count_text(text)

    def count_message(self, message: Any) -> int:
        self._hold.hold()
        return self._counter.count_message(message)

    def count_tools(self, tools: Any, tool_choice: Any) -> int:
        self._hold.hold()
        return self._counter.count_tools(tools, tool_choice)

    def count_request(self, body: Any) -> int:
        self._hold.hold()
        return self._counter.count_request(body)


class HeldCounters:
    """The run's loaded tokenizers, each counter held by `hold` (the app only calls
    `for_model`, and `loaded` before a first load)."""

    def __init__(self, hold: Hold) -> None:
        self._hold = hold

    def for_model(self, model: str, tokenizer: str = "auto") -> TokenCounter:
        return HeldCounter(shared_counters().for_model(model, tokenizer), self._hold)

    def loaded(self, model: str, tokenizer: str = "auto") -> bool:
        return shared_counters().loaded(model, tokenizer)


@contextmanager
def proxy_in_thread(counters: HeldCounters) -> Iterator[RunningProxy]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    settings = make_settings("http://127.0.0.1:9")  # dry runs never call the upstream
    started = start_proxy(settings, counters=counters)  # type: ignore[arg-type]
    running = asyncio.run_coroutine_threadsafe(started, loop).result(HOLD_S)
    try:
        yield running
    finally:
        asyncio.run_coroutine_threadsafe(running.stop(), loop).result(HOLD_S)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(HOLD_S)
        loop.close()


def healthz(port: int) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2 * HOLD_S)
    try:
        connection.request("GET", "/healthz")
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def dry_run(port: int, body: dict[str, Any]) -> dict[str, Any]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=4 * HOLD_S)
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
    return {"model": "gpt-4o", "messages": messages}  # a 128k window: over its trigger


def held(hold: Hold, work: Callable[..., Any], large: Callable[..., bool]) -> Callable[..., Any]:
    def call(*args: Any, **options: Any) -> Any:
        if large(*args):
            hold.hold()
        return work(*args, **options)

    return call


def answered_during_each_phase(
    monkeypatch: pytest.MonkeyPatch, body: dict[str, Any]
) -> tuple[dict[str, Hold], dict[str, Any]]:
    """Sends `body` as a dry run with each costly phase held until a probe has answered."""
    holds = {phase: Hold(phase) for phase in ("parse", "prepare", "answer")}
    parse, answer = body_module.loads_object, handlers._dry_run_answer
    large = held(holds["parse"], parse, lambda raw: len(raw) >= LARGE_BODY_BYTES)
    monkeypatch.setattr(body_module, "loads_object", large)
    monkeypatch.setattr(
        handlers,
        "_dry_run_answer",
        held(holds["answer"], answer, lambda prepared: isinstance(prepared, Prepared)),
    )
    with proxy_in_thread(HeldCounters(holds["prepare"])) as proxy:
        assert healthz(proxy.port) == 200
        small = {"model": "gpt-4.1", "messages": [{"role": "user", "content": "hi"}]}
        dry_run(proxy.port, small)  # under LARGE_BODY_BYTES: nothing is held
        for hold in holds.values():
            hold.armed = True
        answers: list[dict[str, Any]] = []
        client = threading.Thread(target=lambda: answers.append(dry_run(proxy.port, body)))
        client.start()
        phases = list(holds.values())  # in the order the request goes through them
        try:
            for i, hold in enumerate(phases):
                while not hold.entered.wait(0.01):  # code that moved is passed by unheld
                    later = any(h.entered.is_set() for h in phases[i + 1 :])
                    passed = later or not client.is_alive()
                    assert not passed, f"the {hold.phase} phase was never held: moved?"
                assert healthz(proxy.port) == 200
                hold.probe_answered.set()
        finally:
            for hold in phases:  # nothing stays held after a failure
                hold.probe_answered.set()
            client.join(4 * HOLD_S)
    assert len(answers) == 1, "the dry run did not answer"
    return holds, answers[0]


def assert_answered_during_each_phase(holds: dict[str, Hold]) -> None:
    for hold in holds.values():
        assert hold.answered_during is True, f"/healthz waited for the {hold.phase} phase"


def test_healthz_answers_while_a_large_tool_result_is_prepared(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    holds, answer = answered_during_each_phase(monkeypatch, large_tool_result(4))
    assert answer["changed"] is True
    assert answer["manifest"]["outcome"] == "reduced"
    assert_answered_during_each_phase(holds)


def test_healthz_answers_while_many_messages_are_prepared(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    holds, answer = answered_during_each_phase(monkeypatch, many_messages(40_000))
    manifest = answer["manifest"]
    assert manifest["tokens_before"] > manifest["trigger"]  # over the trigger: reduced too
    assert manifest["outcome"] in ("reduced", "reduced_above_target")
    assert_answered_during_each_phase(holds)
