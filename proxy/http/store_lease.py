"""Every request holds a lease on the artifact store for its whole life (the streamed answer
included): what it stores, refreshes or reads is pinned, so no store limit evicts an artifact
that its prompt or its read tools still need (see `proxy.artifacts.leases`).

Entered by the edge middleware around the handler (not a middleware of its own: one coroutine
layer less on every request)."""

from __future__ import annotations

import contextlib

from aiohttp import web

from proxy.http.services import SERVICES


def store_lease(request: web.Request) -> contextlib.AbstractContextManager[None]:
    store = request.app[SERVICES].store
    if store is None:  # not started (never the case once the server listens)
        return contextlib.nullcontext()
    return store.lease()
