"""The floor: a minimal aiohttp forwarder with one pooled ClientSession (same stack as ctxproxy).

python bench/overhead/ref_forwarder.py --port 9101 --upstream http://127.0.0.1:9100
"""

import argparse

import aiohttp
from aiohttp import web

SESSION = web.AppKey("session", aiohttp.ClientSession)
UPSTREAM = web.AppKey("upstream", str)


async def forward(request: web.Request) -> web.StreamResponse:
    session = request.app[SESSION]
    headers = {"Content-Type": "application/json"}
    if "Authorization" in request.headers:
        headers["Authorization"] = request.headers["Authorization"]
    url = request.app[UPSTREAM] + request.path_qs
    async with session.request(
        request.method, url, data=await request.read(), headers=headers
    ) as upstream:
        kind = upstream.headers.get("Content-Type", "application/json")
        if not kind.startswith("text/event-stream"):
            return web.Response(
                body=await upstream.read(), status=upstream.status, headers={"Content-Type": kind}
            )
        response = web.StreamResponse(status=upstream.status, headers={"Content-Type": kind})
        await response.prepare(request)
        async for chunk in upstream.content.iter_any():
            await response.write(chunk)
        await response.write_eof()
        return response


async def session_ctx(app: web.Application):  # type: ignore[no-untyped-def]
    app[SESSION] = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=256))
    yield
    await app[SESSION].close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="minimal reference forwarder")
    parser.add_argument("--port", type=int, default=9101)
    parser.add_argument("--upstream", default="http://127.0.0.1:9100")
    args = parser.parse_args()
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app[UPSTREAM] = args.upstream.rstrip("/")
    app.cleanup_ctx.append(session_ctx)
    app.router.add_route("*", "/{tail:.*}", forward)
    web.run_app(app, host="127.0.0.1", port=args.port, access_log=None, print=None)
