"""offload_messages: oversized user (and, when asked, system) messages become a preview naming the
stored original (issue 12.8)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from context_harness import artifact_id, assistant, big, make_ctx, policy, system, user
from pipeline_harness import TENANT, make_harness, write_policy
from shared_tokens import shared_counters

from proxy.engine.step_api import PrepareContext
from proxy.engine.steps.offload_messages import OffloadMessages, OffloadMessagesConfig
from proxy.engine.tool_text import StoredText, preview
from proxy.errors import ProxyError
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.formats.openai_chat.fields import with_content
from proxy.tokens.counters import TokenCounters

TASK = big("task", 3000)
PASTE = big("paste", 5000)
PROMPT = big("prompt", 4000)
SETTINGS = {"threshold_chars": 1000, "preview_head_chars": 100, "preview_tail_chars": 50}


def history() -> list[dict[str, Any]]:
    """Units: u0 the task (long), u1 answer, u2 a long pasted message, u3 answer, u4 short."""
    return [
        system(PROMPT),
        user(TASK),
        assistant("Working on it."),
        user(PASTE),
        assistant("Read it."),
        user("Thanks."),
    ]


def step(ctx: PrepareContext, **settings: Any) -> OffloadMessages:
    return OffloadMessages(OffloadMessagesConfig(**{**SETTINGS, **settings}), ctx)


def expected(ctx: PrepareContext, index: int, text: str, role: str = "user") -> str:
    return preview(
        StoredText(artifact_id(text), text, len(text)),
        text,
        ctx.message_costs[index],
        100,
        50,
        True,
        ctx.own_text_mac,
        what=f"{role} message",
    )


def test_defaults_leave_the_task_and_the_system_prompt_alone() -> None:
    config = OffloadMessagesConfig()
    assert (config.threshold_chars, config.first_user, config.system) == (20_000, False, False)
    assert config.when == "over_trigger"
    ctx = make_ctx(history())
    offload = step(ctx)
    plan = offload.plan(ctx)
    full = [ctx.unit_cost(u) for u in range(5)]
    assert [u for u in range(5) if plan.costs[u] < full[u]] == [2]  # the pasted message only
    out = offload.rewrite(ctx, list(range(5)))
    [edit] = out.edits
    assert (edit.index, edit.artifact_id, out.units) == (3, artifact_id(PASTE), [2])
    assert edit.message == with_content(ctx.messages[3], expected(ctx, 3, PASTE))
    assert edit.message is not None and "user message offloaded" in edit.message["content"]
    assert "untrusted tool output" not in edit.message["content"]
    artifact = out.artifacts[artifact_id(PASTE)]
    assert (artifact.content, artifact.kind) == (PASTE, "message")
    assert out.tokens_freed == full[2] - plan.costs[2] > 0
    assert offload.prefix_output(ctx) is None


def test_first_user_and_system_when_asked() -> None:
    ctx = make_ctx(history())
    offload = step(ctx, first_user=True, system=True)
    assert [e.index for e in offload.rewrite(ctx, list(range(5))).edits] == [1, 3]
    prefix = offload.prefix_output(ctx)
    assert prefix is not None
    [edit] = prefix.edits
    assert edit.index == 0
    assert edit.message == with_content(ctx.messages[0], expected(ctx, 0, PROMPT, "system"))
    assert prefix.reason == "system message over 1000 chars: offloaded"


def test_pinned_and_non_text_messages_are_never_offloaded() -> None:
    messages = history()
    messages[3] = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": PASTE}}]}
    ctx = make_ctx(messages, policy(protect={"pinned": [{"contains": "Working"}]}))
    assert step(ctx).rewrite(ctx, list(range(5))).edits == []
    pinned = make_ctx(history(), policy(protect={"pinned": [{"contains": "paste:"}]}))
    assert step(pinned).rewrite(pinned, list(range(5))).edits == []


SMALL = """
budget: {context_window: 4000, reserved_output: 200, safety_margin: 0}
steps:
  - {kind: offload_tool_results}
  - {kind: offload_messages, threshold_chars: 4000}
  - {kind: clear_tool_results}
  - {kind: drop_turns}
"""


@pytest.fixture(scope="module")
def counters() -> TokenCounters:
    return shared_counters()


async def test_a_huge_pasted_message_is_previewed_instead_of_refused(
    tmp_path: Path, counters: TokenCounters
) -> None:
    pasted = big("log", 30_000)
    messages = [user("Task: look at my logs."), assistant("Paste them."), user(pasted)]
    request = {"model": "gpt-4o", "messages": messages}
    write_policy(
        tmp_path, SMALL.replace("  - {kind: offload_messages, threshold_chars: 4000}\n", "")
    )
    with pytest.raises(ProxyError):  # without the step: the current turn cannot fit
        await make_harness(tmp_path, counters).prepare(request)
    write_policy(tmp_path, SMALL)
    h = make_harness(tmp_path, counters)
    prepared = await h.prepare(request)
    assert prepared.manifest.tokens_after <= prepared.manifest.allowance
    last = prepared.parsed["messages"][-1]
    assert h.own_text(last["content"]).startswith("[ctxproxy: user message offloaded as artifact")
    assert last["content"].endswith(pasted[-500:])
    [action] = prepared.manifest.actions
    stored = await h.store.get(TENANT.scope, action.artifact_ids[0])
    assert stored is not None and stored.content == pasted


async def test_an_oversized_system_prompt_is_offloaded_when_asked(
    tmp_path: Path, counters: TokenCounters
) -> None:
    prompt = big("rules", 30_000)
    request = {"model": "gpt-4o", "messages": [system(prompt), user("Go.")]}
    write_policy(
        tmp_path, SMALL.replace("threshold_chars: 4000", "threshold_chars: 4000, system: true")
    )
    h = make_harness(tmp_path, counters)
    prepared = await h.prepare(request)
    first = prepared.parsed["messages"][0]
    assert first["role"] == "system"
    assert h.own_text(first["content"]).startswith("[ctxproxy: system message offloaded")
    assert prepared.manifest.tokens_after <= prepared.manifest.allowance
    assert prepared.synthetic is not None


def test_the_quick_scan_before_parsing() -> None:
    messages, size = history(), 10**6
    assert not OffloadMessagesConfig(**SETTINGS).acts_under_trigger(OPENAI_CHAT, messages, size)
    always = OffloadMessagesConfig(**SETTINGS, when="always")
    assert always.acts_under_trigger(OPENAI_CHAT, messages, size)
    assert not always.acts_under_trigger(OPENAI_CHAT, messages, 1000)  # nothing can be longer
    only_system = [messages[0], user("short")]
    assert not always.acts_under_trigger(OPENAI_CHAT, only_system, size)
    with_system = always.model_copy(update={"system": True})
    assert with_system.acts_under_trigger(OPENAI_CHAT, only_system, size)


# -- mutation run 4: exact thresholds, the plan's flags, what is stored and freed ------------------


def test_a_message_of_exactly_the_threshold_is_kept_and_one_more_char_is_offloaded() -> None:
    for extra, offloaded in ((0, []), (1, [3])):
        messages = history()
        messages[3] = user("p" * (1000 + extra))
        ctx = make_ctx(messages)
        assert [e.index for e in step(ctx).rewrite(ctx, list(range(5))).edits] == offloaded
        always = OffloadMessagesConfig(**SETTINGS, when="always")
        assert always.acts_under_trigger(OPENAI_CHAT, messages[2:], 10**6) == bool(offloaded)


def test_the_quick_scan_with_system_also_looks_at_user_messages() -> None:
    always = OffloadMessagesConfig(**SETTINGS, when="always", system=True)
    assert always.acts_under_trigger(OPENAI_CHAT, [system("short"), user(PASTE)], 10**6)


@pytest.mark.parametrize(("when", "seen"), [("always", True), ("over_trigger", False)])
def test_the_plan_acts_when_seen_only_when_always(when: str, seen: bool) -> None:
    ctx = make_ctx(history())
    assert step(ctx, when=when).plan(ctx).when_seen is seen


def test_what_is_stored_and_freed_for_each_message() -> None:
    ctx = make_ctx(history())
    out = step(ctx, first_user=True).rewrite(ctx, list(range(5)))
    assert [e.index for e in out.edits] == [1, 3]
    freed = [ctx.message_costs[e.index] - ctx.counter.count_message(e.message) for e in out.edits]
    assert min(freed) > 0 and out.tokens_freed == sum(freed)
    assert [(a.kind, a.meta) for a in out.artifacts.values()] == [
        ("message", {"message_role": "user", "messages": 1, "step": "offload_messages"}),
        ("message", {"message_role": "user", "messages": 3, "step": "offload_messages"}),
    ]


def test_pinned_units_are_not_rewritten_and_keep_their_cost() -> None:
    ctx = make_ctx(history(), policy(protect={"pinned": [{"contains": "paste:"}]}))
    offload = step(ctx)
    assert offload.plan(ctx).costs[2] == ctx.unit_cost(2)
    assert offload.rewrite(ctx, list(range(5))).units == []


def test_a_conversation_without_a_user_message_offloads_nothing() -> None:
    ctx = make_ctx([system(PROMPT), assistant(PASTE)])
    offload = step(ctx)
    assert offload.rewrite(ctx, list(range(len(ctx.units)))).edits == []


def test_the_proxys_own_system_preview_sent_back_is_not_offloaded_again() -> None:
    """(A user message of the proxy's is pinned before this step sees it; the system prefix is
    not made of units, so the step checks the tag itself.)"""
    shown = expected(make_ctx(history()), 0, PROMPT, "system")
    messages = history()
    messages[0] = system(shown)
    ctx = make_ctx(messages)
    assert len(shown) > 300
    prefix = step(ctx, threshold_chars=300, system=True).prefix_output(ctx)
    assert prefix is not None and prefix.edits == []
    messages[0] = system("q" * len(shown))  # the same length, not the proxy's: offloaded
    other = make_ctx(messages)
    prefix = step(other, threshold_chars=300, system=True).prefix_output(other)
    assert prefix is not None and [e.index for e in prefix.edits] == [0]


@pytest.mark.parametrize(("saved", "offloaded"), [(0, False), (1, True)])
def test_a_preview_must_free_at_least_one_token(
    monkeypatch: pytest.MonkeyPatch, saved: int, offloaded: bool
) -> None:
    ctx = make_ctx(history())
    real = ctx.counter.count_message

    def count(message: dict[str, Any]) -> int:
        if "user message offloaded" in str(message.get("content")):
            return ctx.message_costs[3] - saved
        return real(message)

    monkeypatch.setattr(ctx.counter, "count_message", count)
    out = step(ctx).rewrite(ctx, [2])
    assert ([e.index for e in out.edits], out.tokens_freed) == ([3] * offloaded, saved)
