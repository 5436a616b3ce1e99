"""`GET /v1/context/requests[/{id}]`, `/v1/context/stats`, `/v1/context/policy`: the request
records of the caller's tenant (an operator key: every tenant's), read back.

A tenant key only ever reads its own tenant's records (its scope without session); a record of
another tenant reads as unknown (`record_not_found`). An operator key (`auth.operator_keys`)
reads all of them, `?tenant=` filtering.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from aiohttp import web

from proxy.artifacts.records import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    RecordQuery,
    RecordStore,
    UnknownRecord,
)
from proxy.artifacts.store import StoreUnavailable
from proxy.errors import ErrorCode, ProxyError
from proxy.http.auth import Tenant, session_digest
from proxy.http.routes import POLICY_ROUTE, REQUEST_ROUTE, REQUESTS_ROUTE, STATS_ROUTE
from proxy.http.services import SERVICES, TENANT
from proxy.jsonio import dumps
from proxy.policy.store import UnknownPolicy
from proxy.records.aggregate import aggregate
from proxy.records.build import readable

OUTCOMES = ("ok", "refused", "upstream_error", "error", "cancelled")
_REQUEST_ID = re.compile(r"[0-9a-f]{32}\Z")
_STATUS = re.compile(r"[1-5][0-9][0-9]\Z")


def _json(payload: Any) -> web.Response:
    return web.Response(body=dumps(payload), content_type="application/json")


def _records(request: web.Request) -> tuple[RecordStore, Sequence[str] | None]:
    """The record store and the scopes the caller may read (None: every scope)."""
    recorder = request.app[SERVICES].recorder
    if recorder is None:
        raise ProxyError(
            ErrorCode.not_found, "Request records are off (server.records.enabled: false)"
        )
    tenant: Tenant = request[TENANT]
    return recorder.store, None if tenant.operator else [tenant.owner_scope]


def _bad(name: str, why: str) -> ProxyError:
    return ProxyError(ErrorCode.invalid_request, f"'{name}' {why}", param=name)


def _limit(raw: str | None) -> int:
    if raw is None or raw == "":
        return DEFAULT_LIMIT
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 3 and 1 <= int(raw) <= MAX_LIMIT):
        raise _bad("limit", f"must be an integer from 1 to {MAX_LIMIT}")
    return int(raw)


def _query(request: web.Request) -> RecordQuery:
    q = request.query
    status = q.get("status") or None
    if status is not None and not _STATUS.match(status):
        raise _bad("status", "must be an HTTP status (100 to 599)")
    outcome = q.get("outcome") or None
    if outcome is not None and outcome not in OUTCOMES:
        raise _bad("outcome", f"must be one of {', '.join(OUTCOMES)}")
    session = q.get("session") or None
    before = q.get("before") or None
    if before is not None and not _REQUEST_ID.match(before):
        raise _bad("before", "must be a request id")
    return RecordQuery(
        status=None if status is None else int(status),
        outcome=outcome,
        model=q.get("model") or None,
        session=None if session is None else session_digest(session),
        tenant=q.get("tenant") or None,
        policy=q.get("policy") or None,
        limit=_limit(q.get("limit")),
        before=before,
    )


def _unavailable(exc: StoreUnavailable) -> ProxyError:
    return ProxyError(
        ErrorCode.artifact_store_unavailable, "The record store is temporarily unavailable"
    )


async def list_requests(request: web.Request) -> web.Response:
    """The newest records matching the query, a page at a time (`before`)."""
    store, scopes = _records(request)
    query = _query(request)
    try:
        page = await store.page(scopes, query)
    except UnknownRecord as exc:
        raise ProxyError(
            ErrorCode.record_not_found,
            f"No request record {query.before!r} to page from (unknown or expired)",
            param="before",
        ) from exc
    except StoreUnavailable as exc:
        raise _unavailable(exc) from exc
    return _json({"object": "list", "data": page.data, "has_more": page.has_more})


async def show_request(request: web.Request) -> web.Response:
    """One whole record."""
    store, scopes = _records(request)
    request_id = request.match_info["request_id"]
    record = None
    if _REQUEST_ID.match(request_id):
        try:
            record = await store.get(scopes, request_id)
        except StoreUnavailable as exc:
            raise _unavailable(exc) from exc
    if record is None:
        raise ProxyError(
            ErrorCode.record_not_found, f"No request record {request_id!r} (unknown or expired)"
        )
    return _json(readable(record))


async def request_stats(request: web.Request) -> web.Response:
    """The kept records summed up per tenant and policy."""
    store, scopes = _records(request)
    q = request.query
    query = RecordQuery(tenant=q.get("tenant") or None, policy=q.get("policy") or None)
    try:
        summaries = await store.summaries(scopes, query)
    except StoreUnavailable as exc:
        raise _unavailable(exc) from exc
    return _json(aggregate(summaries))


async def effective_policy(request: web.Request) -> web.Response:
    """The caller's policy as it applies to `?model=` (after `extends:` and `models:`); an
    operator names any with `?policy=`."""
    tenant: Tenant = request[TENANT]
    policies = request.app[SERVICES].policies
    if policies is None:
        raise ProxyError(ErrorCode.not_found, "Policies are not loaded")
    name = request.query.get("policy") or tenant.policy
    if name != tenant.policy and not tenant.operator:
        raise _bad("policy", "names another policy than the caller's (only an operator may)")
    model = request.query.get("model") or None
    try:
        policy = policies.resolve(name, model)
    except UnknownPolicy as exc:
        raise ProxyError(ErrorCode.not_found, f"Unknown policy {name!r}", param="policy") from exc
    return _json(
        {
            "object": "context.policy",
            "policy": name,
            "model": model,
            "effective": policy.model_dump(mode="json"),
        }
    )


def add_record_routes(app: web.Application) -> None:
    app.router.add_get(REQUESTS_ROUTE, list_requests)
    app.router.add_get(REQUEST_ROUTE, show_request)
    app.router.add_get(STATS_ROUTE, request_stats)
    app.router.add_get(POLICY_ROUTE, effective_policy)
