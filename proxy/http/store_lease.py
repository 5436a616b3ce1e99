"""Every request holds a lease on the artifact store for its whole life (the streamed answer
included): what it stores, refreshes or reads is pinned, so no store limit evicts an artifact
that its prompt or its read tools still need (see `proxy.artifacts.leases`)."""

from __future__ import annotations

from aiohttp import web
from aiohttp.typedefs import Handler

from proxy.http.services import SERVICES


@web.middleware
async def store_lease_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    store = request.app[SERVICES].store
    if store is None:  # not started (never the case once the server listens)
        return await handler(request)
    with store.lease():
        return await handler(request)
