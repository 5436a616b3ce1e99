"""The synthetic-tool loop's state, shared by the JSON and the streaming paths.

One `SyntheticRounds` per request: it opens each upstream call, executes the synthetic calls of a
round against the tenant's artifacts, appends the round's items (the assistant's calls, one result
per call: `AnswerFormat.round_items`) to the conversation, and builds the next request body,
prepared again within the request's allowance (`round_fit`). A round's call carries the
synthetic tools only while another round of execution is still allowed, so the last allowed round
is sent without them (nor a tool choice naming one); so is a call whose round could not be made
to fit. A request asking for several choices (`n` > 1) never gets them: only a single answer can
be continued by another round.

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

from proxy.artifacts.store import ArtifactStore
from proxy.completion.round_fit import Refit, fitted_call
from proxy.engine.manifest import SyntheticTools
from proxy.engine.working_set import WorkingSetKey, remember
from proxy.formats.base import ClientFormat
from proxy.metrics import Metrics
from proxy.settings import MAX_PARSED_RESPONSE_BYTES
from proxy.stats import RequestStats, SyntheticCall
from proxy.synthetic.base import (
    SEARCH_CHARS_PER_ROUND,
    CallContext,
    RoundBudget,
    SearchWorker,
    ToolResult,
)
from proxy.synthetic.find_tools import FIND_TOOLS, found_names, loaded_tools
from proxy.synthetic.names import ToolNames
from proxy.synthetic.registry import execute
from proxy.upstream.base import Upstream, UpstreamResponse

log = logging.getLogger("ctxproxy.synthetic")

ROUNDS_HEADER = "x-ctxproxy-synthetic-rounds"
READS_HEADER = "x-ctxproxy-artifact-reads"
CONCURRENT_CALLS = 4
"""Calls of one round executed at once (each holds its artifact in memory while it runs)."""


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
    wire: ClientFormat
    """The client's wire format: how its answers, calls and conversation items look."""
    search_chars_per_round: int = SEARCH_CHARS_PER_ROUND
    max_answer_bytes: int = MAX_PARSED_RESPONSE_BYTES
    """The most one round's upstream answer may hold (it is parsed): more is an error."""
    search_worker: SearchWorker | None = None
    """Where large searches run (the app's one search thread)."""
    refit: Refit | None = None
    """Prepares each follow-up call within the allowance; None sends the conversation as it is."""
    working_set: WorkingSetKey | None = None
    """Where the executed rounds are kept for the next turn (None: they are not)."""
    messages: list[Any] = field(default_factory=list)
    """The conversation; grows by one exchange per executed round."""
    rounds: int = 0
    """Rounds of synthetic calls executed so far."""
    reads: int = 0
    """Synthetic calls executed so far."""
    names: ToolNames = field(init=False)
    _used_ids: set[str] = field(init=False)
    _withdrawn: bool = False
    """The tools were left out of a call so that it fits: no more rounds."""
    _newest: tuple[int, Any, list[Any], list[ToolResult]] | None = None
    """The newest round: where its items start in `messages`, its content, calls and results."""
    _sent: dict[str, Any] = field(init=False)
    """The body of the last call that went upstream (as a dict)."""
    _first_round: int = field(init=False)
    """Where the executed rounds start in `messages`."""

    def __post_init__(self) -> None:
        given = dict(self.tools.given)
        self.body, self.names = self.wire.with_unique_tool_names(self.body, self.tools.names, given)
        self.messages = self.wire.conversation(self.body)
        self._used_ids = self.wire.call_ids(self.messages)
        self._sent = self.body
        self._first_round = len(self.messages)

    @property
    def multiple_choices(self) -> bool:
        return self.wire.multiple_choices(self.body)

    @property
    def loop_allowed(self) -> bool:
        """Whether the current call carries the synthetic tools, so its calls may be executed."""
        if self._withdrawn or self.multiple_choices:
            return False
        return self.rounds < self.tools.max_rounds

    def first_body(self, prepared_body: bytes) -> bytes:
        encode = self.wire.encode
        if not self.loop_allowed:
            return encode(self.wire.without_synthetic_tools(self.body, self.names))
        return encode(self.body) if self.names.renamed else prepared_body

    async def next_body(self) -> bytes:
        """The next call's body, within the allowance when `refit` is set (see `round_fit`)."""
        if self.refit is None or self._newest is None:
            self._sent = self._render(self.messages)
            return self.wire.encode(self._sent)
        start, content, calls, results = self._newest
        wire = self.wire

        def render(attempt: list[ToolResult]) -> dict[str, Any]:
            items = wire.round_items(content, calls, [r.text for r in attempt])
            return self._render(self.messages[:start] + items)

        fitted = await fitted_call(self.refit, render, wire.encode, results, self.tools.allowance)
        if fitted is None:
            return self._without_round(start)
        if fitted.results is not results:  # keep what was sent, for the rounds after this one
            texts = [r.text for r in fitted.results]
            self.messages[start:] = wire.round_items(content, calls, texts)
        self._sent = fitted.parsed
        return fitted.body

    def _render(self, messages: list[Any]) -> dict[str, Any]:
        body = self.wire.render(self.body, messages, ())
        if not self.loop_allowed:
            body = self.wire.without_synthetic_tools(body, self.names)
        return body

    def _without_round(self, start: int) -> bytes:
        """The round that does not fit is left out, and the last call that went upstream goes
        again without the tools: it fitted with them, so it fits without, and it is the last."""
        del self.messages[start:]
        self._withdrawn = True
        self._sent = self.wire.without_synthetic_tools(self._sent, self.names)
        return self.wire.encode(self._sent)

    async def open(self, body: bytes) -> UpstreamResponse:
        return await self.upstream.send(
            headers=self.upstream_headers,
            body=body,
            timer=self.stats,
            route=self.wire.upstream_route,
        )

    async def execute(self, content: Any, calls: list[Any]) -> None:
        """Run one round of synthetic calls and append the exchange to the conversation."""
        calls = self._with_unique_ids(calls)
        budget = RoundBudget(self.search_chars_per_round)
        gate = asyncio.Semaphore(CONCURRENT_CALLS)  # FIFO: calls take the budget in order
        wire = self.wire

        context = CallContext(
            self.store, self.scope, self.tools.max_page_chars, budget, self.search_worker,
            self.tools.catalog,
        )  # fmt: skip

        async def run(call: Any) -> ToolResult:
            async with gate:
                name = self.names.canonical(wire.call_name(call))
                return await execute(name, wire.call_arguments(call), context)

        results = list(await asyncio.gather(*(run(call) for call in calls)))
        self._load_found(results)
        self._newest = (len(self.messages), content, calls, results)
        self.messages.extend(wire.round_items(content, calls, [r.text for r in results]))
        self.rounds += 1
        self.reads += len(calls)
        self.stats.synthetic_calls += [
            SyntheticCall(self.rounds, r.tool, wire.call_arguments(call), len(r.text))
            for call, r in zip(calls, results, strict=True)
        ]
        self.metrics.record_round([result.status for result in results])
        self.stats.synthetic_rounds, self.stats.artifact_reads = self.rounds, self.reads

    def _load_found(self, results: list[ToolResult]) -> None:
        """The tools `find_tools` found go into the next calls' tools, after the ones sent (so
        the prefix stays) and before the proxy's own."""
        catalog = self.tools.catalog
        if catalog is None:
            return
        wanted = [name for r in results if r.tool == FIND_TOOLS for name in found_names(r)]
        self.body = loaded_tools(self.wire, self.body, catalog, wanted, len(self.tools.names))

    async def keep(self) -> bool:
        """Keep the executed rounds, as they were sent, in the working set (`working_set`)."""
        exchange = self.messages[self._first_round :]
        if self.working_set is None or not exchange:
            return False
        return await remember(self.store, self.working_set, exchange)

    def _with_unique_ids(self, calls: list[Any]) -> list[Any]:
        """The calls, each with an id no other call of the conversation has (deterministic)."""
        out = []
        for index, call in enumerate(calls):
            call_id = self.wire.call_id(call)
            if not call_id or call_id in self._used_ids:
                call_id = f"call_ctxproxy_{self.rounds + 1}_{index}"
                while call_id in self._used_ids:
                    call_id += "_"
                call = self.wire.with_call_id(call, call_id)
            self._used_ids.add(call_id)
            out.append(call)
        return out

    def response_headers(self) -> dict[str, str]:
        return {ROUNDS_HEADER: str(self.rounds), READS_HEADER: str(self.reads)}

    def log_outcome(self) -> None:
        log.info(
            "request %s: synthetic rounds=%d artifact reads=%d",
            self.request_id,
            self.rounds,
            self.reads,
            extra={"request_id": self.request_id},
        )
