"""The policy models: defaults, strictness, budget rules, step union."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from pydantic import ValidationError

from proxy.engine.budget import BudgetPolicy
from proxy.engine.policy import Policy, ProtectPolicy
from proxy.engine.steps.clear_tool_results import ClearToolResultsConfig
from proxy.engine.steps.condense_tool_results import CondenseToolResultsConfig
from proxy.engine.steps.drop_turns import DropTurnsConfig
from proxy.engine.steps.offload_tool_results import OffloadToolResultsConfig
from proxy.engine.steps.summarize import SummarizeConfig
from proxy.policy.cli import render_schema
from proxy.policy.schema import export_schema
from proxy.policy.store import PolicyStore, bundled_policies_dir

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


def _errors(data: dict[str, Any]) -> list[tuple[tuple[int | str, ...], str]]:
    with pytest.raises(ValidationError) as info:
        Policy.model_validate(data)
    return [(tuple(e["loc"]), e["type"]) for e in info.value.errors()]


def test_defaults_are_a_window_policy_with_the_four_steps() -> None:
    policy = Policy()
    assert policy.mode == "window"
    assert policy.on_invalid == "forward"
    assert [type(s) for s in policy.steps] == [
        CondenseToolResultsConfig,
        OffloadToolResultsConfig,
        ClearToolResultsConfig,
        DropTurnsConfig,
    ]
    assert policy.budget.target < policy.budget.trigger <= 1
    assert policy.models == {}


def test_default_yaml_spells_out_the_built_in_defaults() -> None:
    """default.yaml documents every key; its values must be the code's defaults."""
    data = yaml.safe_load((REPO / "policies" / "default.yaml").read_text())
    from_file = Policy.model_validate(data)
    exclude = {"description"}
    assert from_file.model_dump(exclude=exclude) == Policy().model_dump(exclude=exclude)
    documented = set(data)
    assert documented == set(Policy.model_fields) - {"name", "extends"}
    for entry, config in zip(data["steps"], Policy().steps, strict=True):
        assert set(entry) == set(type(config).model_fields), entry["kind"]


def test_unknown_keys_are_errors_at_every_level() -> None:
    assert _errors({"bugdet": {}}) == [(("bugdet",), "extra_forbidden")]
    assert _errors({"budget": {"trgger": 0.5}}) == [(("budget", "trgger"), "extra_forbidden")]
    assert _errors({"protect": {"pinned": [{"rol": "user"}]}}) == [
        (("protect", "pinned", 0, "rol"), "extra_forbidden")
    ]


def test_target_above_trigger_names_budget_target() -> None:
    with pytest.raises(ValidationError) as info:
        BudgetPolicy.model_validate({"trigger": 0.5, "target": 0.8})
    (error,) = info.value.errors()
    assert error["loc"] == ("target",)
    assert "target (0.8) must not exceed trigger (0.5)" in error["msg"]
    with pytest.raises(ValidationError):
        BudgetPolicy.model_validate({"trigger": 90_000, "target": 100_000})


def test_target_may_equal_trigger_and_mixed_units_are_not_compared() -> None:
    assert BudgetPolicy(trigger=0.8, target=0.8).target == 0.8
    # 0.95 of the allowance vs 50,000 tokens: unknowable until the window is known.
    assert BudgetPolicy(trigger=50_000, target=0.95).target == 0.95


def test_invalid_trigger_reports_only_the_trigger() -> None:
    assert _errors({"budget": {"trigger": 0, "target": 0.5}}) == [
        (("budget", "trigger"), "greater_than")
    ]


def test_budget_numbers_must_be_positive() -> None:
    assert _errors({"budget": {"target": 0}}) == [(("budget", "target"), "greater_than")]
    assert (("budget", "context_window", "constrained-int"), "greater_than") in _errors(
        {"budget": {"context_window": -1}}
    )


def test_steps_are_a_union_keyed_by_kind() -> None:
    policy = Policy.model_validate({"steps": [{"kind": "drop_turns"}]})
    assert policy.steps == [DropTurnsConfig()]
    assert _errors({"steps": [{"kind": "summarize_everything"}]}) == [
        (("steps", 0), "union_tag_invalid")
    ]
    assert _errors({"steps": [{}]}) == [(("steps", 0), "union_tag_not_found")]


@pytest.mark.parametrize(
    "kind", ["offload_tool_results", "clear_tool_results", "drop_turns", "summarize"]
)
def test_step_configs_share_the_strict_base(kind: str) -> None:
    assert _errors({"steps": [{"kind": kind, "keep": 1}]}) == [
        (("steps", 0, kind, "keep"), "extra_forbidden")
    ]
    (config,) = Policy.model_validate({"steps": [{"kind": kind}]}).steps
    assert type(config).model_config["allow_inf_nan"] is False
    with pytest.raises(ValidationError):
        config.kind = "other"  # frozen


def test_nan_and_infinity_are_refused_in_step_settings() -> None:
    for value in (float("nan"), float("inf")):
        assert _errors({"steps": [{"kind": "drop_turns", "target": value}]})
        assert _errors({"steps": [{"kind": "offload_tool_results", "threshold_chars": value}]})


def test_only_protections_every_step_honours_stay_in_protect() -> None:
    assert set(ProtectPolicy.model_fields) == {"first_user", "pinned"}
    assert _errors({"tool_results": {}}) == [(("tool_results",), "extra_forbidden")]


def test_read_tool_page_size_is_capped() -> None:
    assert _errors({"read_tool": {"max_page_chars": 20_001}}) == [
        (("read_tool", "max_page_chars"), "less_than_equal")
    ]


def test_compact_mode_puts_summarize_in_place_of_drop_turns() -> None:
    policy = Policy.model_validate({"mode": "compact"})
    assert policy.reduces and policy.mode == "compact"
    assert [type(s) for s in policy.steps] == [
        CondenseToolResultsConfig,
        OffloadToolResultsConfig,
        ClearToolResultsConfig,
        SummarizeConfig,
    ]
    written = Policy.model_validate(
        {"mode": "compact", "steps": [{"kind": "drop_turns", "keep_recent_turns": 4}]}
    )
    assert written.steps == [SummarizeConfig(keep_recent_turns=4)]
    both = Policy.model_validate(
        {"mode": "compact", "steps": [{"kind": "summarize", "target": 0.4}, DropTurnsConfig()]}
    )
    assert both.steps == [SummarizeConfig(target=0.4), SummarizeConfig()]
    assert Policy.model_validate({"steps": [{"kind": "drop_turns"}]}).steps == [DropTurnsConfig()]
    assert not Policy(mode="reject").reduces and Policy().reduces
    assert _errors({"mode": "compact", "steps": [{"kind": "drop_turns", "x": 1}]}) == [
        (("steps", 0, "summarize", "x"), "extra_forbidden")
    ]


def test_policies_are_frozen() -> None:
    policy = Policy()
    with pytest.raises(ValidationError):
        policy.mode = "off"


# --- shipped presets, bundled copy, schema -----------------------------------------------------


def test_every_shipped_preset_loads() -> None:
    store = PolicyStore.load(POLICIES, include_bundled=False)
    assert store.names() == PRESETS
    assert store.get("strict").mode == "reject"
    assert store.get("strict").steps == []
    assert store.get("inspect").mode == "inspect"
    for name in ("default", "coding-agent", "research-agent", "example-acme"):
        assert isinstance(store.get(name).steps[0], CondenseToolResultsConfig), name
    coding, default = store.get("coding-agent").steps[1], store.get("default").steps[1]
    assert isinstance(coding, OffloadToolResultsConfig)
    assert isinstance(default, OffloadToolResultsConfig)
    assert coding.threshold_chars < default.threshold_chars
    acme = store.get("example-acme")
    assert acme.extends == "default"
    assert store.resolve("example-acme", "gpt-4o-mini").budget.context_window == 64_000


def test_every_preset_is_commented() -> None:
    for path in sorted(POLICIES.glob("*.yaml")):
        lines = path.read_text().splitlines()
        assert lines[0].startswith("# ctxproxy policy: "), path.name
        assert sum("#" in line for line in lines) >= 5, path.name


def test_bundled_presets_are_the_policies_directory() -> None:
    bundled = bundled_policies_dir()
    assert bundled.is_dir()
    shipped = sorted(p.name for p in POLICIES.glob("*.yaml"))
    assert sorted(p.name for p in bundled.glob("*.yaml")) == shipped
    for name in shipped:
        assert (bundled / name).read_bytes() == (POLICIES / name).read_bytes(), name


def test_schema_json_is_in_sync_with_the_code() -> None:
    on_disk = (POLICIES / "schema.json").read_text(encoding="utf-8")
    assert on_disk == render_schema(), (
        "policies/schema.json is stale: run `ctxproxy policy schema --out policies/schema.json`"
    )


def test_schema_describes_files_not_models() -> None:
    schema = export_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert "name" not in schema["properties"]
    assert schema["additionalProperties"] is False
    validator = jsonschema.Draft202012Validator(schema)
    for path in sorted(POLICIES.glob("*.yaml")):
        assert list(validator.iter_errors(yaml.safe_load(path.read_text()))) == [], path.name
    assert not validator.is_valid({"name": "x"})
    assert not validator.is_valid({"budget": {"trgger": 0.5}})
    assert json.loads(render_schema()) == schema


@pytest.mark.parametrize(
    ("tokenizer", "problem"),
    [
        ("o200k", "Unknown tokenizer 'o200k'"),
        ("hf:/nope/tokenizer.json", "no tokenizer file at '/nope/tokenizer.json'"),
    ],
)
def test_counting_tokenizer_is_checked_when_the_policy_loads(tokenizer: str, problem: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(problem)):
        Policy.model_validate({"counting": {"tokenizer": tokenizer}})


def test_a_tokenizer_file_that_does_not_load_is_refused(tmp_path: Path) -> None:
    broken = tmp_path / "tokenizer.json"
    broken.write_text("{not a tokenizer")
    with pytest.raises(ValidationError, match="Cannot load tokenizer"):
        Policy.model_validate({"counting": {"tokenizer": f"hf:{broken}"}})


@pytest.mark.parametrize(
    "tokenizer", ["auto", "estimate", "o200k_base", "cl100k_base", "tiktoken:o200k_base", "hf:"]
)
def test_known_tokenizers_load(tokenizer: str) -> None:
    assert Policy.model_validate({"counting": {"tokenizer": tokenizer}}).counting.tokenizer == (
        tokenizer
    )


def test_records_keep_no_bodies_unless_asked() -> None:
    assert (Policy().records.bodies, Policy().records.max_body_bytes) == (False, 2 * 1024 * 1024)
    kept = Policy.model_validate({"records": {"bodies": True, "max_body_bytes": 1000}}).records
    assert (kept.bodies, kept.max_body_bytes) == (True, 1000)
    assert _errors({"records": {"body": True}}) == [(("records", "body"), "extra_forbidden")]
    assert _errors({"records": {"max_body_bytes": 0}}) == [
        (("records", "max_body_bytes"), "greater_than")
    ]
