"""The upstream's cached prompt tokens, read from the stream bytes as they pass to the client.

A relayed stream is never parsed; the tap only scans each chunk (with the end of the previous
one, so a number split across chunks is still found) for the format's statement of cached tokens
(`AnswerFormat.stream_cached_tokens`) and keeps the last one of each round; the rounds of the
synthetic loop add up. The result lands in `RequestStats.cached_tokens` (the access line and
`ctxproxy_cached_input_tokens_total`): a stream's headers are gone before its usage comes.
"""

from __future__ import annotations

from proxy.formats.base import AnswerFormat
from proxy.stats import RequestStats

_OVERLAP = 64
"""Bytes of the previous chunk scanned again with the next one."""


class CachedTokensTap:
    def __init__(self, wire: AnswerFormat, stats: RequestStats) -> None:
        self._wire = wire
        self._stats = stats
        self._tail = b""
        self._done = 0
        """The cached tokens of the rounds finished so far."""
        self._round: int | None = None

    def __call__(self, chunk: bytes) -> None:
        found = self._wire.stream_cached_tokens(self._tail + chunk)
        self._tail = chunk[-_OVERLAP:]
        if found is not None:
            self._round = found
            self._stats.cached_tokens = self._done + found

    def next_round(self) -> None:
        """The current round is over: what it stated counts once, the next round adds to it."""
        if self._round is not None:
            self._done += self._round
        self._round, self._tail = None, b""
