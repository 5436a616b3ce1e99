"""Policy files: load and validate every policy or none, look policies up, hot-reload atomically.

Sources, in order (a later one replaces an earlier one of the same name, whole file):

1. the presets bundled inside the package (`bundled_policies_dir()`, a copy of `policies/`);
2. the configured directory, if any.

Each `*.yaml` / `*.yml` file is one policy named after its file stem (hidden files are skipped).
Files may not set `name`. `extends: <policy>` deep-merges the file over its parent (mappings merge,
the child wins; lists and scalars replace) before validation. `models:` maps globs on the request's
model to partial policies deep-merged over the policy; globs are matched case-insensitively
(`fnmatch` rules on lower-cased text), and the first matching glob wins. An inheriting file's own
globs come first, then its parent's globs it does not mention (a glob in both merges the two).

Every problem is reported as one line `file: key.path: problem`; one broken file fails the load.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from proxy.engine.policy import Policy
from proxy.policy.files import (
    deep_merge,
    format_validation_error,
    merge_policy_data,
    read_policy_file,
)
from proxy.policy.legacy import deprecation_warnings, migrate

logger = logging.getLogger("ctxproxy.policy")

DEFAULT_POLICY = "default"
POLICY_SUFFIXES = (".yaml", ".yml")
RESOLVE_CACHE_SIZE = 1024
_NOT_IN_OVERRIDES = ("name", "extends", "models")

# (path, mtime_ns, size, inode) of every policy file, plus every directory that was missing.
Fingerprint = tuple[tuple[str, int, int, int], ...]


class PolicyLoadError(Exception):
    """The policy set cannot be loaded; `problems` holds one `file: key.path: problem` per line
    (and `warnings` the deprecation lines of the files that could be read)."""

    def __init__(self, problems: Sequence[str], warnings: Sequence[str] = ()) -> None:
        self.problems: tuple[str, ...] = tuple(problems)
        self.warnings: tuple[str, ...] = tuple(warnings)
        super().__init__("\n".join(self.problems))


class UnknownPolicy(LookupError):
    """No policy of that name is loaded."""

    def __init__(self, name: str, known: Sequence[str]) -> None:
        self.name = name
        super().__init__(f"unknown policy {name!r} (known: {', '.join(known) or 'none'})")


def bundled_policies_dir() -> Path:
    """The presets shipped inside the package (`proxy/policies`, a link to `policies/`)."""
    return Path(str(resources.files("proxy").joinpath("policies")))


@dataclass(frozen=True)
class _Source:
    name: str
    path: Path

    @property
    def label(self) -> str:
        return self.path.name


@dataclass(frozen=True)
class _Entry:
    policy: Policy
    overrides: tuple[tuple[str, Policy], ...]  # (lower-cased glob, resolved policy), file order


@dataclass
class _Snapshot:
    """One consistent, validated policy set. Replaced as a whole on reload, never mutated
    (except for its bounded resolve cache)."""

    entries: dict[str, _Entry]
    fingerprint: Fingerprint
    warnings: tuple[str, ...] = ()
    """`file: old.key is deprecated, ...` lines (the policies load; the old keys still work)."""
    cache: dict[tuple[str, str], Policy] = field(default_factory=dict)

    def resolve(self, name: str, model: str) -> Policy:
        key = (name, model)
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        entry = self.entries.get(name)
        if entry is None:
            raise UnknownPolicy(name, sorted(self.entries))
        lowered = model.lower()
        policy = next((p for g, p in entry.overrides if fnmatchcase(lowered, g)), entry.policy)
        if len(self.cache) >= RESOLVE_CACHE_SIZE:
            self.cache.pop(next(iter(self.cache)))
        self.cache[key] = policy
        return policy


# ---------------------------------------------------------------------------------------------
# Scanning and reading files


def _scan(directories: Sequence[Path]) -> tuple[list[_Source], Fingerprint, list[str]]:
    """Policy files by name (later directories win) with their fingerprint, and problems."""
    by_name: dict[str, _Source] = {}
    prints: list[tuple[str, int, int, int]] = []
    problems: list[str] = []
    for directory in directories:
        try:
            paths = sorted(p for p in directory.iterdir() if _is_policy_file(p))
        except OSError as exc:
            problems.append(f"{directory}: cannot list policy directory ({exc.strerror or exc})")
            prints.append((str(directory), -1, -1, -1))
            continue
        local: dict[str, Path] = {}
        for path in paths:
            if path.stem in local:
                problems.append(
                    f"{path.name}: policy {path.stem!r} is also defined by {local[path.stem].name}"
                )
                continue
            local[path.stem] = path
            by_name[path.stem] = _Source(path.stem, path)
            try:
                st = path.stat()
                prints.append((str(path), st.st_mtime_ns, st.st_size, st.st_ino))
            except OSError:
                prints.append((str(path), -1, -1, -1))
    return [by_name[n] for n in sorted(by_name)], tuple(prints), problems


def _is_policy_file(path: Path) -> bool:
    return path.suffix in POLICY_SUFFIXES and not path.name.startswith(".") and path.is_file()


# ---------------------------------------------------------------------------------------------
# extends


def _resolve_extends(
    raw: Mapping[str, dict[str, Any]], labels: Mapping[str, str], broken: set[str]
) -> tuple[dict[str, list[str]], dict[str, dict[str, Any]], list[str]]:
    """Merge each policy over its ancestors: (name -> [name, parent, ...], name -> merged data,
    problems). Policies below a broken ancestor are left out without a message of their own
    (the ancestor's problem fails the load already)."""
    chains: dict[str, list[str]] = {}
    merged: dict[str, dict[str, Any]] = {}
    problems: list[str] = []
    for name in sorted(raw):
        chain = [name]
        while (parent := raw[chain[-1]].get("extends")) is not None:
            if parent in chain:
                cycle = " -> ".join([*chain[chain.index(parent) :], parent])
                if parent == name:
                    problems.append(f"{labels[name]}: extends: cycle {cycle}")
                break
            if parent not in raw:
                if parent not in broken and chain[-1] == name:
                    known = ", ".join(sorted(raw)) or "none"
                    problems.append(
                        f"{labels[name]}: extends: unknown policy {parent!r} (known: {known})"
                    )
                break
            chain.append(parent)
        else:
            data: dict[str, Any] = {}
            for ancestor in reversed(chain):
                data = merge_policy_data(data, raw[ancestor])
            merged[name] = data
            chains[name] = chain
    return chains, merged, problems


# ---------------------------------------------------------------------------------------------
# Validation and error formatting


def _validate(
    name: str, data: Mapping[str, Any], layers: Sequence[Mapping[str, Any]]
) -> Policy | list[str]:
    """The policy, or its `key.path: problem` lines (old keys read through `legacy.migrate`)."""
    migration = migrate(data, layers)
    try:
        policy = Policy.model_validate({**migration.data, "name": name})
    except ValidationError as exc:
        lines = format_validation_error(exc, migration.data, migration.origins)
        return migration.problems + lines
    return migration.problems or policy


def _build_entry(
    source: _Source, data: dict[str, Any], layers: Sequence[Mapping[str, Any]]
) -> tuple[_Entry | None, list[str]]:
    """`layers`: the raw files merged into `data`, this file first, then its ancestors."""
    label = source.label
    result = _validate(source.name, data, layers)
    if isinstance(result, list):
        return None, [f"{label}: {line}" for line in result]
    overrides: list[tuple[str, Policy]] = []
    problems: list[str] = []
    for glob, partial in result.models.items():
        prefix = f"{label}: models.{glob}"
        bad = [key for key in _NOT_IN_OVERRIDES if key in partial]
        problems += [f"{prefix}.{key}: not allowed in a model override" for key in bad]
        if bad:
            continue
        resolved = _validate(source.name, deep_merge(data, partial), [partial, *layers])
        if isinstance(resolved, list):
            problems += [f"{prefix}.{line}" for line in resolved]
        else:
            overrides.append((glob.lower(), resolved))
    if problems:
        return None, problems
    return _Entry(result, tuple(overrides)), []


# ---------------------------------------------------------------------------------------------
# Loading a whole set


def _build(directories: Sequence[Path]) -> _Snapshot:
    sources, fingerprint, problems = _scan(directories)
    raw: dict[str, dict[str, Any]] = {}
    broken: set[str] = set()
    warnings: list[str] = []
    for source in sources:
        data, read_problems = read_policy_file(source.path)
        problems += read_problems
        if data is None:
            broken.add(source.name)
        else:
            raw[source.name] = data
            warnings += deprecation_warnings(source.label, data)
    by_name = {s.name: s for s in sources}
    labels = {n: s.label for n, s in by_name.items()}
    chains, merged, extend_problems = _resolve_extends(raw, labels, broken)
    problems += extend_problems
    entries: dict[str, _Entry] = {}
    for name in sorted(merged, key=lambda n: (len(chains[n]), n)):  # parents first
        if len(chains[name]) > 1 and chains[name][1] not in entries:
            continue  # the parent is invalid and reported; its errors would repeat here
        layers = [raw[ancestor] for ancestor in chains[name]]
        entry, entry_problems = _build_entry(by_name[name], merged[name], layers)
        problems += entry_problems
        if entry is not None:
            entries[name] = entry
    if problems:  # grouped by file (a stable sort keeps each file's lines in key order)
        raise PolicyLoadError(sorted(problems, key=lambda line: line.split(":", 1)[0]), warnings)
    return _Snapshot(entries, fingerprint, tuple(warnings))


def _log_warnings(warnings: Sequence[str]) -> None:
    for line in warnings:
        logger.warning("%s", line)


def _check_required(snapshot: _Snapshot, required: Iterable[str]) -> None:
    missing = sorted(set(required) - set(snapshot.entries))
    if missing:
        raise PolicyLoadError(
            [f"{name}: the policy of a configured tenant is missing" for name in missing]
        )


class PolicyStore:
    """The loaded policy set. Lookups never raise `KeyError`; unknown names raise
    `UnknownPolicy`. Safe to share: a reload swaps the whole set in one assignment."""

    def __init__(
        self, directories: Sequence[Path], snapshot: _Snapshot, required: Iterable[str] = ()
    ) -> None:
        self._directories = tuple(directories)
        self._snapshot = snapshot
        self._failed: Fingerprint | None = None
        self._failure: str | None = None
        self._required = frozenset(required)
        """Names a reload must keep (the configured tenants' policies)."""

    @classmethod
    def load(cls, directory: Path | None, *, include_bundled: bool = True) -> PolicyStore:
        """Load the bundled presets (unless told not to) and every policy file in `directory`.
        Raises `PolicyLoadError` listing every problem if any file is broken."""
        directories = [bundled_policies_dir()] if include_bundled else []
        if directory is not None:
            directories.append(directory)
        snapshot = _build(directories)
        _log_warnings(snapshot.warnings)
        return cls(directories, snapshot)

    def require(self, names: Iterable[str]) -> None:
        """From now on a reload that would lose one of `names` (the configured tenants'
        policies) is refused like a broken edit. Raises `PolicyLoadError` if one is missing now."""
        _check_required(self._snapshot, names)
        self._required = frozenset(names)

    @property
    def reload_failure(self) -> str | None:
        """The problems of the files on disk when their last reload failed (the previous set is
        still the one in use), else None."""
        return self._failure

    @property
    def directories(self) -> tuple[Path, ...]:
        return self._directories

    def names(self) -> list[str]:
        return sorted(self._snapshot.entries)

    @property
    def warnings(self) -> tuple[str, ...]:
        """Deprecation lines of the active set (`file: old.key is deprecated, set ... instead`)."""
        return self._snapshot.warnings

    def __contains__(self, name: object) -> bool:
        return name in self._snapshot.entries

    def get(self, name: str) -> Policy:
        """The policy as written (no model override applied)."""
        entry = self._snapshot.entries.get(name)
        if entry is None:
            raise UnknownPolicy(name, self.names())
        return entry.policy

    def resolve(self, name: str, model: str | None) -> Policy:
        """The policy for a request to `model`: the first matching `models:` glob applied."""
        if not model:
            return self.get(name)
        return self._snapshot.resolve(name, model)

    def reload_if_changed(self) -> bool:
        """Reload when any policy file was added, removed or modified (mtime, size, inode).
        All or nothing: on a broken edit the previous set stays active, the problems are logged
        once, and False is returned. True means a new set is now active."""
        _, fingerprint, _ = _scan(self._directories)
        if fingerprint in (self._snapshot.fingerprint, self._failed):
            return False
        try:
            snapshot = _build(self._directories)
            _check_required(snapshot, self._required)
        except PolicyLoadError as exc:
            self._failed, self._failure = fingerprint, str(exc)
            logger.error("policy reload failed, keeping the previous policies:\n%s", exc)
            return False
        self._snapshot = snapshot
        self._failed = self._failure = None
        logger.info("policies reloaded: %s", ", ".join(self.names()))
        _log_warnings(snapshot.warnings)
        return True

    async def watch(self, interval_s: float = 2.0) -> None:
        """Poll for changes forever (run as a background task; cancel to stop)."""
        while True:
            await asyncio.sleep(interval_s)
            try:
                await asyncio.to_thread(self.reload_if_changed)
            except Exception:  # never let the watcher die; the next poll tries again
                logger.exception("policy reload check failed")


__all__ = [
    "DEFAULT_POLICY",
    "PolicyLoadError",
    "PolicyStore",
    "UnknownPolicy",
    "bundled_policies_dir",
    "deep_merge",
    "format_validation_error",
    "merge_policy_data",
]
