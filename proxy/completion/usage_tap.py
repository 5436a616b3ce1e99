"""The upstream's usage, read from the stream bytes as they pass to the client.

A relayed stream is never parsed; the tap only scans each chunk (with the last 64 bytes before
it, so a figure split across chunks, however small, is still found) with the format's scanner
(`AnswerFormat.usage_scanner`), which keeps the last statement of each figure of the round. Each
round of the synthetic loop is one answer in `RequestStats.answers` (the access line, the metrics
and the cost): a stream's headers are gone before its usage comes.
"""

from __future__ import annotations

from proxy.formats.base import AnswerFormat, UsageScanner
from proxy.stats import RequestStats

_OVERLAP = 64
"""Bytes before a chunk scanned again with it (more than a usage statement takes)."""


class UsageTap:
    def __init__(self, wire: AnswerFormat, stats: RequestStats) -> None:
        self._wire = wire
        self._stats = stats
        self._tail = b""
        self._scanner: UsageScanner = wire.usage_scanner()
        self._index: int | None = None
        """Where this round's usage is in `stats.answers`, once it stated one."""

    def __call__(self, chunk: bytes) -> None:
        data = self._tail + chunk
        found = self._scanner.feed(data)
        self._tail = data[-_OVERLAP:]
        if not found:
            return
        usage = self._scanner.usage()
        if usage is None:
            return
        answers = self._stats.answers
        if self._index is None:
            self._index = len(answers)
            answers.append(usage)
        else:
            answers[self._index] = usage

    def next_round(self) -> None:
        """The current round is over: what it stated stays, the next round is another answer."""
        self._scanner = self._wire.usage_scanner()
        self._index, self._tail = None, b""
