"""Tool-definition tokens per request, with and without `defer_tools`, for 20 / 60 / 120 tools in
each client format (`python -m bench.tools.tokens`). A one-message request, prepared in-process by
the real Preparer (the model's own tokenizer: o200k for gpt-4o, Claude's for claude-sonnet-4-5)."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from bench.tools.fixture import SIZES, TOOLS_BY_FORMAT
from proxy.artifacts.store import MemoryStore
from proxy.engine.preparer import Preparer
from proxy.formats import FORMATS
from proxy.http.auth import Tenant
from proxy.jsonio import dumps
from proxy.policy.store import PolicyStore
from proxy.tokens.catalog import ModelCatalog
from proxy.tokens.counters import TokenCounters

TENANT = Tenant(name="t", policy="with", scope="t:bench", upstream_key=None, passthrough=True)
BUDGETS = {
    "budget 2,000, keep filesystem_*": "budget: 2000, keep: [filesystem_*]",
    "default (budget 0.1 of the allowance)": "budget: 0.1",
}
MODELS = {"anthropic_messages": "claude-sonnet-4-5"}
USER = "Post the release notes to the team channel."


def _policies(directory: Path, budget: str) -> PolicyStore:
    (directory / "with.yaml").write_text(
        f"extends: default\nsteps: [{{kind: defer_tools, {budget}}}, {{kind: drop_turns}}]\n"
    )
    return PolicyStore.load(directory)


def _body(fmt: str, count: int) -> dict[str, Any]:
    model = MODELS.get(fmt, "gpt-4o")
    tools = TOOLS_BY_FORMAT[fmt](count)
    if fmt == "openai_responses":
        return {"model": model, "input": [{"role": "user", "content": USER}], "tools": tools}
    body = {"model": model, "messages": [{"role": "user", "content": USER}], "tools": tools}
    return {**body, "max_tokens": 1024} if fmt == "anthropic_messages" else body


async def measure(budget: str) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        preparer = Preparer(
            policies=_policies(Path(tmp), budget), counters=TokenCounters(),
            catalog=ModelCatalog(), store=MemoryStore(b"bench-secret"),
        )  # fmt: skip
        for fmt, wire in FORMATS.items():
            for count in SIZES:
                body = _body(fmt, count)
                prepared = await preparer.prepare(body, dumps(body), TENANT, wire)
                action = next((a for a in prepared.manifest.actions if a.detail), None)
                detail = action.detail if action is not None and action.detail else {}
                rows.append(
                    {
                        "format": fmt,
                        "tools": count,
                        "request_before": prepared.manifest.tokens_before,
                        "request_after": prepared.manifest.tokens_after,
                        "tools_before": detail.get("tool_tokens_before"),
                        "tools_after": detail.get("tool_tokens_after"),
                        "sent": len(wire.tool_list(prepared.parsed)),
                    }
                )
        preparer.close()
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| format | tools | request tokens without | with | tool tokens without | with | "
        "tools sent |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        saved = r["tools_after"] is not None
        lines.append(
            f"| {r['format']} | {r['tools']} | {r['request_before']:,} | {r['request_after']:,} | "
            f"{r['tools_before'] or '(fits)'} | {r['tools_after'] if saved else '(as sent)'} | "
            f"{r['sent']} |"
        )
    return "\n".join(lines)


def main() -> int:
    for name, budget in BUDGETS.items():
        print(f"\n### defer_tools, {name}\n")
        print(table(asyncio.run(measure(budget))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
