"""Context windows learned from the upstreams, per upstream and model.

Two sources: the upstream's own listing, asked for models the model map does not know (vLLM's
`GET /v1/models` -> `data[].max_model_len`, llama.cpp's `GET /props` ->
`default_generation_settings.n_ctx` or `n_ctx`), and the window an upstream states in a
context-length error (`record_stated`), which caps any other for that model.

Asking never holds a request for long: one probe per upstream and model at a time (concurrent
requests wait for the same one), both calls within `probe_timeout_s`, and its answer, a window or
none, is remembered for `ttl_s` (a failed probe too, so a down upstream is not asked on every
request). Any failure falls back softly: the budget then uses the policy's fallback window. Entries
are bounded (`max_entries`, least recently used first out); the cache belongs to one app
(`ModelWindows`, built in `proxy.app`).
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
from proxy.upstream.base import Upstream

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


@dataclass
class _Entry:
    listed: int | None
    """From the upstream's listing (None: asked, nothing said)."""
    asked_at: float | None
    """When the listing was asked (None: never, e.g. only an error stated a window)."""
    stated: int | None = None
    """From a context-length error: kept until replaced or evicted."""


class ModelWindows:
    """The windows learned from every upstream of one app (bounded, least recently used out)."""

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
        self._entries: OrderedDict[tuple[str, str], _Entry] = OrderedDict()
        self._probes: dict[tuple[str, str], asyncio.Task[int | None]] = {}
        self.probes = 0
        """Probes started so far (for tests and the curious)."""

    def for_request(self, upstream: Upstream, headers: CIMultiDict[str]) -> RequestWindows:
        """The view one request's preparation uses (`engine.preparer.UpstreamWindows`)."""
        return RequestWindows(self, upstream, headers)

    def known(self, upstream: str, model: str) -> KnownWindow | None:
        """What is remembered, without asking: a stated window first, else a listed one."""
        entry = self._entries.get((upstream, model))
        if entry is None:
            return None
        self._entries.move_to_end((upstream, model))
        if entry.stated is not None:
            return KnownWindow(entry.stated, stated=True)
        if entry.listed is not None:
            return KnownWindow(entry.listed, stated=False)
        return None

    def record_stated(self, upstream: str, model: str, window: int) -> None:
        """A context-length error of `upstream` stated `window` for `model`."""
        entry = self._entries.get((upstream, model))
        if entry is None:
            entry = self._store((upstream, model), _Entry(None, None))
        entry.stated = window

    async def ask(self, upstream: Upstream, model: str, headers: CIMultiDict[str]) -> None:
        """Ask `upstream` for `model`'s window unless it was asked within the TTL."""
        key = (upstream.name, model)
        entry = self._entries.get(key)
        asked_at = entry.asked_at if entry is not None else None
        if asked_at is not None and self._clock() - asked_at < self._ttl_s:
            return
        task = self._probes.get(key)
        if task is None:
            task = asyncio.ensure_future(self._probe(upstream, model, headers))
            self._probes[key] = task
            task.add_done_callback(lambda _: self._probes.pop(key, None))
        listed = await asyncio.shield(task)
        entry = self._entries.get(key) or self._store(key, _Entry(None, None))
        entry.listed, entry.asked_at = listed, self._clock()

    def _store(self, key: tuple[str, str], entry: _Entry) -> _Entry:
        self._entries[key] = entry
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)
        return entry

    async def _probe(self, upstream: Upstream, model: str, headers: CIMultiDict[str]) -> int | None:
        """The window `upstream` lists for `model`, within `probe_timeout_s` in all; None on any
        failure (the budget falls back softly)."""
        self.probes += 1
        probe_headers = CIMultiDict(
            (k, v) for k, v in headers.items() if k.lower() not in _PROBE_HEADER_DROP
        )
        try:
            async with asyncio.timeout(self.probe_timeout_s):
                for path, at_root, read in (
                    ("/models", False, _listed_max_model_len),
                    ("/props", True, _props_n_ctx),
                ):
                    payload = await _get_json(upstream, path, at_root, probe_headers)
                    window = read(payload, model) if payload is not None else None
                    if window is not None:
                        return window
        except TimeoutError:
            return None
        except Exception:  # never a request's error: its budget uses the fallback instead
            log.warning(
                "asking upstream %r for a model's window failed", upstream.name, exc_info=True
            )
        return None


async def _get_json(
    upstream: Upstream, path: str, at_root: bool, headers: CIMultiDict[str]
) -> Any:
    """The JSON an upstream answers to `GET path`, or None when it is no usable answer."""
    try:
        answer = await upstream.open("GET", path, headers=headers, body=None, at_root=at_root)
        try:
            if answer.status != 200:
                return None
            raw = await answer.read()
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


def _listed_max_model_len(payload: Any, model: str) -> int | None:
    """vLLM: `{"data": [{"id": model, "max_model_len": N}, ...]}`."""
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list):
        return None
    for entry in data:
        if isinstance(entry, dict) and entry.get("id") == model:
            return _positive(entry.get("max_model_len"))
    return None


def _props_n_ctx(payload: Any, model: str) -> int | None:
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

    async def window(self, model: str, *, ask: bool) -> KnownWindow | None:
        if ask and model:
            await self.windows.ask(self.upstream, model, self.headers)
        return self.windows.known(self.upstream.name, model)

    def record_stated(self, model: str, window: int) -> None:
        self.windows.record_stated(self.upstream.name, model, window)
