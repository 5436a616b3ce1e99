"""`ctxproxy prepare request.json`: the dry run offline, with the manifest as a readable table."""

from __future__ import annotations

import asyncio
import secrets
import sys
from pathlib import Path
from typing import Any, TextIO

from proxy.artifacts.store import MemoryStore
from proxy.engine.manifest import Manifest, Prepared
from proxy.engine.preparer import Preparer
from proxy.errors import ProxyError
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.http.auth import Tenant
from proxy.jsonio import dumps, loads_object
from proxy.policy.cli import policy_file_directory
from proxy.policy.store import DEFAULT_POLICY, POLICY_SUFFIXES, PolicyLoadError, PolicyStore
from proxy.tokens.catalog import ModelCatalog
from proxy.tokens.counters import TokenCounters


def render_manifest(manifest: Manifest, out: TextIO) -> None:
    rows = [
        ("policy", manifest.policy),
        ("model", manifest.model),
        ("mode", manifest.mode),
        ("counting", manifest.counting_method),
        ("context window", f"{manifest.context_window} ({manifest.context_window_source})"),
        ("reserved output", manifest.reserved_output),
        ("allowance", manifest.allowance),
        ("refusal limit", manifest.refusal_limit),
        ("trigger / target", f"{manifest.trigger} / {manifest.target}"),
        ("tokens before", manifest.tokens_before),
        ("tokens after", manifest.tokens_after),
        ("outcome", manifest.outcome),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        out.write(f"{name:<{width}}  {value}\n")
    if manifest.actions:
        out.write("\nstep                   messages  tokens freed  artifacts\n")
    for action in manifest.actions:
        out.write(
            f"{action.step:<22} {len(action.message_indices):>8}  {action.tokens_freed:>12}"
            f"  {len(action.artifact_ids)}\n"
        )
    for note in manifest.notes:
        out.write(f"note: {note}\n")


async def _prepare(body: dict[str, Any], raw: bytes, store: PolicyStore, name: str) -> Prepared:
    secret = secrets.token_bytes(32)
    preparer = Preparer(
        policies=store, counters=TokenCounters(), catalog=ModelCatalog(), store=MemoryStore(secret)
    )
    tenant = Tenant(name="local", policy=name, scope="local", upstream_key=None, passthrough=True)
    return await preparer.prepare(body, raw, tenant, OPENAI_CHAT)


def load_policy(policy: str | None) -> tuple[PolicyStore, str]:
    """`--policy`: a policy file (with the files beside it that it extends, nothing else) or the
    name of a bundled policy. Raises `PolicyLoadError` naming what is wrong."""
    if policy is None:
        return PolicyStore.load(None), DEFAULT_POLICY
    path = Path(policy)
    if path.suffix in POLICY_SUFFIXES or path.is_file():
        if not path.is_file():
            raise PolicyLoadError([f"--policy: {policy}: no such file"])
        with policy_file_directory(path) as directory:
            return PolicyStore.load(directory), path.stem
    store = PolicyStore.load(None)
    if policy not in store:
        known = ", ".join(store.names())
        raise PolicyLoadError(
            [f"--policy: unknown policy {policy!r} (a .yaml file, or one of: {known})"]
        )
    return store, policy


def run_prepare(request: str, policy: str | None, model: str | None, out_path: str | None) -> int:
    try:
        store, name = load_policy(policy)
        raw = Path(request).read_bytes()
        body = loads_object(raw)
        if model:
            body["model"] = model
            raw = dumps(body)
        prepared = asyncio.run(_prepare(body, raw, store, name))
    except OSError as exc:
        print(f"{request}: {exc.strerror}", file=sys.stderr)
        return 2
    except PolicyLoadError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    except ProxyError as exc:
        print(dumps(exc.envelope()).decode(), file=sys.stderr)
        return 1
    render_manifest(prepared.manifest, sys.stderr)
    if out_path:
        Path(out_path).write_bytes(prepared.body)
    else:
        sys.stdout.write(prepared.body.decode() + "\n")
    return 0
