"""A recording pass-through between a CLI and the proxy.

Every request is forwarded as it came (method, path and query, headers minus hop-by-hop ones,
body bytes) with one header added, `x-bench-seq: N`, which the proxy passes upstream so the
fake can tie its prepared body to this client request. The answer streams back chunk by chunk;
the recorder keeps the request (headers, body), the answer's status and headers, and the first
`MAX_KEPT_ANSWER` bytes of the answer body.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

from bench.agents.fake_common import SEQ_HEADER

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "expect",
    }
)
MAX_KEPT_ANSWER = 512 * 1024


@dataclass
class ClientRecord:
    seq: int
    cli: str
    turn: int
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    started: float
    status: int = 0
    response_headers: dict[str, str] = field(default_factory=dict)
    answer: bytes = b""
    seconds: float = 0.0
    error: str | None = None

    def json_body(self) -> Any:
        import json

        try:
            return json.loads(self.body) if self.body else None
        except ValueError:
            return None


class Recorder:
    def __init__(self, target: str, state: Any) -> None:
        """`target`: the proxy's base URL; `state`: the fake's `Script` (cli and turn)."""
        self.target = target.rstrip("/")
        self.state = state
        self.records: list[ClientRecord] = []
        self._seq = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.port = 0

    async def start(self, host: str = "127.0.0.1") -> str:
        timeout = aiohttp.ClientTimeout(total=None, sock_read=600)
        self._session = aiohttp.ClientSession(timeout=timeout, auto_decompress=False)
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, host, 0).start()
        self.port = int(self._runner.addresses[0][1])
        return f"http://{host}:{self.port}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        record = ClientRecord(
            seq=next(self._seq),
            cli=self.state.cli,
            turn=self.state.turn,
            method=request.method,
            path=request.path_qs,
            headers=dict(request.headers),
            body=body,
            started=time.monotonic(),
        )
        self.records.append(record)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        headers[SEQ_HEADER] = str(record.seq)
        assert self._session is not None
        try:
            async with self._session.request(
                request.method, self.target + request.path_qs, headers=headers, data=body
            ) as upstream:
                return await self._relay(request, upstream, record)
        except aiohttp.ClientError as exc:
            record.error = f"{type(exc).__name__}: {exc}"
            return web.json_response({"error": {"message": record.error}}, status=502)
        finally:
            record.seconds = time.monotonic() - record.started

    async def _relay(
        self, request: web.Request, upstream: aiohttp.ClientResponse, record: ClientRecord
    ) -> web.StreamResponse:
        record.status = upstream.status
        record.response_headers = dict(upstream.headers)
        out_headers = {k: v for k, v in upstream.headers.items() if k.lower() not in HOP_BY_HOP}
        response = web.StreamResponse(status=upstream.status, headers=out_headers)
        await response.prepare(request)
        kept = bytearray()
        async for chunk in upstream.content.iter_any():
            if len(kept) < MAX_KEPT_ANSWER:
                kept += chunk[: MAX_KEPT_ANSWER - len(kept)]
            await response.write(chunk)
        await response.write_eof()
        record.answer = bytes(kept)
        return response
