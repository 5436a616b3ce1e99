"""Context windows learned from the upstreams, per upstream and model.

Two sources: the upstream's own listing, asked for models the model map does not know (vLLM's
`GET /v1/models` -> `data[].max_model_len`, llama.cpp's `GET /props` ->
`default_generation_settings.n_ctx` or `n_ctx`), and the window an upstream states in a
context-length error (`record_stated`), which caps any other for that model.

Asking never holds a request for long: one probe per upstream at a time (concurrent requests wait
for the same one), both calls within `probe_timeout_s`, and its answer, windows or none, is
remembered for `ttl_s` (a failed probe too, so a down upstream is not asked on every request, and
model names a client makes up never make more than one probe per upstream and TTL). Any failure
falls back softly: the budget then uses the policy's fallback window. Stated windows are bounded
(`max_entries`, least recently used first out); the cache belongs to one app (`ModelWindows`,
built in `proxy.app`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from multidict import CIMultiDict

from proxy.errors import ProxyError
from proxy.jsonio import loads
from proxy.upstream.base import Upstream, read_at_most

log = logging.getLogger("ctxproxy.upstream")

PROBE_TIMEOUT_S = 2.0
TTL_S = 600.0
MAX_ENTRIES = 1024
MAX_PROBE_BYTES = 1024 * 1024
_PROBE_HEADER_DROP = ("content-type", "content-length")


@dataclass(frozen=True)
class KnownWindow:
    """A model's window as its upstream told it (an `engine.budget.LearnedWindow`)."""

    tokens: int
    stated: bool
    """Stated in a context-length error (else listed: `/v1/models`, `/props`)."""


@dataclass(frozen=True)
class _Listing:
    """What one upstream said of its models when asked."""

    windows: dict[str, int]
    """vLLM: `max_model_len` by model id."""
    server_n_ctx: int | None
    """llama.cpp: the context of the one model it serves, whatever name a request gives it."""
    asked_at: float

    def window(self, model: str) -> int | None:
        return self.windows.get(model) or self.server_n_ctx


class ModelWindows:
    """The windows learned from every upstream of one app.

    Listings are kept per upstream (upstreams come from config: a client's model names never
    cause more than one probe per upstream and TTL); stated windows per upstream and model,
    bounded (`max_entries`, least recently used out).
    """

    def __init__(
        self,
        *,
        probe_timeout_s: float = PROBE_TIMEOUT_S,
        ttl_s: float = TTL_S,
        max_entries: int = MAX_ENTRIES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.probe_timeout_s = probe_timeout_s
        self._ttl_s = ttl_s
        self._max_entries = max_entries
        self._clock = clock
        self._listings: dict[str, _Listing] = {}
        self._stated: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._probes: dict[str, asyncio.Task[_Listing]] = {}
        self.probes = 0
        """Probes started so far (for tests and the curious)."""

    def for_request(self, upstream: Upstream, headers: CIMultiDict[str]) -> RequestWindows:
        """The view one request's preparation uses (`engine.preparer.UpstreamWindows`)."""
        return RequestWindows(self, upstream, headers)

    def known(self, upstream: str, model: str) -> KnownWindow | None:
        """What is remembered, without asking: a stated window first, else a listed one."""
        stated = self._stated.get((upstream, model))
        if stated is not None:
            self._stated.move_to_end((upstream, model))
            return KnownWindow(stated, stated=True)
        listing = self._listings.get(upstream)
        listed = listing.window(model) if listing is not None and model else None
        return KnownWindow(listed, stated=False) if listed is not None else None

    def record_stated(self, upstream: str, model: str, window: int) -> None:
        """A context-length error of `upstream` stated `window` for `model`."""
        self._stated[(upstream, model)] = window
        self._stated.move_to_end((upstream, model))
        while len(self._stated) > self._max_entries:
            self._stated.popitem(last=False)

    async def ask(self, upstream: Upstream, headers: CIMultiDict[str]) -> None:
        """Ask `upstream` for its models' windows unless it was asked within the TTL."""
        name = upstream.name
        listing = self._listings.get(name)
        if listing is not None and self._clock() - listing.asked_at < self._ttl_s:
            return
        task = self._probes.get(name)
        if task is None:
            task = asyncio.ensure_future(self._probe(upstream, headers))
            self._probes[name] = task
            task.add_done_callback(lambda _: self._probes.pop(name, None))
        self._listings[name] = await asyncio.shield(task)

    async def _probe(self, upstream: Upstream, headers: CIMultiDict[str]) -> _Listing:
        """What `upstream` lists, within `probe_timeout_s` in all; whatever it did not say (it
        failed, it was too slow) is missing: the budget then falls back softly."""
        self.probes += 1
        probe_headers = CIMultiDict(
            (k, v) for k, v in headers.items() if k.lower() not in _PROBE_HEADER_DROP
        )
        windows: dict[str, int] = {}
        n_ctx = None
        try:
            async with asyncio.timeout(self.probe_timeout_s):
                windows = _listed_max_model_lens(
                    await _get_json(upstream, "/models", False, probe_headers)
                )
                n_ctx = _props_n_ctx(await _get_json(upstream, "/props", True, probe_headers))
        except TimeoutError:
            pass
        except Exception:  # never a request's error: its budget uses the fallback instead
            log.warning(
                "asking upstream %r for its models' windows failed", upstream.name, exc_info=True
            )
        return _Listing(windows, n_ctx, self._clock())


async def _get_json(upstream: Upstream, path: str, at_root: bool, headers: CIMultiDict[str]) -> Any:
    """The JSON an upstream answers to `GET path`, or None when it is no usable answer."""
    try:
        answer = await upstream.open("GET", path, headers=headers, body=None, at_root=at_root)
        try:
            if answer.status != 200:
                return None
            raw = await read_at_most(answer, MAX_PROBE_BYTES)
        finally:
            answer.close()
    except ProxyError:  # UpstreamError: unreachable, broken
        return None
    if len(raw) > MAX_PROBE_BYTES:
        return None
    try:
        return loads(raw)
    except ProxyError:
        return None


def _positive(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def _listed_max_model_lens(payload: Any) -> dict[str, int]:
    """vLLM: `{"data": [{"id": model, "max_model_len": N}, ...]}` (at most `MAX_ENTRIES`)."""
    data = payload.get("data") if isinstance(payload, dict) else None
    windows: dict[str, int] = {}
    for entry in data[:MAX_ENTRIES] if isinstance(data, list) else ():
        if isinstance(entry, dict) and isinstance(entry.get("id"), str):
            window = _positive(entry.get("max_model_len"))
            if window is not None:
                windows.setdefault(entry["id"], window)
    return windows


def _props_n_ctx(payload: Any) -> int | None:
    """llama.cpp (one model per server): `default_generation_settings.n_ctx`, or `n_ctx`."""
    if not isinstance(payload, dict):
        return None
    settings = payload.get("default_generation_settings")
    if isinstance(settings, dict) and _positive(settings.get("n_ctx")):
        return _positive(settings.get("n_ctx"))
    return _positive(payload.get("n_ctx"))


@dataclass(frozen=True)
class RequestWindows:
    """`ModelWindows` bound to one request's upstream and credentials."""

    windows: ModelWindows
    upstream: Upstream
    headers: CIMultiDict[str]

    @property
    def upstream_name(self) -> str:
        return self.upstream.name

    async def window(self, model: str, *, ask: bool) -> KnownWindow | None:
        if ask and model:
            await self.windows.ask(self.upstream, self.headers)
        return self.windows.known(self.upstream.name, model)

    def record_stated(self, model: str, window: int) -> None:
        self.windows.record_stated(self.upstream.name, model, window)

    def prompt_cache_ttl(self, model: str) -> int | None:
        return self.upstream.settings.prompt_cache.ttl_for(model)
