"""Policy file primitives: YAML 1.2 booleans, duplicate keys, deep merge, error lines."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from proxy.engine.policy import Policy
from proxy.policy.files import (
    deep_merge,
    format_validation_error,
    merge_policy_data,
    read_policy_file,
)


def test_yaml_1_2_booleans_so_mode_off_is_the_string_off(tmp_path: Path) -> None:
    path = tmp_path / "acme.yaml"
    path.write_text("mode: off\nread_tool: {enabled: false}\ndescription: no\nx: True\n")
    data, problems = read_policy_file(path)
    assert problems == []
    assert data == {"mode": "off", "read_tool": {"enabled": False}, "description": "no", "x": True}


def test_duplicate_keys_are_errors_at_any_depth(tmp_path: Path) -> None:
    path = tmp_path / "acme.yaml"
    path.write_text("budget:\n  trigger: 0.9\n  target: 0.5\n  trigger: 0.8\n")
    assert read_policy_file(path) == (None, ["acme.yaml: line 4: duplicate key 'trigger'"])


def test_yaml_anchors_and_merge_keys_still_work(tmp_path: Path) -> None:
    path = tmp_path / "acme.yaml"
    path.write_text("a: &x {k: 1}\nb:\n  <<: *x\n  j: 2\n")
    assert read_policy_file(path) == ({"a": {"k": 1}, "b": {"k": 1, "j": 2}}, [])


def test_unreadable_bytes_are_a_problem_line(tmp_path: Path) -> None:
    path = tmp_path / "acme.yaml"
    path.write_bytes(b"mode: \xff\xfe\n")
    data, (line,) = read_policy_file(path)
    assert data is None
    assert line.startswith("acme.yaml: not UTF-8 text")


def test_deep_merge_does_not_mutate_its_inputs() -> None:
    base = {"a": {"b": 1, "c": [1]}, "d": 1}
    override = {"a": {"c": [2]}, "e": 2}
    assert deep_merge(base, override) == {"a": {"b": 1, "c": [2]}, "d": 1, "e": 2}
    assert base == {"a": {"b": 1, "c": [1]}, "d": 1}


def test_merge_policy_data_puts_the_childs_globs_first() -> None:
    parent = {"models": {"a*": {"mode": "off"}, "b*": {"mode": "inspect"}}, "mode": "window"}
    child = {"models": {"c*": {"mode": "reject"}, "b*": {"description": "x"}}}
    merged = merge_policy_data(parent, child)
    assert list(merged["models"]) == ["c*", "b*", "a*"]
    assert merged["models"]["b*"] == {"mode": "inspect", "description": "x"}
    assert merged["mode"] == "window"


def test_error_paths_drop_union_member_tags() -> None:
    data = {"steps": [{"kind": "drop_turns", "keep": 1}], "budget": {"context_window": 0}}
    with pytest.raises(ValidationError) as info:
        Policy.model_validate(data)
    assert format_validation_error(info.value, data) == [
        "budget.context_window: Input should be 'auto' or Input should be greater than 0",
        "steps[0].keep: unknown key",
    ]
