"""The extract's share of the real-upstream run's facts, without the llama.cpp server.

    python -m bench.real_upstream.facts [--turns 24] [--show]

`bench/real_upstream/run.sh`'s conversation (`driver.last_body`: pasted test runs, greps and
logs, each answered "noted") prepared in-process by the run's `compact-extract` policy
(`real-upstream` with `mode: compact`: the summarize step's extract at its default budget, 15% of
the allowance): of the facts (`turn_facts`: each dropped turn's command line and failed
assertion) of the turns no longer sent, how many the prepared prompt still carries. Deterministic:
no model and no server (the token count is the run's own `auto` = estimate for SmolLM2).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
from pathlib import Path
from typing import Any

from bench.real_upstream.driver import facts_kept, last_body
from proxy.artifacts.store import MemoryStore
from proxy.engine.preparer import Preparer
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.http.auth import Tenant
from proxy.jsonio import dumps
from proxy.policy.store import PolicyStore
from proxy.tokens.catalog import ModelCatalog
from proxy.tokens.counters import TokenCounters

MODEL = "SmolLM2-135M-Instruct"
POLICY = "real-upstream-extract"


EVERY_CUT = """
budget: {trigger: 0.95}  # the span measured since 2026-12-01: turns 2-22 of 24
steps:
  - kind: offload_tool_results
  - kind: clear_tool_results
  - {kind: summarize, roll_up_turns: 0, roll_up_after: 0}
"""


async def prepared(
    turns: int, max_tokens: int = 48, *, every_cut: bool = False
) -> list[dict[str, Any]]:
    """The last turn's messages as the run's `compact-extract` policy prepares them
    (`every_cut`: its summary rolled up at every cut, so that it covers every dropped turn and
    measures the extract alone)."""
    policy = "extends: real-upstream\nmode: compact\n" + (EVERY_CUT if every_cut else "")
    with tempfile.TemporaryDirectory(prefix="ctxproxy-facts-") as tmp:
        shutil.copy(Path(__file__).parent / "policies" / "real-upstream.yaml", tmp)
        Path(tmp, f"{POLICY}.yaml").write_text(policy)
        policies = PolicyStore.load(Path(tmp))
    store = MemoryStore(b"real-upstream-facts")
    preparer = Preparer(
        policies=policies, counters=TokenCounters(), catalog=ModelCatalog(), store=store
    )
    body = last_body(turns, MODEL, max_tokens)
    tenant = Tenant("bench", POLICY, "bench", None, False)
    result = await preparer.prepare(body, dumps(body), tenant, OPENAI_CHAT)
    messages: list[dict[str, Any]] = result.parsed["messages"]
    return messages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=24, help="turns of the conversation")
    parser.add_argument("--show", action="store_true", help="print the summary's text")
    parser.add_argument("--every-cut", action="store_true",
                        help="the summary rolled up at every cut (the extract alone)")
    args = parser.parse_args(argv)
    sent = asyncio.run(prepared(args.turns, every_cut=args.every_cut))
    kept, total = facts_kept(sent, args.turns)
    print(f"turns {args.turns}: facts of the turns no longer sent, still in the prompt: "
          f"{kept}/{total}")
    if args.show:
        for message in sent:
            if message.get("role") != "user" or "Output:" not in str(message.get("content")):
                print(f"--- {message.get('role')}\n{message.get('content')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
