"""Leases: what the requests in flight reference, which no store limit may evict.

A request enters `Leases.lease()` for its whole life (preparation, the upstream rounds, the
streamed answer). While it is active, every artifact the request stores, refreshes or reads is
pinned: the per-scope cap and the memory store's byte budget evict other artifacts first, and
never a pinned one. The current lease travels in a context variable, so the store calls of a
request (and of the tasks it starts) find it without it being passed through every layer;
a call outside any lease pins nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from contextvars import ContextVar, Token
from types import TracebackType

PinKey = tuple[str, str]
"""(scope, artifact id)"""


class Leases:
    """Reference counts of the pins of the leases in flight, for one store."""

    def __init__(self, on_release: Callable[[], None] | None = None) -> None:
        self._current: ContextVar[set[PinKey] | None] = ContextVar(
            f"artifact_lease_{id(self)}", default=None
        )
        self._counts: dict[PinKey, int] = {}
        self._on_release = on_release

    def lease(self) -> contextlib.AbstractContextManager[None]:
        """Pin what the calls inside reference until the block ends (nested leases pin again)."""
        return _Lease(self)

    def _release(self, held: set[PinKey]) -> None:
        """Unpin what a lease that ended held."""
        for key in held:
            left = self._counts[key] - 1
            if left:
                self._counts[key] = left
            else:
                del self._counts[key]
        if self._on_release is not None:
            self._on_release()

    def pin(self, scope: str, artifact_ids: Iterable[str]) -> None:
        """Pin `artifact_ids` of `scope` for the current lease (none: nothing to do)."""
        held = self._current.get()
        if held is None:
            return
        for artifact_id in artifact_ids:
            key = (scope, artifact_id)
            if key not in held:
                held.add(key)
                self._counts[key] = self._counts.get(key, 0) + 1

    def pinned(self, scope: str, artifact_id: str) -> bool:
        return (scope, artifact_id) in self._counts

    @property
    def count(self) -> int:
        """How many distinct artifacts are pinned (for tests and diagnostics)."""
        return len(self._counts)


class _Lease:
    """One request's lease (a plain context manager: entered on every request)."""

    __slots__ = ("_held", "_leases", "_token")

    def __init__(self, leases: Leases) -> None:
        self._leases = leases
        self._held: set[PinKey] = set()
        self._token: Token[set[PinKey] | None] | None = None

    def __enter__(self) -> None:
        self._token = self._leases._current.set(self._held)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._token is None:
            return
        token, self._token = self._token, None
        self._leases._current.reset(token)
        if self._held:  # an empty lease unpins nothing: no limit can free more than before
            self._leases._release(self._held)
