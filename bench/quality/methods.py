"""The compared methods: full history, two baselines, and every ctxproxy preset at a budget.

Budgets reach the presets through the real policy loader: for each preset and budget a policy
file `q-<preset>-<budget>.yaml` that `extends:` the preset and sets `budget.context_window` and
`budget.reserved_output` so that the allowance (window - reserved - safety margin) equals the
budget exactly, is written to a temporary directory and loaded with `PolicyStore.load`.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from unittest.mock import patch

import orjson

from bench.quality.judge import Result
from bench.quality.summarizer import ScriptedSummarizer
from bench.quality.text import MODEL
from proxy.artifacts.store import MemoryStore
from proxy.engine.budget import BudgetPolicy, compute_budget
from proxy.engine.preparer import Preparer
from proxy.errors import ErrorCode, ProxyError
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.http.auth import Tenant
from proxy.jsonio import dumps
from proxy.policy.store import PolicyStore
from proxy.tokens.catalog import ModelCatalog
from proxy.tokens.counters import REPLY_PRIMER, TokenCounter, TokenCounters

RESERVED_OUTPUT = 512
EMPTY_LIST_TOKENS = 3  # litellm counts an empty message list as the reply primer only
SECRET = b"ctxproxy-quality-bench"


class Session(Protocol):
    """One method applied to one growing sequence of requests (state such as a store persists)."""

    async def prepare(self, body: dict[str, Any]) -> Result: ...


class Method(Protocol):
    name: str
    kind: str
    """"baseline" or "preset"."""

    def session(self, budget: int) -> Session: ...


# -- baselines ------------------------------------------------------------------------------------


class _Passthrough:
    async def prepare(self, body: dict[str, Any]) -> Result:
        return Result(body)


@dataclass
class FullHistory:
    name: str = "full history"
    kind: str = "baseline"

    def session(self, budget: int) -> Session:
        return _Passthrough()


def _system_end(messages: list[Any]) -> int:
    """Index of the first message after the leading system messages."""
    end = 0
    while end < len(messages) and messages[end].get("role") == "system":
        end += 1
    return end


def _fixed_tokens(counter: TokenCounter, body: dict[str, Any]) -> int:
    """Tokens of a request besides its messages: the tools block and the reply primer."""
    return counter.count_tools(body.get("tools"), body.get("tool_choice")) + REPLY_PRIMER


@dataclass
class _Window:
    counter: TokenCounter
    allowance: int

    async def prepare(self, body: dict[str, Any]) -> Result:
        messages: list[Any] = body["messages"]
        system_end = _system_end(messages)
        costs = [self.counter.count_message(m) for m in messages]
        total = sum(costs) + _fixed_tokens(self.counter, body)
        start = system_end
        while total > self.allowance and start < len(messages):
            total -= costs[start]
            start += 1
        return Result({**body, "messages": messages[:system_end] + messages[start:]})


@dataclass
class SlidingWindow:
    """Keep the system prompt, drop the oldest other messages until the request fits.

    Deliberately naive: it cuts wherever the budget falls, so it may split a tool exchange.
    """

    counter: TokenCounter
    name: str = "sliding window"
    kind: str = "baseline"

    def session(self, budget: int) -> Session:
        return _Window(self.counter, budget)


@dataclass
class _Restart:
    counter: TokenCounter
    allowance: int
    start: int = 0
    """Index of the first non-system message still sent; only ever moves forward."""

    async def prepare(self, body: dict[str, Any]) -> Result:
        messages: list[Any] = body["messages"]
        system_end = _system_end(messages)
        self.start = max(self.start, system_end)
        if self._tokens(body, messages[:system_end] + messages[self.start :]) > self.allowance:
            last_user = max(
                (i for i, m in enumerate(messages) if m.get("role") == "user"), default=system_end
            )
            self.start = max(self.start, last_user)
        return Result({**body, "messages": messages[:system_end] + messages[self.start :]})

    def _tokens(self, body: dict[str, Any], messages: list[Any]) -> int:
        return _fixed_tokens(self.counter, body) + sum(map(self.counter.count_message, messages))


@dataclass
class FillAndRestart:
    """A reference for the cached-prefix share, not a usable method: send the whole history
    while it fits, and when it no longer does, restart from the system prompt and the current
    turn (everything older is simply lost). Each prompt is then either the previous one plus the
    new messages, or as short as it can be: about the best prefix share any reduction that keeps
    each request within the budget can reach on a conversation growing turn by turn.
    """

    counter: TokenCounter
    name: str = "fill-and-restart (reference)"
    kind: str = "baseline"

    def session(self, budget: int) -> Session:
        return _Restart(self.counter, budget)


@dataclass
class _Litellm:
    trim: Any
    counter: TokenCounter
    allowance: int

    async def prepare(self, body: dict[str, Any]) -> Result:
        messages = list(body["messages"])
        fixed = _fixed_tokens(self.counter, body)
        trimmed = self.trim(messages, model=MODEL, max_tokens=max(self.allowance - fixed, 1))
        # trim_messages swallows its own exceptions and then returns the input list itself.
        note = "trim_messages failed: input returned untrimmed" if trimmed is messages else ""
        return Result({**body, "messages": trimmed}, note=note)


class _MemoCount:
    """litellm's own `token_counter`, memoised per message.

    `trim_messages` recounts the whole kept list for every message it adds (quadratic). litellm's
    count of a list is additive: 3 + sum(count([m]) - 3), checked by `check_additive`, so this
    returns exactly what litellm would, only faster. Keyed by content: litellm edits dicts in place.
    """

    def __init__(self, token_counter: Any) -> None:
        self._count = token_counter
        self._cache: dict[bytes, int] = {}

    def __call__(self, messages: list[Any], model: str | None) -> int:
        total = EMPTY_LIST_TOKENS
        for message in messages:
            key = orjson.dumps(message, option=orjson.OPT_SORT_KEYS)
            if key not in self._cache:
                self._cache[key] = self._count(model=model, messages=[message]) - EMPTY_LIST_TOKENS
            total += self._cache[key]
        return total

    def check_additive(self, messages: list[Any], model: str) -> None:
        exact = self._count(model=model, messages=messages)
        if exact != self(messages, model):
            raise RuntimeError("litellm token_counter is not additive per message here")


@dataclass
class LitellmTrim:
    """litellm's `trim_messages` with `max_tokens` = the allowance minus the tools block."""

    counter: TokenCounter
    name: str = "litellm trim_messages"
    kind: str = "baseline"
    _trim: Any = None

    def session(self, budget: int) -> Session:
        if self._trim is None:
            self._trim = _load_trim()
        return _Litellm(self._trim, self.counter, budget)


def _load_trim() -> Any:
    """`trim_messages`, counting through the memoised counter (same results, linear time)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network
    import litellm.utils
    from litellm.utils import token_counter, trim_messages

    logging.getLogger("LiteLLM").setLevel(logging.CRITICAL)
    memo = _MemoCount(token_counter)
    sample = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi there"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "result text"},
    ]
    memo.check_additive(sample, MODEL)

    def trim(messages: list[Any], **kwargs: Any) -> Any:
        with patch.object(litellm.utils, "get_token_count", memo):
            return trim_messages(messages, **kwargs)

    return trim


# -- ctxproxy presets -----------------------------------------------------------------------------


@dataclass
class _Proxy:
    preparer: Preparer
    store: MemoryStore
    tenant: Tenant
    max_page_chars: int
    requests: int = 0
    summarizer: ScriptedSummarizer | None = None

    async def prepare(self, body: dict[str, Any]) -> Result:
        self.requests += 1
        try:
            prepared = await self.preparer.prepare(
                body, dumps(body), self.tenant, OPENAI_CHAT, summarizer=self.summarizer
            )
        except ProxyError as exc:
            if exc.code not in (
                ErrorCode.context_length_exceeded,
                ErrorCode.artifact_store_unavailable,
            ):
                raise
            details = exc.details or {}
            return Result(
                None,
                note=f"refused: {details.get('reason', exc.code.name)} "
                f"(protected {details.get('protected_tokens')} tokens)",
            )
        return Result(
            prepared.parsed,
            self.store,
            self.tenant.scope,
            self.max_page_chars,
            note=prepared.manifest.outcome,
        )


@dataclass
class Preset:
    """A ctxproxy preset driven at a budget by its derived policy `q-<preset>-<budget>`."""

    preset: str
    policies: PolicyStore
    counters: TokenCounters
    catalog: ModelCatalog
    kind: str = "preset"
    name: str = field(init=False)

    def __post_init__(self) -> None:
        self.name = f"ctxproxy {self.preset}"

    def session(self, budget: int) -> Session:
        policy_name = derived_name(self.preset, budget)
        policy = self.policies.resolve(policy_name, MODEL)
        store = MemoryStore(SECRET)
        preparer = Preparer(
            policies=self.policies, counters=self.counters, catalog=self.catalog, store=store
        )
        tenant = Tenant("bench", policy_name, "bench", None, False)
        # a preset named `*-scripted` summarizes with the scripted stand-in for a model
        scripted = ScriptedSummarizer() if self.preset.endswith("-scripted") else None
        return _Proxy(preparer, store, tenant, policy.read_tool.max_page_chars,
                      summarizer=scripted)


def derived_name(preset: str, budget: int) -> str:
    return f"q-{preset}-{budget}"


def _window_for(budget: BudgetPolicy, allowance: int, catalog: ModelCatalog) -> int:
    """The smallest context window that gives exactly `allowance` with RESERVED_OUTPUT."""
    window = allowance + RESERVED_OUTPUT
    while True:
        trial = budget.model_copy(
            update={"context_window": window, "reserved_output": RESERVED_OUTPUT}
        )
        got = compute_budget(trial, MODEL, None, catalog).allowance
        if got >= allowance:
            return window
        window += max(1, allowance - got)


@contextmanager
def derived_policies(
    budgets: list[int], catalog: ModelCatalog, extra: Path | None = None
) -> Iterator[tuple[PolicyStore, list[str]]]:
    """(store holding every preset x budget, the preset names), loaded from a temp dir.

    `extra` is a directory of further policy files (e.g. a proposed change extending `default`)
    evaluated as presets of their own. Every derived policy's allowance is checked to equal its
    budget, so the baselines can use the budget itself as their allowance."""
    with tempfile.TemporaryDirectory(prefix="ctxproxy-quality-") as tmp:
        for path in sorted(extra.glob("*.yaml")) if extra else ():
            shutil.copy(path, Path(tmp, path.name))
        base = PolicyStore.load(Path(tmp))
        presets = base.names()
        for preset in presets:
            for budget in budgets:
                window = _window_for(base.get(preset).budget, budget, catalog)
                text = (
                    f"extends: {preset}\nbudget:\n  context_window: {window}\n"
                    f"  reserved_output: {RESERVED_OUTPUT}\n"
                )
                Path(tmp, derived_name(preset, budget) + ".yaml").write_text(text)
        store = PolicyStore.load(Path(tmp))
        for budget in budgets:
            for preset in presets:
                policy = store.resolve(derived_name(preset, budget), MODEL)
                got = compute_budget(policy.budget, MODEL, None, catalog).allowance
                if got != budget:
                    raise RuntimeError(f"{derived_name(preset, budget)}: allowance {got}")
        yield store, presets


def all_methods(
    counters: TokenCounters,
    catalog: ModelCatalog,
    policies: PolicyStore,
    presets: list[str],
    *,
    litellm: bool = True,
) -> list[Method]:
    counter = counters.for_model(MODEL)
    methods: list[Method] = [FullHistory(), SlidingWindow(counter), FillAndRestart(counter)]
    if litellm:
        methods.append(LitellmTrim(counter))
    methods += [Preset(p, policies, counters, catalog) for p in presets]
    return methods
