"""The policy's `cache_marks` on the request that goes (`engine.cache_marks`): breakpoints added
to a request without any for an upstream that caches at them, the client's kept, the proxy's
notice of dropped turns marked, the byte-identical path kept for `keep`, and what the provider
will write recorded for the dry run's estimate."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from pipeline_harness import SMALL_BUDGET, TENANT, client_bytes, make_harness
from shared_tokens import shared_counters

from proxy.engine.cache_marks import marks_mode
from proxy.engine.manifest import Outcome, Prepared
from proxy.engine.policy import Policy
from proxy.engine.prepare_request import FIRST_CALL, CallOptions
from proxy.formats.anthropic_messages import ANTHROPIC_MESSAGES
from proxy.formats.openai_chat import OPENAI_CHAT

MARKING = dataclasses.replace(FIRST_CALL, cache_marks=True)
MARK = {"type": "ephemeral"}
DROPS = SMALL_BUDGET + "steps:\n  - {kind: drop_turns, keep_recent_turns: 2}\n"


def small_body(steps: int = 2, result: str = "ok") -> dict[str, Any]:
    """A task, then `steps` turns: a call, its result, an answer and the next instruction."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the build."}]
    for i in range(steps):
        messages += [
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": f"t{i}", "name": "bash", "input": {"cmd": "make"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"t{i}", "content": result},
            ]},
        ]  # fmt: skip
        if i < steps - 1:
            messages += [{"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
                         {"role": "user", "content": f"Now step {i + 1}."}]  # fmt: skip
    return {"model": "claude-sonnet-4-5", "max_tokens": 500, "system": "Be brief.",
            "messages": messages}  # fmt: skip


async def prepared(
    tmp_path: Path, policy: str, body: dict[str, Any], call: CallOptions = MARKING
) -> Prepared:
    (tmp_path / "test.yaml").write_text(policy)
    harness = make_harness(tmp_path, shared_counters())
    return await harness.preparer.prepare(
        body, client_bytes(body), TENANT, ANTHROPIC_MESSAGES, call=call
    )


def test_only_modes_that_change_requests_on_upstreams_that_cache_at_marks() -> None:
    assert marks_mode(Policy(), True) == "auto"
    assert marks_mode(Policy(), False) is None
    assert marks_mode(Policy(cache_marks="off"), True) == "off"
    assert marks_mode(Policy(mode="compact"), True) == "auto"
    for mode in ("off", "inspect", "reject"):
        assert marks_mode(Policy(mode=mode), True) is None


async def test_a_request_under_its_trigger_without_marks_goes_with_them(tmp_path: Path) -> None:
    body = small_body()
    got = await prepared(tmp_path, "extends: default\n", body)
    sent = json.loads(got.body)
    assert got.changed and got.manifest.outcome == Outcome.within_trigger
    assert sent["system"] == [{"type": "text", "text": "Be brief.", "cache_control": MARK}]
    assert sent["messages"][-1]["content"][0]["cache_control"] == MARK
    marks = got.manifest.cache_marks
    assert marks is not None and marks["mode"] == "auto" and marks["client_marks"] == 0
    assert marks["placed"] == ["system[0]", "messages[4].content[0]", "messages[6].content[0]"]
    assert 0 < marks["written_tokens"] <= got.manifest.tokens_after
    assert marks["written_tokens_unchanged"] == 0
    assert "cache_control" not in json.dumps(body)  # the client's objects stay as they were


async def test_keep_and_client_marks_go_byte_identical(tmp_path: Path) -> None:
    body = small_body()
    got = await prepared(tmp_path, "extends: default\ncache_marks: keep\n", body)
    assert got.body == client_bytes(body) and not got.changed
    assert got.manifest.cache_marks is not None and got.manifest.cache_marks["placed"] == []
    body["messages"][-1]["content"][0]["cache_control"] = MARK
    got = await prepared(tmp_path, "extends: default\n", body)
    assert got.body == client_bytes(body) and not got.changed
    marks = got.manifest.cache_marks
    assert marks is not None and marks["client_marks"] == 1
    assert marks["written_tokens"] == marks["written_tokens_unchanged"] > 0


async def test_off_removes_the_clients_marks(tmp_path: Path) -> None:
    body = small_body()
    body["messages"][-1]["content"][0]["cache_control"] = MARK
    got = await prepared(tmp_path, "extends: default\ncache_marks: off\n", body)
    assert got.changed and "cache_control" not in got.body.decode()
    marks = got.manifest.cache_marks
    assert marks is not None and marks["removed"] == 1 and marks["written_tokens"] == 0
    assert marks["written_tokens_unchanged"] > 0


@pytest.mark.parametrize(
    ("policy", "call", "wire"),
    [
        ("extends: default\n", FIRST_CALL, ANTHROPIC_MESSAGES),  # the upstream does not cache so
        ("extends: default\nmode: inspect\n", MARKING, ANTHROPIC_MESSAGES),
        ("extends: default\n", MARKING, OPENAI_CHAT),
    ],
)
async def test_nothing_changes_where_marks_do_not_apply(
    tmp_path: Path, policy: str, call: CallOptions, wire: Any
) -> None:
    body = small_body() if wire is ANTHROPIC_MESSAGES else {
        "model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]
    }  # fmt: skip
    (tmp_path / "test.yaml").write_text(policy)
    harness = make_harness(tmp_path, shared_counters())
    got = await harness.preparer.prepare(body, client_bytes(body), TENANT, wire, call=call)
    assert got.body == client_bytes(body) and got.manifest.cache_marks is None


async def test_broken_input_forwarded_untouched_gets_no_marks(tmp_path: Path) -> None:
    body = small_body(steps=24, result="a long log line of the failing build\n" * 40)
    body["messages"].pop(1)  # a result without its call
    got = await prepared(tmp_path, DROPS + "on_invalid: forward\n", body)
    assert got.manifest.outcome == Outcome.invalid_forwarded
    assert got.body == client_bytes(body) and got.manifest.cache_marks is None


async def test_the_notice_of_dropped_turns_is_marked_and_stays_so(tmp_path: Path) -> None:
    (tmp_path / "test.yaml").write_text(DROPS)
    harness = make_harness(tmp_path, shared_counters())
    sent, placed = [], []
    first = small_body(steps=24, result="a long log line of the failing build\n" * 40)
    second = {**first, "messages": [*first["messages"], *small_body(25)["messages"][-4:-2]]}
    for body in (first, second):  # two consecutive requests of one conversation
        got = await harness.preparer.prepare(
            body, client_bytes(body), TENANT, ANTHROPIC_MESSAGES, call=MARKING
        )
        assert got.manifest.outcome in (Outcome.reduced, Outcome.reduced_above_target)
        marks = got.manifest.cache_marks
        assert marks is not None and len(marks["placed"]) == 4
        assert marks["written_tokens"] <= got.manifest.tokens_after
        sent.append(json.loads(got.body))
        placed.append(marks["placed"])
    notice = sent[0]["messages"][1]
    assert notice["content"][0]["text"].startswith("[ctxproxy#")
    assert "earlier turn" in notice["content"][0]["text"]
    assert notice["content"][0]["cache_control"] == MARK
    assert placed[0][:2] == placed[1][:2] == ["system[0]", "messages[1].content[0]"]
    assert sent[1]["messages"][1] == notice
    # the block that ended the first request is where the second reads its prefix
    assert placed[0][3] == placed[1][2]


async def test_a_model_override_sets_its_own_mode(tmp_path: Path) -> None:
    policy = 'extends: default\nmodels:\n  "claude-sonnet-*": {cache_marks: keep}\n'
    body = small_body()
    got = await prepared(tmp_path, policy, body)
    assert got.body == client_bytes(body) and got.manifest.cache_marks is not None
    assert got.manifest.cache_marks["mode"] == "keep"
    other = await prepared(tmp_path, policy, {**body, "model": "claude-haiku-4-5"})
    assert other.changed and other.manifest.cache_marks is not None
    assert other.manifest.cache_marks["mode"] == "auto"


async def test_a_bad_mode_is_an_error_naming_the_key(tmp_path: Path) -> None:
    from proxy.policy.store import PolicyLoadError, PolicyStore

    (tmp_path / "test.yaml").write_text("extends: default\ncache_marks: sometimes\n")
    with pytest.raises(PolicyLoadError, match=r"test\.yaml: cache_marks: Input should be 'auto'"):
        PolicyStore.load(tmp_path)
