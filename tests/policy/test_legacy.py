"""Keys that moved into the steps: old files still load, prepare the same bytes, and warn."""

from __future__ import annotations

import io
import logging
import textwrap
from pathlib import Path
from typing import Any

import pytest
from pipeline_harness import agent_history, make_harness, write_policy
from shared_tokens import shared_counters

from proxy.engine.policy import Policy
from proxy.errors import ProxyError
from proxy.policy.cli import EXIT_OK, EXIT_PROBLEMS, check
from proxy.policy.legacy import MOVED_KEYS, deprecation_warnings, migrate
from proxy.policy.store import PolicyLoadError, PolicyStore

BUDGET = "budget: {context_window: 6000, reserved_output: 500, safety_margin: 0}\n"

# (old spelling, new spelling) of the same policy, each a mapping of file name -> text.
PAIRS: dict[str, tuple[dict[str, str], dict[str, str]]] = {
    "coding-agent-like": (
        {
            "test.yaml": """
                extends: default
                protect: {recent_tool_exchanges: 3}
                tool_results:
                  offload_threshold_chars: 1500
                  preview_head_chars: 200
                  preview_tail_chars: 300
                  exclude_tools: [todo_write]
                  refetchable_tools: [read_file]
                  clear_at_least: 200
            """
        },
        {
            "test.yaml": """
                extends: default
                steps:
                  - kind: condense_tool_results
                  - kind: offload_tool_results
                    threshold_chars: 1500
                    preview_head_chars: 200
                    preview_tail_chars: 300
                    exclude_tools: [todo_write]
                  - kind: clear_tool_results
                    keep_recent_exchanges: 3
                    exclude_tools: [todo_write]
                    refetchable_tools: [read_file]
                    clear_at_least: 200
                  - kind: drop_turns
            """
        },
    ),
    "turns-and-no-last-resort": (
        {
            "test.yaml": """
                protect: {recent_turns: 4, recent_tool_exchanges: 1,
                          clear_recent_before_refusing: false}
                tool_results: {offload_threshold_chars: 20000}
            """
        },
        {
            "test.yaml": """
                steps:
                  - {kind: condense_tool_results}
                  - {kind: offload_tool_results, threshold_chars: 20000}
                  - {kind: clear_tool_results, keep_recent_exchanges: 1,
                     clear_recent_before_refusing: false}
                  - {kind: drop_turns, keep_recent_turns: 4}
            """
        },
    ),
    "excluded-read-tool": (
        {"test.yaml": "tool_results: {exclude_tools: ['read_*']}\n"},
        {
            "test.yaml": """
                steps:
                  - {kind: condense_tool_results}
                  - {kind: offload_tool_results, exclude_tools: ['read_*']}
                  - {kind: clear_tool_results, exclude_tools: ['read_*']}
                  - {kind: drop_turns}
            """
        },
    ),
    "old-key-in-a-model-override": (
        {
            "test.yaml": """
                models:
                  "gpt-4o*": {tool_results: {offload_threshold_chars: 1000}}
            """
        },
        {
            "test.yaml": """
                models:
                  "gpt-4o*":
                    steps: [{kind: condense_tool_results},
                            {kind: offload_tool_results, threshold_chars: 1000},
                            {kind: clear_tool_results}, {kind: drop_turns}]
            """
        },
    ),
    "old-child-of-a-new-parent": (
        {
            "base.yaml": "steps: [{kind: offload_tool_results, threshold_chars: 9000},"
            " {kind: drop_turns, keep_recent_turns: 3}]\n",
            "test.yaml": "extends: base\ntool_results: {offload_threshold_chars: 1200}\n"
            "protect: {recent_turns: 1}\n",
        },
        {
            "base.yaml": "steps: [{kind: offload_tool_results, threshold_chars: 9000},"
            " {kind: drop_turns, keep_recent_turns: 3}]\n",
            "test.yaml": "extends: base\nsteps: [{kind: offload_tool_results,"
            " threshold_chars: 1200}, {kind: drop_turns, keep_recent_turns: 1}]\n",
        },
    ),
}


def write_files(directory: Path, files: dict[str, str]) -> Path:
    directory.mkdir()
    for name, text in files.items():
        text = textwrap.dedent(text).lstrip("\n")
        if name == "test.yaml":
            text = BUDGET + text
        write_policy(directory, text, name=name.removesuffix(".yaml"))
    return directory


def requests() -> list[dict[str, Any]]:
    bodies = [
        {"model": model, "messages": agent_history(turns, result_chars=chars, seed=turns)}
        for model in ("gpt-4o", "gpt-4-turbo", "other-model")
        for turns, chars in ((1, 500), (3, 2500), (6, 3000), (12, 1200), (30, 6000))
    ]
    todo = agent_history(4, result_chars=3000)
    calls = [m for m in todo if m.get("tool_calls")]
    calls[1]["tool_calls"][0]["function"]["name"] = "todo_write"
    return [*bodies, {"model": "gpt-4o", "messages": todo}]


async def outcome(harness: Any, body: dict[str, Any]) -> tuple[Any, ...]:
    try:
        prepared = await harness.prepare(body)
    except ProxyError as exc:
        return ("refused", exc.code, exc.message, exc.details)
    return ("prepared", prepared.body, prepared.changed, prepared.manifest)


@pytest.mark.parametrize("pair", list(PAIRS))
async def test_old_and_new_spelling_prepare_every_request_to_the_same_bytes(
    pair: str, tmp_path: Path
) -> None:
    old_files, new_files = PAIRS[pair]
    counters = shared_counters()
    old = make_harness(write_files(tmp_path / "old", old_files), counters)
    new = make_harness(write_files(tmp_path / "new", new_files), counters)
    changed = 0
    for body in requests():
        before, after = await outcome(old, body), await outcome(new, body)
        assert before == after, body["model"]
        changed += before[0] == "prepared" and before[2]
    assert changed  # the policies really acted


@pytest.mark.parametrize("pair", list(PAIRS))
def test_old_and_new_spelling_resolve_to_the_same_policies(pair: str, tmp_path: Path) -> None:
    old_files, new_files = PAIRS[pair]
    old = PolicyStore.load(write_files(tmp_path / "old", old_files))
    new = PolicyStore.load(write_files(tmp_path / "new", new_files))
    assert old.warnings and not new.warnings
    for model in ("gpt-4o", "gpt-4o-mini", "claude-3", ""):
        before, after = old.resolve("test", model), new.resolve("test", model)
        assert before.model_copy(update={"models": {}}) == after.model_copy(update={"models": {}})


# --- warnings ------------------------------------------------------------------------------------


def test_each_old_key_warns_naming_the_file_the_old_and_the_new_key(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_policy(
        tmp_path,
        "protect: {recent_turns: 3, first_user: false}\n"
        "tool_results: {exclude_tools: [x]}\n"
        "models:\n  'gpt-*': {tool_results: {clear_at_least: 10}}\n",
        name="acme",
    )
    with caplog.at_level(logging.WARNING, logger="ctxproxy.policy"):
        store = PolicyStore.load(tmp_path, include_bundled=False)
    expected = [
        "acme.yaml: protect.recent_turns is deprecated, set steps[kind=drop_turns]"
        ".keep_recent_turns instead (the value is carried over for now)",
        "acme.yaml: tool_results.exclude_tools is deprecated, set "
        "steps[kind=offload_tool_results].exclude_tools and "
        "steps[kind=clear_tool_results].exclude_tools instead (the value is carried over for now)",
        "acme.yaml: models.gpt-*.tool_results.clear_at_least is deprecated, set "
        "steps[kind=clear_tool_results].clear_at_least instead (the value is carried over for now)",
    ]
    assert list(store.warnings) == expected
    assert [r.getMessage() for r in caplog.records] == expected
    assert store.get("acme").protect.first_user is False  # what stays in protect still works


def test_policy_check_prints_the_warnings_and_succeeds(tmp_path: Path) -> None:
    write_policy(tmp_path, "extends: default\ntool_results: {preview_tail_chars: 10}\n", "acme")
    out = io.StringIO()
    assert check(tmp_path, out) == EXIT_OK
    warning, ok = out.getvalue().splitlines()
    assert warning == (
        "warning: acme.yaml: tool_results.preview_tail_chars is deprecated, set "
        "steps[kind=offload_tool_results].preview_tail_chars instead "
        "(the value is carried over for now)"
    )
    assert ok.startswith("ok: 8 policies: ")


def test_policy_check_prints_the_warnings_with_the_problems(tmp_path: Path) -> None:
    write_policy(tmp_path, "protect: {recent_turns: 1}\nmode: squash\n", "acme")
    out = io.StringIO()
    assert check(tmp_path, out) == EXIT_PROBLEMS
    warning, problem = out.getvalue().splitlines()
    assert warning.startswith("warning: acme.yaml: protect.recent_turns is deprecated")
    assert problem.startswith("acme.yaml: mode: ")


def test_the_bundled_presets_use_the_current_spelling() -> None:
    assert PolicyStore.load(None).warnings == ()


def test_deprecation_warnings_skip_what_is_not_a_mapping() -> None:
    assert deprecation_warnings("a.yaml", {"tool_results": 5, "models": {"x": 3}}) == []
    assert deprecation_warnings("a.yaml", {"protect": {"first_user": True}}) == []


# --- which value wins ---------------------------------------------------------------------------


def load_one(tmp_path: Path, files: dict[str, str]) -> Policy:
    for name, text in files.items():
        write_policy(tmp_path, textwrap.dedent(text).lstrip("\n"), name=name)
    return PolicyStore.load(tmp_path, include_bundled=False).get("acme")


def settings_of(policy: Policy, kind: str) -> dict[str, Any]:
    [entry] = [s for s in policy.steps if s.kind == kind]
    return entry.model_dump()


def test_the_step_entry_of_the_same_file_wins(tmp_path: Path) -> None:
    policy = load_one(
        tmp_path,
        {
            "acme": """
                tool_results: {preview_head_chars: 10, preview_tail_chars: 20}
                steps: [{kind: offload_tool_results, preview_head_chars: 99}]
            """
        },
    )
    offload = settings_of(policy, "offload_tool_results")
    assert (offload["preview_head_chars"], offload["preview_tail_chars"]) == (99, 20)


def test_an_old_key_of_a_child_wins_over_its_parents_step_entry(tmp_path: Path) -> None:
    policy = load_one(
        tmp_path,
        {
            "base": "steps: [{kind: clear_tool_results, keep_recent_exchanges: 5}]\n",
            "acme": "extends: base\nprotect: {recent_tool_exchanges: 1}\n",
        },
    )
    assert settings_of(policy, "clear_tool_results")["keep_recent_exchanges"] == 1


def test_an_old_key_of_a_parent_fills_the_childs_step_entries(tmp_path: Path) -> None:
    policy = load_one(
        tmp_path,
        {
            "base": "tool_results: {clear_at_least: 300, refetchable_tools: [a]}\n",
            "acme": "extends: base\n"
            "steps: [{kind: clear_tool_results, refetchable_tools: [b]}, {kind: drop_turns}]\n",
        },
    )
    clear = settings_of(policy, "clear_tool_results")
    assert (clear["clear_at_least"], clear["refetchable_tools"]) == (300, ["b"])


def test_a_policy_without_steps_gets_the_default_steps_with_the_old_values(
    tmp_path: Path,
) -> None:
    policy = load_one(tmp_path, {"acme": "protect: {recent_turns: 6}\n"})
    assert [s.kind for s in policy.steps] == [s.kind for s in Policy().steps]
    assert settings_of(policy, "drop_turns")["keep_recent_turns"] == 6


def test_an_old_key_without_a_step_to_take_it_is_dropped(tmp_path: Path) -> None:
    policy = load_one(
        tmp_path, {"acme": "protect: {recent_tool_exchanges: 0}\nsteps: [{kind: drop_turns}]\n"}
    )
    assert [s.kind for s in policy.steps] == ["drop_turns"]


# --- problems in old sections -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "tool_results: {offload_threshold_chars: -1}\n",
            "acme.yaml: tool_results.offload_threshold_chars: Input should be greater than or "
            "equal to 0",
        ),
        (
            "tool_results: {preview_head_chars: 1, typo: 2}\n",
            "acme.yaml: tool_results.typo: unknown key (the tool_results section is deprecated: "
            "its settings moved to the steps)",
        ),
        (
            "tool_results: [1]\n",
            "acme.yaml: tool_results: deprecated section, and not a mapping of its old keys",
        ),
        (
            "protect: {recent_turns: 1, recent_turn: 2}\n",
            "acme.yaml: protect.recent_turn: unknown key",
        ),
    ],
)
def test_problems_in_old_keys_name_them_as_written(
    tmp_path: Path, text: str, expected: str
) -> None:
    write_policy(tmp_path, text, name="acme")
    with pytest.raises(PolicyLoadError) as info:
        PolicyStore.load(tmp_path, include_bundled=False)
    assert info.value.problems == (expected,)


def test_migrate_leaves_current_spelling_alone() -> None:
    data = {"steps": [{"kind": "drop_turns", "keep_recent_turns": 1}], "protect": {"pinned": []}}
    migration = migrate(data, [data])
    assert migration.data == data and not migration.origins and not migration.problems


def test_every_moved_key_names_a_real_setting_of_a_step() -> None:
    for moved in MOVED_KEYS:
        for kind, key in moved.targets:
            (config,) = Policy.model_validate({"steps": [{"kind": kind}]}).steps
            assert key in type(config).model_fields, (moved.old, kind, key)
