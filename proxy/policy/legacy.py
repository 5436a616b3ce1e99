"""Policy keys that moved into the step entries, still read from older files.

`tool_results.*` and `protect.recent_turns` / `recent_tool_exchanges` /
`clear_recent_before_refusing` used to be policy-level; each is now a setting of the step it
drives. A file that still writes an old key loads as before: `migrate` carries the value into
every step entry of the right kind (see its docstring for which value wins), and
`deprecation_warnings` names the file, the old key and the new one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from proxy.engine.steps import default_step_configs
from proxy.policy.files import key_text

REMOVED_SECTION = "tool_results"
"""A section that is gone entirely (its every key moved)."""


@dataclass(frozen=True)
class MovedKey:
    section: str
    key: str
    targets: tuple[tuple[str, str], ...]
    """(step kind, key in that step's entry) pairs that now hold the setting."""

    @property
    def old(self) -> str:
        return f"{self.section}.{self.key}"

    @property
    def new(self) -> str:
        return " and ".join(f"steps[kind={kind}].{key}" for kind, key in self.targets)


_OFFLOAD, _CLEAR, _DROP = "offload_tool_results", "clear_tool_results", "drop_turns"
MOVED_KEYS = (
    MovedKey("tool_results", "offload_threshold_chars", ((_OFFLOAD, "threshold_chars"),)),
    MovedKey("tool_results", "preview_head_chars", ((_OFFLOAD, "preview_head_chars"),)),
    MovedKey("tool_results", "preview_tail_chars", ((_OFFLOAD, "preview_tail_chars"),)),
    MovedKey(
        "tool_results", "exclude_tools", ((_OFFLOAD, "exclude_tools"), (_CLEAR, "exclude_tools"))
    ),
    MovedKey("tool_results", "refetchable_tools", ((_CLEAR, "refetchable_tools"),)),
    MovedKey("tool_results", "clear_at_least", ((_CLEAR, "clear_at_least"),)),
    MovedKey("protect", "recent_tool_exchanges", ((_CLEAR, "keep_recent_exchanges"),)),
    MovedKey(
        "protect",
        "clear_recent_before_refusing",
        ((_CLEAR, "clear_recent_before_refusing"),),
    ),
    MovedKey("protect", "recent_turns", ((_DROP, "keep_recent_turns"),)),
)


def _has(data: Mapping[str, Any], moved: MovedKey) -> bool:
    section = data.get(moved.section)
    return isinstance(section, Mapping) and moved.key in section


def deprecation_warnings(label: str, data: Mapping[str, Any]) -> list[str]:
    """One line per old key written in a file (at its top level or in a `models:` override),
    in the file's order."""
    places: list[tuple[str, Mapping[str, Any]]] = [("", data)]
    models = data.get("models")
    if isinstance(models, Mapping):
        places += [
            (f"models.{key_text(glob)}.", partial)
            for glob, partial in models.items()
            if isinstance(partial, Mapping)
        ]
    by_key = {(moved.section, moved.key): moved for moved in MOVED_KEYS}
    return [
        f"{label}: {prefix}{moved.old} is deprecated, set {moved.new} instead "
        "(the value is carried over for now)"
        for prefix, partial in places
        for section, keys in partial.items()
        if isinstance(keys, Mapping)
        for key in keys
        if (moved := by_key.get((section, key))) is not None
    ]


@dataclass
class Migration:
    data: dict[str, Any]
    """The policy data in the current spelling (old keys moved into `steps`)."""
    origins: dict[str, str] = field(default_factory=dict)
    """`steps[i].key` -> the old key its value came from (so errors name what the file says)."""
    problems: list[str] = field(default_factory=list)


def migrate(data: Mapping[str, Any], layers: Sequence[Mapping[str, Any]]) -> Migration:
    """Move the old keys of merged policy data into its step entries.

    `layers` are the mappings merged into `data`, most specific first (a model override, the
    file, its parent, ...). An old key's value goes into each step entry of its kind that does
    not set the new key itself, and also over one that does when the old key was written in a
    more specific layer than the `steps` list (a file that extends a preset and writes
    `tool_results.preview_head_chars` still changes the preset's offload entry, as it used to).
    A policy without `steps` gets the default steps to carry the values into.
    """
    out = dict(data)
    present = [moved for moved in MOVED_KEYS if _has(data, moved)]
    migration = Migration(out)
    if present:
        steps = out.get("steps") if "steps" in out else _default_steps()
        if isinstance(steps, list):
            steps_depth = _depth(layers, None)
            out["steps"] = steps = list(steps)
            for moved in present:
                old_wins = _depth(layers, moved) < steps_depth
                value = data[moved.section][moved.key]
                _carry(steps, moved, value, old_wins, migration.origins)
    _strip(out, migration.problems)
    return migration


def _default_steps() -> list[dict[str, Any]]:
    return [{"kind": config.kind} for config in default_step_configs()]


def _depth(layers: Sequence[Mapping[str, Any]], moved: MovedKey | None) -> int:
    """Index of the most specific layer that writes `moved` (`steps` when None), or
    len(layers) when none does."""
    for index, layer in enumerate(layers):
        if _has(layer, moved) if moved is not None else "steps" in layer:
            return index
    return len(layers)


def _carry(
    steps: list[Any], moved: MovedKey, value: Any, old_wins: bool, origins: dict[str, str]
) -> None:
    targets = dict(moved.targets)
    for index, entry in enumerate(steps):
        if not isinstance(entry, Mapping) or entry.get("kind") not in targets:
            continue
        key = targets[entry["kind"]]
        if old_wins or key not in entry:
            steps[index] = {**entry, key: value}
            origins[f"steps[{index}].{key}"] = moved.old


def _strip(out: dict[str, Any], problems: list[str]) -> None:
    """Remove the old keys; the emptied `tool_results` section goes too. Anything else left in
    that section is a mistake, reported like any unknown key."""
    for section in dict.fromkeys(moved.section for moved in MOVED_KEYS):
        old = out.get(section)
        if section == REMOVED_SECTION and section in out and not isinstance(old, Mapping):
            del out[section]
            problems.append(f"{section}: deprecated section, and not a mapping of its old keys")
        if not isinstance(old, Mapping):
            continue
        moved_keys = {m.key for m in MOVED_KEYS if m.section == section}
        kept = {k: v for k, v in old.items() if k not in moved_keys}
        if section != REMOVED_SECTION:
            out[section] = kept
            continue
        del out[section]
        problems += [
            f"{section}.{key_text(key)}: unknown key (the {section} section is deprecated: its "
            "settings moved to the steps)"
            for key in kept
        ]
