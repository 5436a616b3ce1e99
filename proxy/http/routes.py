"""The routes that speak a client format, by the name of the format that serves them: the edge
picks a route's handler, error envelope and metrics by this table, never by a format's module."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from aiohttp import web

from proxy.formats import FORMATS
from proxy.formats.base import ClientFormat

CHAT_ROUTE = "/v1/chat/completions"
MESSAGES_ROUTE = "/v1/messages"
COUNT_TOKENS_ROUTE = "/v1/messages/count_tokens"
RESPONSES_ROUTE = "/v1/responses"
DEFAULT_FORMAT = "openai_chat"
"""The format of every other route: the dry run's by default, passthrough routes', the edge's."""

COMPLETION_ROUTES: Mapping[str, str] = MappingProxyType(
    {
        CHAT_ROUTE: "openai_chat",
        MESSAGES_ROUTE: "anthropic_messages",
        RESPONSES_ROUTE: "openai_responses",
    }
)
"""Routes whose requests are completed upstream, by the format serving them: each is served by
`handlers.complete` (a new format's route is one line here), and their refusals are counted."""
REQUESTS_ROUTE = "/v1/context/requests"
REQUEST_ROUTE = "/v1/context/requests/{request_id}"
STATS_ROUTE = "/v1/context/stats"
POLICY_ROUTE = "/v1/context/policy"
OPERATOR_ROUTES = frozenset({REQUESTS_ROUTE, REQUEST_ROUTE, STATS_ROUTE, POLICY_ROUTE})
"""The routes an operator key (`auth.operator_keys`) may read: the records, across tenants."""
ROUTE_FORMATS: Mapping[str, str] = MappingProxyType(
    {**COMPLETION_ROUTES, COUNT_TOKENS_ROUTE: "anthropic_messages"}
)


def format_of(path: str) -> ClientFormat:
    """The format a route speaks (the default one for any other route)."""
    return FORMATS[ROUTE_FORMATS.get(path, DEFAULT_FORMAT)]


def route_of(request: web.Request) -> str:
    """The matched route's pattern (`/v1/{tail}`), never the raw path: low cardinality."""
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else "unmatched"
