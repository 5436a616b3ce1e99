"""What a configuration gets at start-up beside its validation: warnings about what works but is
probably a mistake (`ctxproxy serve` prints them, one line each)."""

from __future__ import annotations

from proxy.settings import Settings


def startup_warnings(settings: Settings) -> list[str]:
    """What works but is probably a mistake: one line each (no secrets)."""
    if settings.auth.mode != "keys":
        return []
    bare = [(i, u) for i, u in enumerate(settings.upstreams) if not u.api_key]
    return [
        f"tenant {tenant.name!r} has no upstream_key and "
        + ", ".join(f"upstreams.{i} {u.name!r}" for i, u in bare)
        + " no api_key: its requests there go upstream without Authorization"
        for tenant in settings.tenants
        if tenant.keys and not tenant.upstream_key and bare
    ]
