"""FakeUpstream: a real aiohttp server on 127.0.0.1 that speaks the OpenAI wire format.

It records every request before replying, answers from a FIFO queue of scripted replies (falling
back to deterministic defaults), and counts handlers so tests can prove nothing leaks.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Self

from aiohttp import web
from multidict import CIMultiDict

from .defaults import default_for
from .records import Recorded
from .replies import Reply

REQUEST_ID_KEY = web.RequestKey("fake_upstream_request_id", str)
MAX_BODY_BYTES = 512 * 1024 * 1024
WAIT_S = 30.0
"""How long `wait_idle` and `wait_for_requests` wait by default: only bounds a hang."""


@dataclass(frozen=True)
class _Queued:
    reply: Reply
    path: str | None


class FakeUpstream:
    """A scripted OpenAI-compatible upstream bound to a free port on 127.0.0.1."""

    def __init__(
        self,
        *,
        shutdown_timeout_s: float = 0.5,
        default: Callable[[Recorded], Reply] = default_for,
    ) -> None:
        """`default` answers whatever the queue does not (a script that sees each request)."""
        self.received: list[Recorded] = []
        self.active_requests = 0
        self.completed = 0
        self.cancelled = 0
        self.errors: list[BaseException] = []
        self._queue: deque[_Queued] = deque()
        self._shutdown_timeout_s = shutdown_timeout_s
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        self._request_count = 0
        self._default = default

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Bind 127.0.0.1 on a free port; handlers are cancelled when the client disconnects."""
        if self._runner is not None:
            raise RuntimeError("FakeUpstream already started")
        app = web.Application(client_max_size=MAX_BODY_BYTES)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        app.on_response_prepare.append(self._add_provider_headers)
        runner = web.AppRunner(
            app,
            handler_cancellation=True,
            shutdown_timeout=self._shutdown_timeout_s,
            access_log=None,
        )
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self._runner = runner
        self._port = _bound_port(runner)

    async def stop(self) -> None:
        """Stop serving; handlers still running are cancelled after the shutdown timeout."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("FakeUpstream is not started")
        return self._port

    @property
    def origin(self) -> str:
        """`http://127.0.0.1:<port>` (no path)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """What an OpenAI client takes as base_url: `http://127.0.0.1:<port>/v1`."""
        return f"{self.origin}/v1"

    # -- scripting -------------------------------------------------------------------------

    def enqueue(self, reply: Reply, *, path: str | None = None) -> None:
        """Queue a reply for the next request (to `path` only, when given)."""
        self._queue.append(_Queued(reply, path))

    def enqueue_many(self, *replies: Reply, path: str | None = None) -> None:
        """Queue several replies, answered in order."""
        for reply in replies:
            self.enqueue(reply, path=path)

    @property
    def pending(self) -> int:
        """How many queued replies have not been used yet."""
        return len(self._queue)

    def _next_reply(self, record: Recorded) -> Reply:
        for queued in self._queue:
            if queued.path is None or queued.path == record.path:
                self._queue.remove(queued)
                return queued.reply
        return self._default(record)

    # -- inspection ------------------------------------------------------------------------

    def requests(self, path: str | None = None) -> list[Recorded]:
        """Recorded requests, optionally only those to `path` (e.g. "/v1/chat/completions")."""
        return [r for r in self.received if path is None or r.path == path]

    @property
    def last(self) -> Recorded:
        """The most recent request (AssertionError when there was none)."""
        assert self.received, "the fake upstream received no request"
        return self.received[-1]

    async def wait_idle(self, timeout: float = WAIT_S) -> None:
        """Wait until no handler is running (TimeoutError naming the count otherwise)."""
        await self._wait_until(lambda: self.active_requests == 0, timeout, "handlers to finish")

    async def wait_for_requests(self, count: int, timeout: float = WAIT_S) -> None:
        """Wait until at least `count` requests have been recorded."""
        await self._wait_until(lambda: len(self.received) >= count, timeout, f"{count} requests")

    async def _wait_until(self, done: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"timed out after {timeout}s waiting for {what}: active={self.active_requests}"
                    f" received={len(self.received)} completed={self.completed}"
                    f" cancelled={self.cancelled}"
                )
            await asyncio.sleep(0.005)

    # -- serving ---------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.active_requests += 1
        self._request_count += 1
        request[REQUEST_ID_KEY] = f"req_fake{self._request_count:020d}"
        try:
            record = await _record(request)
            self.received.append(record)
            response = await self._next_reply(record).respond(request, record)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        except ConnectionError:
            # The client went away while we were writing: nothing more can reach it.
            self.cancelled += 1
            return web.Response(status=499)
        except Exception as exc:
            self.errors.append(exc)
            raise
        else:
            self.completed += 1
            return response
        finally:
            self.active_requests -= 1

    @staticmethod
    async def _add_provider_headers(request: web.Request, response: web.StreamResponse) -> None:
        request_id = request.get(REQUEST_ID_KEY)
        if request_id is not None:
            response.headers.setdefault("x-request-id", request_id)
        response.headers.setdefault("openai-processing-ms", "1")


async def _record(request: web.Request) -> Recorded:
    body = await request.read()
    return Recorded(
        method=request.method,
        path=request.path,
        query=request.query_string,
        headers=CIMultiDict(request.headers),
        body=body,
    )


def _bound_port(runner: web.AppRunner) -> int:
    for address in runner.addresses:
        if isinstance(address, tuple) and len(address) >= 2:
            return int(address[1])
    raise RuntimeError(f"FakeUpstream could not find its bound port in {runner.addresses!r}")
