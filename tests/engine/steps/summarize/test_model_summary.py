"""engine/compaction.py: a span's summary from a summarizer, frozen, rolled up, bounded in time."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from context_harness import assistant, counter, mac_for, make_ctx, result, system, user

from proxy.artifacts.store import MemoryStore
from proxy.engine.step_api import StepServices
from proxy.engine.steps.summarize.model_summary import (
    ModelSettings,
    _call_label,
    identity,
    obtain,
    summarize_span,
    transcript,
)
from proxy.engine.steps.summarize.summarizer import (
    INSTRUCTIONS,
    SummarizerError,
    SummaryCall,
    SummaryReply,
)
from proxy.engine.tool_text import signed
from tests.engine.steps.summarize.test_step import history

SETTINGS = ModelSettings("m", None, 300, 1.0, 10_000)


def answer(fact: str) -> str:
    return json.dumps({"facts": [{"name": "f", "value": fact}], "decisions": [],
                       "open_questions": [], "resources": [], "errors": []})


class Recording:
    def __init__(self, delay: float = 0.0) -> None:
        self.calls: list[SummaryCall] = []
        self.delay = delay

    async def summarize(self, call: SummaryCall) -> SummaryReply:
        self.calls.append(call)
        await asyncio.sleep(self.delay)
        return SummaryReply(answer(f"v{len(self.calls)}"), "m-1", {"prompt_tokens": 7})


def services(summarizer: Any, store: MemoryStore) -> StepServices:
    return StepServices(store, "s", counter(), summarizer=summarizer)


def test_a_summary_is_frozen_and_the_next_cut_rolls_it_up_with_the_new_units_only() -> None:
    ctx = make_ctx(history())
    store, summarizer = MemoryStore(b"k"), Recording()

    async def go() -> None:
        first = await obtain(ctx, services(summarizer, store), SETTINGS, ([1, 2], []),
                             counter().count_text)
        assert (first.source, first.usage) == ("fresh", {"prompt_tokens": 7})
        assert first.summary is not None and first.summary.body.endswith("- f: v1")
        assert summarizer.calls[0].previous == ""
        assert summarizer.calls[0].transcript == "\n".join(transcript(ctx, [1, 2]))
        again = await obtain(ctx, services(summarizer, store), SETTINGS, ([1, 2], []),
                             counter().count_text)
        assert again.source == "cache" and again.summary == first.summary
        assert len(summarizer.calls) == 1
        rolled = await obtain(ctx, services(summarizer, store), SETTINGS,
                              ([1, 2, 3, 4], [1, 2]), counter().count_text)
        assert rolled.summary is not None and rolled.summary.body.endswith("- f: v2")
        call = summarizer.calls[1]
        assert call.previous == first.summary.body
        assert call.transcript == "\n".join(transcript(ctx, [3, 4]))
    asyncio.run(go())


def test_without_the_previous_summary_the_whole_span_is_summarized() -> None:
    ctx = make_ctx(history())
    summarizer = Recording()
    asyncio.run(obtain(ctx, services(summarizer, MemoryStore(b"k")), SETTINGS,
                       ([1, 2, 3, 4], [1, 2]), counter().count_text))
    [call] = summarizer.calls
    assert call.previous == "" and call.transcript == "\n".join(transcript(ctx, [1, 2, 3, 4]))


def test_timeouts_and_a_missing_summarizer_are_failures() -> None:
    ctx = make_ctx(history())
    slow = ModelSettings("m", None, 300, 0.05, 10_000)
    with pytest.raises(SummarizerError) as caught:
        asyncio.run(obtain(ctx, services(Recording(delay=1), MemoryStore(b"k")), slow,
                           ([1, 2], []), counter().count_text))
    assert caught.value.failure == "timeout"
    with pytest.raises(SummarizerError) as missing:
        asyncio.run(obtain(ctx, services(None, MemoryStore(b"k")), SETTINGS, ([1, 2], []),
                           counter().count_text))
    assert missing.value.failure == "upstream"


def test_the_transcript_names_roles_calls_and_results() -> None:
    ctx = make_ctx(history())
    lines = transcript(ctx, [2, 3])
    assert lines[0] == "user: Check the tests, the release is REL-4711."
    assert lines[1].startswith("[call] ") and "tests/test_core.py" in lines[1]
    assert lines[2].startswith("[result of d1] FAILED tests/test_core.py::test_merge")


def test_a_result_without_its_call_id_is_labelled_a_tool_call() -> None:
    assert [_call_label(("c1", "c2"), k) for k in (-1, 0, 1, 2)] == [
        "a tool call",
        "c1",
        "c2",
        "a tool call",
    ]


def test_a_models_summaries_are_keyed_by_model_upstream_and_size() -> None:
    assert identity(ModelSettings("m", "cheap", 300, 1.0, 10)) == "llm:v1:m:cheap:300"
    assert identity(ModelSettings(None, None, 300, 1.0, 10)) == "llm:v1:::300"


def test_no_summarizer_is_named_and_nothing_new_keeps_the_previous_summary() -> None:
    with pytest.raises(SummarizerError) as missing:
        asyncio.run(summarize_span(services(None, MemoryStore(b"k")), SETTINGS, "", ["x"],
                                   counter().count_text))
    assert str(missing.value) == "no summarizer is available for this request"
    unnamed = ModelSettings(None, None, 300, 1.0, 10_000)
    for settings, by in ((SETTINGS, "m"), (unnamed, "summarizer")):
        kept = asyncio.run(summarize_span(services(Recording(), MemoryStore(b"k")), settings,
                                          "- f: old", [], counter().count_text))
        assert (kept.body, kept.by, kept.usage) == ("- f: old", by, {})


def test_each_call_carries_the_instructions_and_settings_and_usage_is_summed() -> None:
    settings = ModelSettings("m", "cheap", 300, 1.0, 60)  # small batches: several calls
    summarizer = Recording()
    entries = [f"user: line {n} " + "word " * 30 for n in range(4)]
    made = asyncio.run(summarize_span(services(summarizer, MemoryStore(b"k")), settings, "",
                                      entries, counter().count_text))
    assert len(summarizer.calls) > 1
    assert {(c.instructions, c.max_tokens, c.model, c.upstream) for c in summarizer.calls} == {
        (INSTRUCTIONS, 300, "m", "cheap")
    }
    assert made.usage == {"prompt_tokens": 7 * len(summarizer.calls)}


def test_a_timeout_is_named_and_a_fresh_summary_says_how_long_it_took() -> None:
    ctx = make_ctx(history())
    slow = ModelSettings("m", None, 300, 0.05, 10_000)
    with pytest.raises(SummarizerError) as caught:
        asyncio.run(obtain(ctx, services(Recording(delay=1), MemoryStore(b"k")), slow,
                           ([1, 2], []), counter().count_text))
    assert str(caught.value) == "no summary within 0.05s"
    began = time.monotonic()
    made = asyncio.run(obtain(ctx, services(Recording(delay=0.01), MemoryStore(b"k")), SETTINGS,
                              ([1, 2], []), counter().count_text))
    assert 0.01 <= made.seconds <= time.monotonic() - began  # its wait, within the call


def test_an_item_without_a_role_is_an_item_in_the_transcript(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ctx = make_ctx(history())
    real = ctx.wire.pin_facts

    def no_role(item: Any) -> Any:
        facts = real(item)
        return (None, *facts[1:]) if item is ctx.messages[2] else facts

    monkeypatch.setattr(ctx.wire, "pin_facts", no_role)
    assert transcript(ctx, [1])[0] == "item: Starting with the config in conf/app.yaml."


def test_the_transcript_keeps_every_result_and_leaves_out_the_proxys_own_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    two_calls = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": c, "type": "function", "function": {"name": "ls", "arguments": "{}"}}
            for c in ("c1", "c2")
        ],
    }
    own = signed("[ctxproxy: a note]", mac_for("s"))
    messages = [system(), user("Go."), assistant(own), two_calls, result("c1", "one"),
                result("c2", "two"), assistant("Done.")]
    ctx = make_ctx(messages)
    lines = transcript(ctx, list(range(1, len(ctx.units))))
    assert [line.split("]")[0] for line in lines if line.startswith("[result")] == [
        "[result of c1", "[result of c2",
    ]
    assert not any("a note" in line for line in lines)
    monkeypatch.setattr(ctx.wire, "result_text", lambda item: None)
    assert "[result of c1] " in transcript(ctx, list(range(1, len(ctx.units))))
