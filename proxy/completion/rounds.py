"""The synthetic-tool loop's state, shared by the JSON and the streaming paths.

One `SyntheticRounds` per request: it opens each upstream call, executes the synthetic calls of a
round against the tenant's artifacts, appends the assistant message and one `tool` message per
call to the conversation, and builds the next request body. A round's call carries the synthetic
tools only while another round of execution is still allowed, so the last allowed round is sent
without them (and without a `tool_choice` naming one). A request asking for several choices
(`n` > 1) never gets them: only a single answer can be continued by another round.

The proxy's tools never share a name with a client tool: when the client has a tool called
`read_context_artifact` (or `search_context_artifact`), the proxy's goes by another name for that
request (`ToolNames`), only calls of the proxy's names are executed, and the client's calls go to
the client. The calls of a round get unique ids in the follow-up conversation (a missing, empty
or repeated id is replaced by `call_ctxproxy_<round>_<index>`), and share one `RoundBudget`
(at most `MAX_CALLS_PER_ROUND` calls and a number of characters searched), `CONCURRENT_CALLS`
of them running at once.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

from multidict import CIMultiDict

from proxy.artifacts.read_tool import (
    READ_TOOL,
    SEARCH_CHARS_PER_ROUND,
    SEARCH_TOOL,
    ReadResult,
    RoundBudget,
    ToolNames,
    execute,
    names_avoiding,
)
from proxy.artifacts.store import ArtifactStore
from proxy.engine.manifest import SyntheticTools
from proxy.jsonio import dumps
from proxy.metrics import Metrics
from proxy.settings import MAX_PARSED_RESPONSE_BYTES
from proxy.stats import RequestStats
from proxy.upstream.base import Upstream, UpstreamResponse

log = logging.getLogger("ctxproxy.synthetic")

ROUNDS_HEADER = "x-ctxproxy-synthetic-rounds"
READS_HEADER = "x-ctxproxy-artifact-reads"
DEFAULT_NAMES = ToolNames()
CONCURRENT_CALLS = 4
"""Calls of one round executed at once (each holds its artifact in memory while it runs)."""
_PROXY_TOOLS = (READ_TOOL, SEARCH_TOOL)


@dataclass
class SyntheticRounds:
    upstream: Upstream
    upstream_headers: CIMultiDict[str]
    store: ArtifactStore
    scope: str
    tools: SyntheticTools
    body: dict[str, Any]
    """The prepared request (its synthetic tools renamed if a client tool has their name)."""
    metrics: Metrics
    stats: RequestStats
    request_id: str
    search_chars_per_round: int = SEARCH_CHARS_PER_ROUND
    max_answer_bytes: int = MAX_PARSED_RESPONSE_BYTES
    """The most one round's upstream answer may hold (it is parsed): more is an error."""
    messages: list[Any] = field(default_factory=list)
    """The conversation; grows by one exchange per executed round."""
    rounds: int = 0
    """Rounds of synthetic calls executed so far."""
    reads: int = 0
    """Synthetic calls executed so far."""
    names: ToolNames = field(init=False)
    _used_ids: set[str] = field(init=False)

    def __post_init__(self) -> None:
        self.body, self.names = with_unique_tool_names(self.body)
        messages = self.body.get("messages")
        self.messages = list(messages) if isinstance(messages, list) else []
        self._used_ids = _call_ids(self.messages)

    @property
    def multiple_choices(self) -> bool:
        n = self.body.get("n")
        return isinstance(n, int | float) and not isinstance(n, bool) and n > 1

    @property
    def loop_allowed(self) -> bool:
        """Whether the current call carries the synthetic tools, so its calls may be executed."""
        return self.rounds < self.tools.max_rounds and not self.multiple_choices

    def first_body(self, prepared_body: bytes) -> bytes:
        if not self.loop_allowed:
            return dumps(without_synthetic_tools(self.body, self.names))
        return dumps(self.body) if self.names.renamed else prepared_body

    def next_body(self) -> bytes:
        body = dict(self.body)
        body["messages"] = self.messages
        if self.rounds >= self.tools.max_rounds:
            body = without_synthetic_tools(body, self.names)
        return dumps(body)

    async def open(self, body: bytes) -> UpstreamResponse:
        return await self.upstream.chat_completions(
            headers=self.upstream_headers, body=body, timer=self.stats
        )

    async def execute(self, content: str | None, calls: list[dict[str, Any]]) -> None:
        """Run one round of synthetic calls and append the exchange to the conversation."""
        calls = self._with_unique_ids(calls)
        budget = RoundBudget(self.search_chars_per_round)
        gate = asyncio.Semaphore(CONCURRENT_CALLS)  # FIFO: calls take the budget in order

        async def run(call: dict[str, Any]) -> ReadResult:
            async with gate:
                return await execute(
                    self.store, self.scope,
                    self.names.canonical(str(function_of(call).get("name"))),
                    _arguments(call), max_page_chars=self.tools.max_page_chars, budget=budget,
                )

        results = await asyncio.gather(*(run(call) for call in calls))
        self.messages.append({"role": "assistant", "content": content, "tool_calls": calls})
        self.messages.extend(
            {"role": "tool", "tool_call_id": call["id"], "content": result.text}
            for call, result in zip(calls, results, strict=True)
        )
        self.rounds += 1
        self.reads += len(calls)
        self.metrics.record_round([result.status for result in results])
        self.stats.synthetic_rounds, self.stats.artifact_reads = self.rounds, self.reads

    def _with_unique_ids(self, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The calls, each with an id no other call of the conversation has (deterministic)."""
        out = []
        for index, call in enumerate(calls):
            call_id = call.get("id")
            if not isinstance(call_id, str) or not call_id or call_id in self._used_ids:
                call_id = f"call_ctxproxy_{self.rounds + 1}_{index}"
                while call_id in self._used_ids:
                    call_id += "_"
                call = {**call, "id": call_id}
            self._used_ids.add(call_id)
            out.append(call)
        return out

    def response_headers(self) -> dict[str, str]:
        return {ROUNDS_HEADER: str(self.rounds), READS_HEADER: str(self.reads)}

    def log_outcome(self) -> None:
        log.info(
            "request %s: synthetic rounds=%d artifact reads=%d", self.request_id, self.rounds,
            self.reads, extra={"request_id": self.request_id},
        )


def _call_ids(messages: list[Any]) -> set[str]:
    """Every tool-call id the conversation uses already (calls and results)."""
    ids: set[str] = set()
    for message in messages:
        if not isinstance(message, dict):
            continue
        if isinstance(message.get("tool_call_id"), str):
            ids.add(message["tool_call_id"])
        calls = message.get("tool_calls")
        for call in calls if isinstance(calls, list) else []:
            if isinstance(call, dict) and isinstance(call.get("id"), str):
                ids.add(call["id"])
    return ids


def with_unique_tool_names(body: dict[str, Any]) -> tuple[dict[str, Any], ToolNames]:
    """The prepared body, its synthetic tools renamed when a client tool has one of their names.

    The preparer appends the proxy's tools after the client's (`Prepared.synthetic`): they are
    the last two entries of `tools`, and every entry before them is the client's.
    """
    tools = body.get("tools")
    count = len(_PROXY_TOOLS)
    if not isinstance(tools, list) or len(tools) < count:
        return body, DEFAULT_NAMES
    client, own = tools[:-count], tools[-count:]
    if sorted(str(_tool_name(tool)) for tool in own) != sorted(_PROXY_TOOLS):
        return body, DEFAULT_NAMES
    names = names_avoiding({name for t in client if isinstance(name := _tool_name(t), str)})
    if not names.renamed:
        return body, names
    return {**body, "tools": client + [_renamed(tool, names) for tool in own]}, names


def _renamed(tool: dict[str, Any], names: ToolNames) -> dict[str, Any]:
    function = dict(function_of(tool))
    canonical = str(function.get("name"))
    function["name"] = names.own(canonical)
    if function["name"] != canonical:
        function["description"] = (
            f"{function.get('description', '')} Notices in this conversation call this tool "
            f"{canonical}; the tool of that name here is another one."
        ).strip()
    return {**tool, "function": function}


def function_of(call: Any) -> dict[str, Any]:
    function = call.get("function") if isinstance(call, dict) else None
    return function if isinstance(function, dict) else {}


def is_synthetic_call(call: Any, names: ToolNames = DEFAULT_NAMES) -> bool:
    return function_of(call).get("name") in names


def _arguments(call: dict[str, Any]) -> str | dict[str, Any]:
    arguments = function_of(call).get("arguments")
    return arguments if isinstance(arguments, str | dict) else ""


def _tool_name(tool: Any) -> Any:
    return function_of(tool).get("name")


def without_synthetic_tools(
    body: dict[str, Any], names: ToolNames = DEFAULT_NAMES
) -> dict[str, Any]:
    """A copy without the synthetic tools (nor a `tool_choice` naming one; no empty `tools`)."""
    out = dict(body)
    tools = out.get("tools")
    if not isinstance(tools, list):
        return out
    kept = [t for t in tools if _tool_name(t) not in names]
    if kept:
        out["tools"] = kept
        if _tool_name(out.get("tool_choice")) in names:
            del out["tool_choice"]
        return out
    for key in ("tools", "tool_choice", "parallel_tool_calls"):
        out.pop(key, None)
    return out


def synthetic_only(
    payload: dict[str, Any], names: ToolNames = DEFAULT_NAMES
) -> tuple[str | None, list[dict[str, Any]]] | None:
    """(content, calls) when the only choice asks for synthetic calls and nothing else."""
    choices = payload.get("choices")
    if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], dict):
        return None
    message = choices[0].get("message")
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    if not isinstance(calls, list) or not calls:
        return None
    if not all(isinstance(c, dict) and is_synthetic_call(c, names) for c in calls):
        return None
    content = message.get("content") if isinstance(message, dict) else None
    return (content if isinstance(content, str) else None), calls


def strip_synthetic_calls(payload: dict[str, Any], names: ToolNames = DEFAULT_NAMES) -> bool:
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
        kept = [c for c in calls if not is_synthetic_call(c, names)]
        if len(kept) == len(calls):
            continue
        removed = True
        if kept:
            message["tool_calls"] = kept
        else:
            del message["tool_calls"]
            choice["finish_reason"] = "stop"
    return removed
