"""PolicyStore: all-or-nothing loading, exact problem lines, extends, model overrides, reload."""

from __future__ import annotations

import asyncio
import logging
import os
import textwrap
from pathlib import Path

import pytest

from proxy.engine.policy import Policy
from proxy.policy.store import (
    RESOLVE_CACHE_SIZE,
    PolicyLoadError,
    PolicyStore,
    UnknownPolicy,
)

REPO = Path(__file__).resolve().parents[2]
POLICIES = REPO / "policies"
PRESETS = [
    "coding-agent",
    "compact",
    "default",
    "example-acme",
    "inspect",
    "research-agent",
    "strict",
]


def write(directory: Path, filename: str, text: str) -> Path:
    path = directory / filename
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def load(directory: Path) -> PolicyStore:
    return PolicyStore.load(directory, include_bundled=False)


def problems(directory: Path) -> list[str]:
    with pytest.raises(PolicyLoadError) as info:
        load(directory)
    assert str(info.value) == "\n".join(info.value.problems)
    return list(info.value.problems)


def touch_later(path: Path, seconds: int = 10) -> None:
    """Bump the mtime so a change is visible even on coarse-mtime file systems."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + seconds * 1_000_000_000))


# --- loading ----------------------------------------------------------------------------------


def test_loads_yaml_and_yml_named_after_the_file(tmp_path: Path) -> None:
    write(tmp_path, "acme.yaml", "mode: reject\n")
    write(tmp_path, "beta.yml", "mode: inspect\n")
    write(tmp_path, "empty.yaml", "")
    write(tmp_path, ".#acme.yaml", "garbage: [")  # editor temp file: skipped
    write(tmp_path, "notes.txt", "not a policy")
    store = load(tmp_path)
    assert store.names() == ["acme", "beta", "empty"]
    assert store.get("acme").name == "acme"
    assert store.get("acme").mode == "reject"
    assert store.get("beta").mode == "inspect"
    assert store.get("empty") == Policy(name="empty")
    assert "acme" in store
    assert "nope" not in store


def test_unknown_policy_is_a_clear_error_not_a_key_error(tmp_path: Path) -> None:
    write(tmp_path, "acme.yaml", "{}")
    store = load(tmp_path)
    with pytest.raises(UnknownPolicy, match=r"unknown policy 'nope' \(known: acme\)") as info:
        store.get("nope")
    assert not isinstance(info.value, KeyError)
    with pytest.raises(UnknownPolicy):
        store.resolve("nope", "gpt-4o")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "budget:\n  trgger: 0.5\n",
            "acme.yaml: budget.trgger: unknown key (did you mean 'trigger'?)",
        ),
        ("bugdet: {}\n", "acme.yaml: bugdet: unknown key (did you mean 'budget'?)"),
        ("budget:\n  target: 0\n", "acme.yaml: budget.target: Input should be greater than 0"),
        (
            "steps:\n  - kind: drop_turns\n    keep_recent_turns: lots\n",
            "acme.yaml: steps[0].keep_recent_turns: Input should be a valid integer, "
            "unable to parse string as an integer",
        ),
        (  # a deprecated key is carried into the steps, but its problems name it as written
            "protect:\n  recent_turns: lots\n",
            "acme.yaml: protect.recent_turns: Input should be a valid integer, "
            "unable to parse string as an integer",
        ),
        (
            "mode: squash\n",
            "acme.yaml: mode: Input should be 'off', 'inspect', 'reject', 'window' or 'compact'",
        ),
        (
            "budget:\n  trigger: 0.5\n  target: 0.8\n",
            "acme.yaml: budget.target: target (0.8) must not exceed trigger (0.5)",
        ),
        (
            "budget:\n  context_window: -5\n",
            "acme.yaml: budget.context_window: Input should be 'auto' "
            "or Input should be greater than 0",
        ),
        (
            "steps:\n  - kind: offload_tool_results\n  - kind: shrink\n",
            "acme.yaml: steps[1]: unknown step kind 'shrink' (expected one of "
            "'condense_tool_results', 'offload_tool_results', 'offload_messages', "
            "'clear_tool_results', 'drop_turns', 'summarize', 'defer_tools')",
        ),
        (
            "steps:\n  - kind: drop_turns\n    keep: 3\n",
            "acme.yaml: steps[0].keep: unknown key",
        ),
        ("steps:\n  - {}\n", "acme.yaml: steps[0]: missing 'kind'"),
        (
            "protect:\n  pinned:\n    - {role: user, contans: x}\n",
            "acme.yaml: protect.pinned[0].contans: unknown key",
        ),
        (
            "name: other\n",
            "acme.yaml: name: not allowed in a policy file (the policy is named after the file)",
        ),
        ("extends: [a, b]\n", "acme.yaml: extends: must be the name of a policy (a string)"),
        ("- mode: window\n", "acme.yaml: top level must be a mapping of policy keys, not a list"),
        ("just text\n", "acme.yaml: top level must be a mapping of policy keys, not a str"),
        ("mode: window\nmode: reject\n", "acme.yaml: line 2: duplicate key 'mode'"),
    ],
)
def test_each_problem_is_one_line_naming_file_and_key_path(
    tmp_path: Path, text: str, expected: str
) -> None:
    write(tmp_path, "acme.yaml", text)
    write(tmp_path, "fine.yaml", "mode: window\n")
    assert problems(tmp_path) == [expected]


def test_malformed_yaml_names_the_line(tmp_path: Path) -> None:
    write(tmp_path, "acme.yaml", "mode: window\nbudget:\n  trigger: 0.9\n   target: 0.5\n")
    (line,) = problems(tmp_path)
    assert line.startswith("acme.yaml: line 4: ")
    assert "mapping values are not allowed" in line


def test_every_broken_file_is_reported_and_nothing_loads(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", "budget: {trgger: 1}\n")
    write(tmp_path, "b.yaml", "mode: [\n")
    write(tmp_path, "c.yaml", "mode: window\n")
    lines = problems(tmp_path)
    assert lines[0] == "a.yaml: budget.trgger: unknown key (did you mean 'trigger'?)"
    assert lines[1].startswith("b.yaml: line ")
    assert len(lines) == 2


def test_same_name_twice_in_one_directory_is_an_error(tmp_path: Path) -> None:
    write(tmp_path, "acme.yaml", "{}")
    write(tmp_path, "acme.yml", "{}")
    assert problems(tmp_path) == ["acme.yml: policy 'acme' is also defined by acme.yaml"]


def test_missing_directory_is_a_load_error(tmp_path: Path) -> None:
    (line,) = problems(tmp_path / "missing")
    assert line.startswith(f"{tmp_path / 'missing'}: cannot list policy directory")


# --- extends ----------------------------------------------------------------------------------


def test_extends_deep_merges_mappings_and_replaces_lists(tmp_path: Path) -> None:
    write(
        tmp_path,
        "base.yaml",
        """
        description: base
        budget: {trigger: 0.8, target: 0.5, context_window: 100000}
        protect: {pinned: [{name: a}, {name: b}], first_user: false}
        steps: [{kind: offload_tool_results}, {kind: drop_turns}]
        """,
    )
    write(
        tmp_path,
        "child.yaml",
        """
        extends: base
        budget: {target: 0.6}
        protect: {pinned: [{name: c}]}
        steps: [{kind: clear_tool_results}]
        """,
    )
    write(tmp_path, "grandchild.yaml", "extends: child\nmode: reject\n")
    store = load(tmp_path)
    child = store.get("child")
    assert child.name == "child"
    assert child.extends == "base"
    assert child.description == "base"
    assert (child.budget.trigger, child.budget.target) == (0.8, 0.6)
    assert child.budget.context_window == 100_000
    assert [rule.name for rule in child.protect.pinned] == ["c"]  # replaced, not [a, b, c]
    assert child.protect.first_user is False
    assert [s.kind for s in child.steps] == ["clear_tool_results"]
    grandchild = store.get("grandchild")
    assert grandchild.mode == "reject"
    assert grandchild.budget.target == 0.6
    assert [rule.name for rule in grandchild.protect.pinned] == ["c"]
    assert store.get("base").budget.target == 0.5  # the parent is unchanged


def test_validation_happens_after_merging(tmp_path: Path) -> None:
    # On its own the child's target (0.95) exceeds the built-in trigger (0.9); merged it is fine.
    write(tmp_path, "base.yaml", "budget: {trigger: 0.99}\n")
    write(tmp_path, "child.yaml", "extends: base\nbudget: {target: 0.95}\n")
    assert load(tmp_path).get("child").budget.target == 0.95
    # ... and a child can break what its parent set: reported against the child.
    write(tmp_path, "child.yaml", "extends: base\nbudget: {target: 0.999}\n")
    assert problems(tmp_path) == [
        "child.yaml: budget.target: target (0.999) must not exceed trigger (0.99)"
    ]


def test_a_broken_parent_is_reported_once_not_in_every_child(tmp_path: Path) -> None:
    write(tmp_path, "base.yaml", "budget: {trgger: 0.5}\n")
    write(tmp_path, "child.yaml", "extends: base\n")
    write(tmp_path, "other.yaml", "extends: broken\n")
    write(tmp_path, "broken.yaml", "mode: [\n")
    lines = problems(tmp_path)
    assert lines[0].startswith("base.yaml: budget.trgger: unknown key")
    assert lines[1].startswith("broken.yaml: line ")
    assert len(lines) == 2


def test_extends_itself_is_a_cycle(tmp_path: Path) -> None:
    write(tmp_path, "acme.yaml", "extends: acme\n")
    assert problems(tmp_path) == ["acme.yaml: extends: cycle acme -> acme"]


def test_extends_cycle_is_reported_for_each_member(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", "extends: b\n")
    write(tmp_path, "b.yaml", "extends: c\n")
    write(tmp_path, "c.yaml", "extends: a\n")
    write(tmp_path, "d.yaml", "extends: a\n")  # hangs off the cycle: no line of its own
    assert problems(tmp_path) == [
        "a.yaml: extends: cycle a -> b -> c -> a",
        "b.yaml: extends: cycle b -> c -> a -> b",
        "c.yaml: extends: cycle c -> a -> b -> c",
    ]


def test_extends_a_missing_policy(tmp_path: Path) -> None:
    write(tmp_path, "acme.yaml", "extends: defualt\n")
    write(tmp_path, "beta.yaml", "extends: acme\n")
    assert problems(tmp_path) == [
        "acme.yaml: extends: unknown policy 'defualt' (known: acme, beta)"
    ]


def test_directory_policies_extend_and_replace_bundled_presets(tmp_path: Path) -> None:
    write(tmp_path, "acme.yaml", "extends: default\nbudget: {target: 0.5}\n")
    write(tmp_path, "strict.yaml", "mode: inspect\n")  # same name: replaces the bundled file
    store = PolicyStore.load(tmp_path)
    assert set(PRESETS) <= set(store.names())
    assert store.get("acme").budget.target == 0.5
    assert [s.kind for s in store.get("acme").steps] == [s.kind for s in store.get("default").steps]
    assert store.get("strict").mode == "inspect"


def test_load_without_directory_serves_the_bundled_presets() -> None:
    assert PolicyStore.load(None).names() == PRESETS


# --- per-model overrides -----------------------------------------------------------------------

OVERRIDES = """
budget: {context_window: 128000}
models:
  "gpt-4o-mini*":
    budget: {context_window: 64000}
  "gpt-4o*":
    budget: {context_window: 100000}
    read_tool: {max_rounds: 5}
  "*":
    counting: {tokenizer: estimate}
"""


def test_first_matching_glob_in_file_order_wins(tmp_path: Path) -> None:
    write(tmp_path, "acme.yaml", OVERRIDES)
    store = load(tmp_path)
    mini = store.resolve("acme", "gpt-4o-mini-2024-07-18")
    assert mini.budget.context_window == 64_000
    assert mini.read_tool.max_rounds == 4  # the gpt-4o* override does not apply as well
    assert mini.counting.tokenizer == "auto"
    full = store.resolve("acme", "gpt-4o")
    assert (full.budget.context_window, full.read_tool.max_rounds) == (100_000, 5)
    other = store.resolve("acme", "llama-3")
    assert (other.budget.context_window, other.counting.tokenizer) == (128_000, "estimate")
    assert all(p.name == "acme" for p in (mini, full, other))


def test_overrides_match_case_insensitively(tmp_path: Path) -> None:
    write(tmp_path, "acme.yaml", 'models:\n  "GPT-4o*": {mode: reject}\n')
    store = load(tmp_path)
    assert store.resolve("acme", "gpt-4o-2024").mode == "reject"
    assert store.resolve("acme", "Gpt-4O").mode == "reject"
    assert store.resolve("acme", "gpt-4").mode == "window"


def test_no_model_or_no_match_gives_the_policy_itself(tmp_path: Path) -> None:
    write(tmp_path, "acme.yaml", 'models:\n  "claude-*": {mode: reject}\n')
    store = load(tmp_path)
    assert store.resolve("acme", None) is store.get("acme")
    assert store.resolve("acme", "") is store.get("acme")
    assert store.resolve("acme", "gpt-4o") is store.get("acme")


def test_resolved_policies_are_precomputed_and_cached(tmp_path: Path) -> None:
    write(tmp_path, "acme.yaml", OVERRIDES)
    store = load(tmp_path)
    first = store.resolve("acme", "gpt-4o")
    assert store.resolve("acme", "gpt-4o") is first
    assert store.resolve("acme", "gpt-4o-2024") is first  # same glob, same object
    for i in range(RESOLVE_CACHE_SIZE + 10):  # bounded: many distinct models never grow it
        store.resolve("acme", f"model-{i}")
    assert store.resolve("acme", "gpt-4o") is first


def test_override_globs_of_a_child_come_before_its_parents(tmp_path: Path) -> None:
    write(tmp_path, "base.yaml", OVERRIDES)
    write(
        tmp_path,
        "child.yaml",
        """
        extends: base
        models:
          "gpt-4o-2024*":
            budget: {context_window: 50000}
          "gpt-4o*":
            read_tool: {max_rounds: 7}
        """,
    )
    store = load(tmp_path)
    assert list(store.get("child").models) == ["gpt-4o-2024*", "gpt-4o*", "gpt-4o-mini*", "*"]
    assert store.resolve("child", "gpt-4o-2024-08-06").budget.context_window == 50_000
    merged = store.resolve("child", "gpt-4o")  # same glob in both: the two overrides merge
    assert (merged.budget.context_window, merged.read_tool.max_rounds) == (100_000, 7)


def test_a_broken_override_is_a_load_error_naming_the_glob(tmp_path: Path) -> None:
    write(
        tmp_path,
        "acme.yaml",
        """
        models:
          "gpt-4o*":
            budget: {contxt_window: 64000}
          "claude-*":
            budget: {trigger: 0.5}
          "o1*":
            extends: strict
        """,
    )
    assert problems(tmp_path) == [
        "acme.yaml: models.gpt-4o*.budget.contxt_window: unknown key "
        "(did you mean 'context_window'?)",
        "acme.yaml: models.claude-*.budget.target: target (0.7) must not exceed trigger (0.5)",
        "acme.yaml: models.o1*.extends: not allowed in a model override",
    ]


def test_an_override_that_is_not_a_mapping(tmp_path: Path) -> None:
    write(tmp_path, "acme.yaml", 'models:\n  "gpt-4o*": 64000\n')
    assert problems(tmp_path) == ["acme.yaml: models.gpt-4o*: Input should be a valid dictionary"]


# --- hot reload --------------------------------------------------------------------------------


def test_reload_is_all_or_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    acme = write(tmp_path, "acme.yaml", "mode: window\n")
    write(tmp_path, "beta.yaml", "mode: inspect\n")
    store = load(tmp_path)
    assert store.reload_if_changed() is False  # nothing changed

    write(tmp_path, "acme.yaml", "mode: reject\n")
    touch_later(acme)
    assert store.reload_if_changed() is True
    assert store.get("acme").mode == "reject"

    # A broken edit in one file keeps the whole previous set, even a valid edit in another file.
    write(tmp_path, "beta.yaml", "mode: off\n")
    write(tmp_path, "acme.yaml", "budget: {trgger: 0.5}\n")
    touch_later(acme, 20)
    caplog.set_level(logging.ERROR, logger="ctxproxy.policy")
    assert store.reload_if_changed() is False
    assert store.get("acme").mode == "reject"
    assert store.get("beta").mode == "inspect"
    assert "acme.yaml: budget.trgger: unknown key" in caplog.text
    assert [r.name for r in caplog.records] == ["ctxproxy.policy"]

    caplog.clear()
    assert store.reload_if_changed() is False  # same broken state: not logged again
    assert caplog.records == []

    write(tmp_path, "acme.yaml", "budget: {trigger: 0.5, target: 0.4}\n")
    touch_later(acme, 30)
    assert store.reload_if_changed() is True
    assert store.get("acme").budget.trigger == 0.5
    assert store.get("acme").mode == "window"
    assert store.get("beta").mode == "off"


def test_reload_sees_added_and_removed_files(tmp_path: Path) -> None:
    write(tmp_path, "acme.yaml", "{}")
    store = load(tmp_path)
    write(tmp_path, "beta.yaml", "{}")
    assert store.reload_if_changed() is True
    assert store.names() == ["acme", "beta"]
    (tmp_path / "acme.yaml").unlink()
    assert store.reload_if_changed() is True
    assert store.names() == ["beta"]
    with pytest.raises(UnknownPolicy):
        store.get("acme")


def test_a_reload_that_loses_a_tenants_policy_keeps_the_last_good_set(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write(tmp_path, "acme.yaml", "mode: inspect\n")
    write(tmp_path, "beta.yaml", "{}")
    store = load(tmp_path)
    store.require(["acme"])
    (tmp_path / "acme.yaml").unlink()
    assert store.reload_if_changed() is False
    assert store.get("acme").mode == "inspect"  # still served from the last good set
    assert "acme: the policy of a configured tenant is missing" in caplog.text
    (tmp_path / "beta.yaml").unlink()  # an unrequired policy may go, once acme is back
    write(tmp_path, "acme.yaml", "mode: inspect\n")
    assert store.reload_if_changed() is True
    assert store.names().count("beta") == 0


def test_require_names_a_missing_policy_at_once(tmp_path: Path) -> None:
    store = load(tmp_path)
    with pytest.raises(PolicyLoadError, match="nope: the policy of a configured tenant"):
        store.require(["default", "nope"])


def test_reload_refreshes_resolved_overrides(tmp_path: Path) -> None:
    acme = write(tmp_path, "acme.yaml", 'models:\n  "gpt*": {mode: reject}\n')
    store = load(tmp_path)
    assert store.resolve("acme", "gpt-4o").mode == "reject"
    write(tmp_path, "acme.yaml", 'models:\n  "gpt*": {mode: inspect}\n')
    touch_later(acme)
    assert store.reload_if_changed() is True
    assert store.resolve("acme", "gpt-4o").mode == "inspect"


async def test_watch_polls_and_reloads(tmp_path: Path) -> None:
    acme = write(tmp_path, "acme.yaml", "mode: window\n")
    store = load(tmp_path)
    task = asyncio.create_task(store.watch(0.01))
    try:
        write(tmp_path, "acme.yaml", "mode: reject\n")
        touch_later(acme)
        for _ in range(3000):  # up to 30 s: only bounds a watcher that never reloads
            if store.get("acme").mode == "reject":
                break
            await asyncio.sleep(0.01)
        assert store.get("acme").mode == "reject"
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
