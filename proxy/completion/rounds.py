"""The synthetic-tool loop's state, shared by the JSON and the streaming paths.

One `SyntheticRounds` per request: it opens each upstream call, executes the synthetic calls of a
round against the tenant's artifacts, appends the assistant message and one `tool` message per
call to the conversation, and builds the next request body. A round's call carries the synthetic
tools only while another round of execution is still allowed, so the last allowed round is sent
without them (and without a `tool_choice` naming one).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

from multidict import CIMultiDict

from proxy.artifacts.read_tool import execute, is_synthetic
from proxy.artifacts.store import ArtifactStore
from proxy.engine.manifest import SyntheticTools
from proxy.jsonio import dumps
from proxy.metrics import Metrics
from proxy.stats import RequestStats
from proxy.upstream.base import Upstream, UpstreamResponse

log = logging.getLogger("ctxproxy.synthetic")

ROUNDS_HEADER = "x-ctxproxy-synthetic-rounds"
READS_HEADER = "x-ctxproxy-artifact-reads"


@dataclass
class SyntheticRounds:
    upstream: Upstream
    upstream_headers: CIMultiDict[str]
    store: ArtifactStore
    scope: str
    tools: SyntheticTools
    body: dict[str, Any]
    """The prepared request; its `messages` grow by one exchange per executed round."""
    metrics: Metrics
    stats: RequestStats
    request_id: str
    messages: list[Any] = field(default_factory=list)
    rounds: int = 0
    """Rounds of synthetic calls executed so far."""
    reads: int = 0
    """Synthetic calls executed so far."""

    def __post_init__(self) -> None:
        messages = self.body.get("messages")
        self.messages = list(messages) if isinstance(messages, list) else []

    @property
    def multiple_choices(self) -> bool:
        n = self.body.get("n")
        return isinstance(n, int) and not isinstance(n, bool) and n > 1

    @property
    def loop_allowed(self) -> bool:
        """Whether the current call carries the synthetic tools, so its calls may be executed."""
        return self.rounds < self.tools.max_rounds and not self.multiple_choices

    def first_body(self, prepared_body: bytes) -> bytes:
        if self.tools.max_rounds > 0:
            return prepared_body
        return dumps(without_synthetic_tools(self.body))

    def next_body(self) -> bytes:
        body = dict(self.body)
        body["messages"] = self.messages
        if self.rounds >= self.tools.max_rounds:
            body = without_synthetic_tools(body)
        return dumps(body)

    async def open(self, body: bytes) -> UpstreamResponse:
        return await self.upstream.chat_completions(
            headers=self.upstream_headers, body=body, timer=self.stats
        )

    async def execute(self, content: str | None, calls: list[dict[str, Any]]) -> None:
        """Run one round of synthetic calls and append the exchange to the conversation."""
        results = await asyncio.gather(*(
            execute(
                self.store, self.scope, str(function_of(call).get("name")),
                _arguments(call), max_page_chars=self.tools.max_page_chars,
            )
            for call in calls
        ))
        self.messages.append({"role": "assistant", "content": content, "tool_calls": calls})
        self.messages.extend(
            {"role": "tool", "tool_call_id": call.get("id"), "content": result}
            for call, result in zip(calls, results, strict=True)
        )
        self.rounds += 1
        self.reads += len(calls)
        self.metrics.record_round(results)
        self.stats.synthetic_rounds, self.stats.artifact_reads = self.rounds, self.reads

    def response_headers(self) -> dict[str, str]:
        return {ROUNDS_HEADER: str(self.rounds), READS_HEADER: str(self.reads)}

    def log_outcome(self) -> None:
        log.info(
            "request %s: synthetic rounds=%d artifact reads=%d", self.request_id, self.rounds,
            self.reads, extra={"request_id": self.request_id},
        )


def function_of(call: Any) -> dict[str, Any]:
    function = call.get("function") if isinstance(call, dict) else None
    return function if isinstance(function, dict) else {}


def is_synthetic_call(call: Any) -> bool:
    return is_synthetic(function_of(call).get("name"))


def _arguments(call: dict[str, Any]) -> str | dict[str, Any]:
    arguments = function_of(call).get("arguments")
    return arguments if isinstance(arguments, str | dict) else ""


def _tool_name(tool: Any) -> Any:
    return function_of(tool).get("name")


def without_synthetic_tools(body: dict[str, Any]) -> dict[str, Any]:
    """A copy without the synthetic tools (nor a `tool_choice` naming one; no empty `tools`)."""
    out = dict(body)
    tools = out.get("tools")
    if not isinstance(tools, list):
        return out
    kept = [t for t in tools if not is_synthetic(_tool_name(t))]
    if kept:
        out["tools"] = kept
        if is_synthetic(_tool_name(out.get("tool_choice"))):
            del out["tool_choice"]
        return out
    for key in ("tools", "tool_choice", "parallel_tool_calls"):
        out.pop(key, None)
    return out


def synthetic_only(payload: dict[str, Any]) -> tuple[str | None, list[dict[str, Any]]] | None:
    """(content, calls) when the only choice asks for synthetic calls and nothing else."""
    choices = payload.get("choices")
    if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], dict):
        return None
    message = choices[0].get("message")
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    if not isinstance(calls, list) or not calls:
        return None
    if not all(isinstance(c, dict) and is_synthetic_call(c) for c in calls):
        return None
    content = message.get("content") if isinstance(message, dict) else None
    return (content if isinstance(content, str) else None), calls


def strip_synthetic_calls(payload: dict[str, Any]) -> bool:
    """Remove synthetic calls from every choice in place; True when any was removed.

    A choice left with no call at all finishes with "stop" (it asked for nothing the client can do).
    """
    choices = payload.get("choices")
    removed = False
    for choice in choices if isinstance(choices, list) else []:
        message = choice.get("message") if isinstance(choice, dict) else None
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        if not isinstance(message, dict) or not isinstance(calls, list):
            continue
        kept = [c for c in calls if not is_synthetic_call(c)]
        if len(kept) == len(calls):
            continue
        removed = True
        if kept:
            message["tool_calls"] = kept
        else:
            del message["tool_calls"]
            choice["finish_reason"] = "stop"
    return removed
