"""Serving the app: aiohttp's server with a deadline on request headers and JSON for its own errors.

aiohttp bounds nothing while a request's headers arrive: its keep-alive timer only closes a
connection idle *between* requests. A client sending one header line every few seconds held its
connection, and a file descriptor, for as long as it liked, and a few hundred such clients
exhausted the process's descriptors. `EdgeRequestHandler` closes a connection whose request
headers are not complete `header_timeout_s` after the connection opened or after the first byte
of a later request on it, answering 408 first. The body's time is bounded by the handlers
(`proxy.http.body.read_body`, `server.body_timeout_s`), which also undo its content coding:
aiohttp's own decompression is off here.

When aiohttp cannot parse a request (a malformed request line or header, a line too long) it
answers before any handler or middleware runs, in plain text that quotes the offending line, a
credential included. `EdgeRequestHandler.handle_error` answers those with the OpenAI error
envelope instead, naming only the kind of problem, and logs no request bytes either.
"""

from __future__ import annotations

import asyncio
import logging
import os
import resource
import signal
from collections.abc import Callable, MutableMapping
from typing import Any

from aiohttp import web
from aiohttp.web_request import BaseRequest

from proxy.errors import ErrorCode, error_envelope
from proxy.http.event_loop import loop_factory
from proxy.jsonio import dumps
from proxy.settings import ServerSettings
from proxy.workers.link import WorkerRole
from proxy.workers.listen import BACKLOG

log = logging.getLogger("ctxproxy.http")

KEEPALIVE_TIMEOUT_S = 75.0
"""An idle keep-alive connection is closed after this long (aiohttp's own timer)."""
SHUTDOWN_TIMEOUT_S = 60.0


def _raw_response(status: int, reason: str, code: ErrorCode, message: str) -> bytes:
    body = dumps(error_envelope(code, message))
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


class EdgeRequestHandler(web.RequestHandler):
    """aiohttp's connection protocol with a header deadline and JSON parse errors.

    The deadline is armed when the connection opens and when the first byte of a later request
    arrives while the connection waits for one; it is disarmed when a request starts (its
    headers are complete: `EdgeServer`'s request factory says so). Bytes arriving while a
    request runs (pipelining) arm nothing: aiohttp's keep-alive timer bounds that wait.
    """

    __slots__ = ("_header_deadline", "_header_timeout")

    def __init__(self, manager: web.Server, *, header_timeout: float, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._header_timeout = header_timeout
        self._header_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._arm_header_deadline()

    def data_received(self, data: bytes) -> None:
        if self._header_deadline is None and data and self._waiting_for_a_request():
            self._arm_header_deadline()
        super().data_received(data)

    def request_started(self) -> None:
        self._disarm_header_deadline()

    def connection_lost(self, exc: BaseException | None) -> None:
        self._disarm_header_deadline()
        super().connection_lost(exc)

    def _waiting_for_a_request(self) -> bool:
        # aiohttp's own test for an idle connection (RequestHandler._process_keepalive).
        waiter = self._waiter
        return waiter is not None and not waiter.done()

    def _arm_header_deadline(self) -> None:
        if self._header_timeout > 0:
            self._header_deadline = self._loop.call_later(
                self._header_timeout, self._headers_too_slow
            )

    def _disarm_header_deadline(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_too_slow(self) -> None:
        self._header_deadline = None
        if self.transport is None:
            return
        log.info("closed a connection whose request headers took over %gs", self._header_timeout)
        self.transport.write(
            _raw_response(
                408,
                "Request Timeout",
                ErrorCode.request_timeout,
                f"The request headers did not arrive within {self._header_timeout:g}s",
            )
        )
        self.force_close()

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        """aiohttp's answer to a request it could not parse or serve: JSON, nothing echoed."""
        kind = type(exc).__name__ if exc is not None else "error"
        if status < 500:
            log.info("malformed request from %s: %s", request.remote, kind)
            code, text = ErrorCode.invalid_request, f"Malformed HTTP request ({kind})"
        else:
            log.error("request from %s failed outside the app: %s", request.remote, kind)
            code, text = ErrorCode.internal_error, "Internal proxy error"
        if request.writer.output_size > 0:
            raise ConnectionError("a response was already sent; cannot send the error")
        response = web.Response(
            body=dumps(error_envelope(code, text)), status=status, content_type="application/json"
        )
        response.force_close()
        return response


class EdgeServer(web.Server):
    """aiohttp's protocol factory, building `EdgeRequestHandler`s and telling each one when a
    request starts."""

    def __init__(
        self,
        handler: Any,
        *,
        request_factory: Any,
        header_timeout: float,
        handler_cancellation: bool = False,
        loop: asyncio.AbstractEventLoop | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            handler,
            request_factory=self._start_request,
            handler_cancellation=handler_cancellation,
            loop=loop,
            **kwargs,
        )
        self._app_request_factory = request_factory
        self._handler_kwargs = kwargs
        self._header_timeout = header_timeout

    def __call__(self) -> EdgeRequestHandler:
        return EdgeRequestHandler(
            self, loop=self._loop, header_timeout=self._header_timeout, **self._handler_kwargs
        )

    def _start_request(self, message: Any, payload: Any, protocol: Any, *args: Any) -> Any:
        if isinstance(protocol, EdgeRequestHandler):
            protocol.request_started()
        return self._app_request_factory(message, payload, protocol, *args)


class EdgeRunner(web.AppRunner):
    """An `AppRunner` whose connections are `EdgeRequestHandler`s (no aiohttp access log: the
    edge middleware writes one line per request)."""

    def __init__(self, app: web.Application, limits: ServerSettings) -> None:
        self._handler_kwargs: dict[str, Any] = {
            "keepalive_timeout": KEEPALIVE_TIMEOUT_S,
            "access_log": None,
            # aiohttp would inflate a compressed body on the loop as it arrives, before any
            # authentication; bodies are decoded by the handlers that read them (`http.body`)
            "auto_decompress": False,
        }
        super().__init__(
            app,
            handler_cancellation=True,
            shutdown_timeout=SHUTDOWN_TIMEOUT_S,
            **self._handler_kwargs,
        )
        self._header_timeout = limits.header_timeout_s

    async def _make_server(self) -> web.Server:
        app_server = await super()._make_server()  # starts the app
        return EdgeServer(
            app_server.request_handler,
            request_factory=app_server.request_factory,
            handler_cancellation=app_server.handler_cancellation,
            loop=asyncio.get_running_loop(),
            header_timeout=self._header_timeout,
            **self._handler_kwargs,
        )


def run_app(
    app: web.Application,
    *,
    host: str,
    port: int,
    limits: ServerSettings,
    print: Callable[[str], None] = print,  # web.run_app names it so too
    worker: WorkerRole | None = None,
) -> None:
    """Serve `app` until SIGINT or SIGTERM, then shut down gracefully (like `web.run_app`).
    As a worker of `--workers N`: on the socket the supervisor handed over, telling it when
    serving, and stopping the same way when the supervisor is gone."""
    raise_open_files_limit()
    tokenizers_on_one_core()
    with asyncio.Runner(loop_factory=loop_factory(limits.event_loop)) as runner:
        runner.run(_serve(app, host, port, limits, print, worker))


async def _serve(
    app: web.Application,
    host: str,
    port: int,
    limits: ServerSettings,
    announce: Callable[[str], None],
    worker: WorkerRole | None,
) -> None:
    runner = EdgeRunner(app, limits)
    await runner.setup()
    loop = asyncio.get_running_loop()
    link = None if worker is None else worker.link()
    try:
        site: web.BaseSite
        if worker is None:
            site = web.TCPSite(runner, host, port)
        else:
            site = web.SockSite(runner, worker.listening_socket(), backlog=BACKLOG)
        await site.start()
        stop = asyncio.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        announce(f"http://{host}:{port}")
        if link is not None:
            loop.add_signal_handler(signal.SIGHUP, _ignored)  # the supervisor's to act on
            link.watch(loop, stop.set)
            link.ready()
        await stop.wait()
    finally:
        await runner.cleanup()
        if link is not None:
            link.close(loop)


def _ignored() -> None:
    log.info("SIGHUP ignored by a worker: send it to the supervisor, which restarts the workers")


def tokenizers_on_one_core(environ: MutableMapping[str, str] = os.environ) -> None:
    """HF `tokenizers` counts a batch on every core (rayon) unless `TOKENIZERS_PARALLELISM`
    says not to: a server counts many requests at once, and on a busy host those threads kept
    the event loop from a core (a `/healthz` probe waited up to 246 ms while an 8 MB Messages
    request was counted, 32 ms on one core; bench/hostile/RESULTS.md). An operator's own
    setting is kept."""
    environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def raise_open_files_limit() -> int:
    """Raise the soft limit on open files to the hard one (each connection holds one); returns
    the limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        wanted = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError):
            log.warning("could not raise the open files limit above %d", soft)
    return soft
