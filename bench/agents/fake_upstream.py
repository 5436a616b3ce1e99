"""The scripted fake upstream: one loopback aiohttp server for both wire formats.

Routes: `POST /v1/messages` and `/v1/messages/count_tokens` (Anthropic), `POST /v1/responses`
(OpenAI Responses), `GET /v1/models` (an empty list), `GET`/`HEAD /` (200); anything else is
recorded and answered 404. Every request's body is recorded with the recorder's sequence number
(`x-bench-seq`, which the proxy forwards like any unknown header).
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from bench.agents import fake_anthropic, fake_responses
from bench.agents.fake_common import SEQ_HEADER, FakeLog, Script, UpstreamRecord

KEPT_HEADERS = ("anthropic-version", "anthropic-beta", "user-agent", "openai-beta", "originator")
CREDENTIALS = ("authorization", "x-api-key")
"""Recorded as present or not, never their values."""


class FakeUpstream:
    def __init__(self, script: Script) -> None:
        self.script = script
        self.log = FakeLog()
        self._runner: web.AppRunner | None = None
        self.port = 0

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/messages", self._messages)
        app.router.add_post("/v1/messages/count_tokens", self._count_tokens)
        app.router.add_post("/v1/responses", self._responses)
        app.router.add_get("/v1/models", self._models)
        app.router.add_route("*", "/{tail:.*}", self._other)
        return app

    async def start(self, host: str = "127.0.0.1") -> str:
        self._runner = web.AppRunner(self.app(), access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, host, 0).start()
        self.port = int(self._runner.addresses[0][1])
        return f"http://{host}:{self.port}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _read(self, request: web.Request) -> tuple[bytes, dict[str, Any]]:
        raw = await request.read()
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {"_unparsed": raw.decode("utf-8", "replace")[:2000]}
        return raw, body if isinstance(body, dict) else {"_value": body}

    def _record(self, request: web.Request, raw: bytes, body: dict[str, Any], answer: str) -> None:
        seq = request.headers.get(SEQ_HEADER)
        headers = {k: request.headers[k] for k in KEPT_HEADERS if k in request.headers}
        headers |= {k: "<present>" for k in CREDENTIALS if k in request.headers}
        self.log.records.append(
            UpstreamRecord(
                seq=int(seq) if seq and seq.isdigit() else None,
                path=request.path_qs,
                body=body,
                size=len(raw),
                cli=self.script.cli,
                turn=self.script.turn,
                answer=answer,
                headers=headers,
            )
        )

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        raw, body = await self._read(request)
        kind, response = await fake_anthropic.messages(request, body, raw, self.log, self.script)
        self._record(request, raw, body, kind)
        return response

    async def _count_tokens(self, request: web.Request) -> web.StreamResponse:
        raw, body = await self._read(request)
        self._record(request, raw, body, "count_tokens")
        return fake_anthropic.count_tokens(body)

    async def _responses(self, request: web.Request) -> web.StreamResponse:
        raw, body = await self._read(request)
        kind, response = await fake_responses.responses(request, body, self.log, self.script)
        self._record(request, raw, body, kind)
        return response

    async def _models(self, request: web.Request) -> web.StreamResponse:
        self._record(request, b"", {}, "other")
        return web.json_response({"object": "list", "data": [], "models": []})

    async def _other(self, request: web.Request) -> web.StreamResponse:
        raw, body = await self._read(request)
        self._record(request, raw, body, "other")
        if request.path == "/" and request.method in ("GET", "HEAD"):
            return web.Response(text="ok")
        return web.json_response({"error": {"type": "not_found", "message": "fake"}}, status=404)
