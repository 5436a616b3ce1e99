"""What the start-up check of a Redis store warns about: eviction policy and memory bound."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def eviction_policy_warning(policy: str) -> str | None:
    """The start-up warning for Redis' `maxmemory-policy`, or None when it is safe.

    Only `noeviction` is: `allkeys-*` evicts any key, and `volatile-*` evicts keys with a TTL,
    which every artifact has. Either can drop an artifact a prompt still names, whatever the
    scope; under `noeviction` a full Redis refuses writes instead, and the content stays inline.
    """
    if policy == "noeviction":
        return None
    return (
        f"Redis maxmemory-policy is {policy}: when Redis is full it evicts artifacts that "
        "prompts still reference (any tenant's); set maxmemory-policy noeviction"
    )


def memory_bound_warning(maxmemory: object) -> str | None:
    """The start-up warning for a Redis without `maxmemory` (0: the host's memory is the bound),
    or None. Under `noeviction` a full Redis refuses writes: offloading then stops for every
    tenant (content stays inline) until keys expire, so size it for the artifacts' TTL."""
    try:
        bound = int(str(maxmemory))
    except ValueError:
        return None
    if bound > 0:
        return None
    return (
        "Redis has no maxmemory: artifacts grow until the host runs out of memory; set "
        "maxmemory (with maxmemory-policy noeviction) sized for the artifacts' TTL"
    )


def start_up_warnings(infos: Iterable[Mapping[str, Any]]) -> list[str]:
    """The warnings for the `INFO memory` of a server, or of every master of a cluster (which
    usually share their settings: each warning once)."""
    warnings = {
        warning: None
        for info in infos
        for warning in (
            eviction_policy_warning(str(info.get("maxmemory_policy", "noeviction"))),
            memory_bound_warning(info.get("maxmemory")),  # absent (hidden): not warned
        )
        if warning is not None
    }
    return list(warnings)
