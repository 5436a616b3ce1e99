"""One tighter retry when the upstream answers "context length exceeded".

The first answer of a completion is checked: an overflow error (`upstream.overflow`) that states
the model's window hands that window (and the prompt's size in the upstream's tokens, when the
error states it) to the caller's `PrepareAgain`, which records the window and prepares the request
once more against it. When that gives a different body, the request is sent again
(once: the second answer is relayed whatever it says); otherwise the first answer is relayed as
it came, its bytes read so far included (`PeekedResponse`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

from multidict import CIMultiDictProxy

from proxy.engine.manifest import Prepared
from proxy.upstream.base import UpstreamResponse
from proxy.upstream.overflow import (
    MAX_ERROR_BYTES,
    OVERFLOW_STATUSES,
    stated_prompt_tokens,
    stated_window,
)

PrepareAgain = Callable[[int, int | None], Awaitable[Prepared | None]]
"""Given the window an upstream stated (and the prompt's size in its tokens, when it says), the
request prepared again (None: nothing would change)."""


async def checked_first_answer(
    answer: UpstreamResponse, prepare_again: PrepareAgain | None
) -> UpstreamResponse | Prepared:
    """`answer` to relay, or the request prepared again when `answer` is an overflow error that
    states a window and preparing against it changes the request (`answer` is then closed)."""
    if prepare_again is None or answer.status not in OVERFLOW_STATUSES:
        return answer
    peeked = await PeekedResponse.peek(answer, MAX_ERROR_BYTES)
    window = stated_window(answer.status, peeked.head)
    if window is None:
        return peeked
    try:
        again = await prepare_again(window, stated_prompt_tokens(answer.status, peeked.head))
    except BaseException:
        answer.close()
        raise
    if again is None:
        return peeked
    answer.close()
    return again


class PeekedResponse(UpstreamResponse):
    """An answer whose first bytes were read already: the same answer, those bytes first."""

    def __init__(
        self, response: UpstreamResponse, head: bytes, rest: AsyncIterator[bytes] | None
    ) -> None:
        self._response = response
        self.head = head
        self._rest = rest

    @classmethod
    async def peek(cls, response: UpstreamResponse, size: int) -> PeekedResponse:
        """Read `response` until at least `size` bytes or its end."""
        chunks = response.chunks()
        parts: list[bytes] = []
        read = 0
        async for chunk in chunks:
            parts.append(chunk)
            read += len(chunk)
            if read >= size:
                return cls(response, b"".join(parts), chunks)
        return cls(response, b"".join(parts), None)

    @property
    def status(self) -> int:
        return self._response.status

    @property
    def headers(self) -> CIMultiDictProxy[str]:
        return self._response.headers

    async def read(self) -> bytes:
        return b"".join([chunk async for chunk in self.chunks()])

    def chunks(self) -> AsyncIterator[bytes]:
        head, self.head = self.head, b""
        rest, self._rest = self._rest, None
        return _Chained(head, rest)

    def close(self) -> None:
        self._response.close()

    @property
    def closed(self) -> bool:
        return self._response.closed


class _Chained:
    """`head`, then what `rest` still holds (an iterator: nothing to finalise if dropped)."""

    def __init__(self, head: bytes, rest: AsyncIterator[bytes] | None) -> None:
        self._head = head
        self._rest = rest

    def __aiter__(self) -> _Chained:
        return self

    async def __anext__(self) -> bytes:
        if self._head:
            head, self._head = self._head, b""
            return head
        if self._rest is None:
            raise StopAsyncIteration
        return await self._rest.__anext__()
