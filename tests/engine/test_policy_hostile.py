"""Hostile policy files: the loader answers with a loaded set or `PolicyLoadError`, nothing else.

Malformed YAML, wrong types, unknown keys and `extends` cycles have exact-message tests in
test_policy_store.py; here random text and random mappings are fed to the loader, and every
problem must be one line `file: ...`. A policy that loads must also serve a request's budget.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples
from shared_tokens import shared_catalog

from proxy.engine.budget import BudgetPolicy, compute_budget
from proxy.policy.store import PolicyLoadError, PolicyStore

CATALOG = shared_catalog()
FUZZ = settings(
    max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
KEYS = (
    "mode", "on_invalid", "budget", "context_window", "fallback_context_window",
    "reserved_output", "default_reserved_output", "safety_margin", "trigger", "target",
    "counting", "tokenizer", "protect", "first_user", "recent_turns", "recent_tool_exchanges",
    "pinned", "role", "name", "contains", "tool_results", "offload_threshold_chars",
    "exclude_tools", "steps", "kind", "notice_role", "artifacts", "ttl_seconds", "read_tool",
    "threshold_chars", "preview_head_chars", "keep_recent_exchanges", "keep_recent_turns",
    "refetchable_tools", "clear_at_least", "clear_recent_before_refusing",
    "max_page_chars", "max_rounds", "models", "gpt-*", "extends", "description", "typo",
)  # fmt: skip
WORDS = (
    "window", "off", "reject", "inspect", "auto", "true", "false", "null", "~", ".inf", "-.inf",
    ".nan", "1e999", "0", "-1", "0.5", "1.5", "100000", "10000000000000000000000", "drop_turns",
    "clear_tool_results", "offload_tool_results", "default", "x", "estimate", "hf:/nope",
)  # fmt: skip
YAML_BITS = (
    ": ", "\n", "\n  ", "\n- ", "- ", "[", "]", "{", "}", ", ", "&a ", "*a", "!!binary ",
    "!!python/object:os.system ", "? ", "|\n  ", ">\n  ", "# c", "'", '"', "\t", "%YAML 1.2\n",
    "---\n", "...\n", "<<: ", "\x00", "\ud800", "\\u0000", "@", "`",
)  # fmt: skip
yaml_ish = st.lists(st.sampled_from(KEYS + WORDS + YAML_BITS), max_size=40).map("".join)
scalars = st.one_of(
    st.sampled_from(WORDS),
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(),  # nan and infinities included
    st.text(max_size=8),
)
mappings = st.recursive(
    st.dictionaries(st.sampled_from(KEYS), scalars, max_size=4),
    lambda inner: st.one_of(
        st.dictionaries(st.sampled_from(KEYS), st.one_of(inner, scalars), max_size=4),
        st.lists(st.one_of(inner, scalars), max_size=3),
    ),
    max_leaves=12,
)


def load_dir(files: dict[str, bytes]) -> PolicyStore | PolicyLoadError:
    with tempfile.TemporaryDirectory() as directory:
        for name, data in files.items():
            (Path(directory) / name).write_bytes(data)
        try:
            return PolicyStore.load(Path(directory), include_bundled=False)
        except PolicyLoadError as exc:
            return exc


def check(files: dict[str, bytes]) -> PolicyStore | PolicyLoadError:
    """Loads or fails with one `file: ...` line per problem; a loaded policy can be used."""
    result = load_dir(files)
    if isinstance(result, PolicyLoadError):
        assert result.problems and str(result) == "\n".join(result.problems)
        for line in result.problems:
            assert "\n" not in line and "\r" not in line
            assert line.split(": ", 1)[0] in files and line.split(": ", 1)[1].strip()
        return result
    for name in result.names():
        policy = result.resolve(name, "gpt-4o")
        budget = compute_budget(policy.budget, "gpt-4o", 10, CATALOG)
        assert 0 <= budget.target <= budget.trigger <= budget.allowance
    return result


def dump(value: Any) -> bytes:
    return yaml.safe_dump(value, allow_unicode=True).encode("utf-8", "surrogatepass")


@FUZZ
@given(text=yaml_ish)
def test_random_yaml_ish_text(text: str) -> None:
    check({"p.yaml": text.encode("utf-8", "surrogatepass")})


@FUZZ
@given(data=mappings)
def test_random_nested_mappings(data: Any) -> None:
    check({"p.yaml": dump(data)})


@FUZZ
@given(
    parents=st.lists(
        st.sampled_from(["a", "b", "c", "missing", None, 5, ["a"], ""]), min_size=3, max_size=3
    ),
    bodies=st.lists(mappings, min_size=3, max_size=3),
)
def test_random_extends_graphs(parents: list[Any], bodies: list[Any]) -> None:
    files = {}
    for name, parent, body in zip("abc", parents, bodies, strict=True):
        data = dict(body) if isinstance(body, dict) else {}
        data.pop("extends", None)
        if parent is not None:
            data["extends"] = parent
        files[f"{name}.yaml"] = dump(data)
    result = check(files)
    for name, parent in zip("abc", parents, strict=True):
        if parent == name:  # reported unless the file is already broken in another way
            assert isinstance(result, PolicyLoadError)
            own = [p for p in result.problems if p.startswith(f"{name}.yaml: ")]
            cycle = f"{name}.yaml: extends: cycle {name} -> {name}"
            assert cycle in own or not any("extends" in p for p in own)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "mode: a\x00b",
            "p.yaml: YAML: unacceptable character #x0000: control characters "
            'are not allowed in "<unicode string>", position 7',
        ),
        ('"a\\nb": 1', "p.yaml: 'a\\nb': unknown key"),
        (
            "models: " + "[" * 5000 + "]" * 5000,
            "p.yaml: line 1: while increasing flow level exceeded maximum nesting depth",
        ),
        ("description: &a [*a]", "p.yaml: description: Input should be a valid string"),
    ],
)
def test_hostile_policy_files_are_one_line_problems(text: str, expected: str) -> None:
    result = check({"p.yaml": text.encode()})
    assert isinstance(result, PolicyLoadError)
    assert expected in result.problems


@pytest.mark.parametrize(
    ("budget", "key"),
    [
        ("{trigger: .inf}", "trigger"),
        ("{safety_margin: 1e999}", "safety_margin"),
        ("{trigger: .nan}", "trigger"),
    ],
)
def test_infinite_budget_numbers_are_load_errors(budget: str, key: str) -> None:
    result = check({"p.yaml": f"budget: {budget}".encode()})
    assert isinstance(result, PolicyLoadError)
    assert any(line.startswith(f"p.yaml: budget.{key}: ") for line in result.problems)


def test_budget_math_survives_values_beyond_the_whole() -> None:
    policy = BudgetPolicy(trigger=1e300, target=1e299, safety_margin=1e300)
    got = compute_budget(policy, "gpt-4o", 10, CATALOG)
    assert got.allowance == 0 and got.trigger == 0


def test_a_broken_edit_never_breaks_reload(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text("mode: window\n")
    store = PolicyStore.load(tmp_path, include_bundled=False)
    for text in ("budget: {trigger: 0}", "[", "\x00", "extends: p", "mode: 5", '"a\\nb": 1'):
        (tmp_path / "p.yaml").write_text(text, encoding="utf-8")
        assert store.reload_if_changed() is False
        assert store.get("p").mode == "window"
