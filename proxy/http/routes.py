"""The routes that speak a client format, by the name of the format that serves them: the edge
picks a route's handler, error envelope and metrics by this table, never by a format's module."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from proxy.formats import FORMATS
from proxy.formats.base import ClientFormat

CHAT_ROUTE = "/v1/chat/completions"
MESSAGES_ROUTE = "/v1/messages"
COUNT_TOKENS_ROUTE = "/v1/messages/count_tokens"
RESPONSES_ROUTE = "/v1/responses"
DEFAULT_FORMAT = "openai_chat"
"""The format of every other route: the dry run's by default, passthrough routes', the edge's."""

ROUTE_FORMATS: Mapping[str, str] = MappingProxyType(
    {
        CHAT_ROUTE: "openai_chat",
        MESSAGES_ROUTE: "anthropic_messages",
        COUNT_TOKENS_ROUTE: "anthropic_messages",
        RESPONSES_ROUTE: "openai_responses",
    }
)
COMPLETION_ROUTES = frozenset({CHAT_ROUTE, MESSAGES_ROUTE, RESPONSES_ROUTE})
"""Routes whose requests are completed upstream (their refusals are counted)."""


def format_of(path: str) -> ClientFormat:
    """The format a route speaks (the default one for any other route)."""
    return FORMATS[ROUTE_FORMATS.get(path, DEFAULT_FORMAT)]
