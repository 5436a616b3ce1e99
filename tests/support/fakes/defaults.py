"""The fake upstream's answers when nothing is queued."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from .bodies import (
    default_error_body,
    echo_text,
    models_list,
    openai_error,
    split_words,
)
from .records import Recorded
from .replies import CompletionReply, JsonReply, Reply, StreamCompletionReply
from .responses import RESPONSES_PATH, default_responses_reply

CHAT_PATH = "/v1/chat/completions"
MODELS_PATH = "/v1/models"


def default_chat_reply(record: Recorded) -> Reply:
    """A deterministic `"echo: <last user text[:50]>"` answer, streamed when the request streams."""
    try:
        body = record.json()
    except ValueError:
        error = openai_error(
            "We could not parse the JSON body of your request.", type="invalid_request_error"
        )
        return JsonReply(error, status=400)
    text = echo_text(body)
    if record.is_stream:
        return StreamCompletionReply(split_words(text))
    return CompletionReply(text)


def echo_request_body(record: Recorded) -> dict[str, object]:
    """The catch-all default: what was asked, without the body itself."""
    return {
        "object": "fake.echo",
        "method": record.method,
        "path": record.path,
        "query": record.query,
        "body_length": len(record.body),
    }


def default_for(record: Recorded) -> Reply:
    """Chat completions and responses echo, models list, other /v1 paths echo the request,
    else 404."""
    if record.path == CHAT_PATH and record.method == "POST":
        return default_chat_reply(record)
    if record.path == RESPONSES_PATH and record.method == "POST":
        return default_responses_reply(record)
    if record.path == MODELS_PATH and record.method == "GET":
        return JsonReply(models_list())
    if record.path.startswith("/v1/"):
        return JsonReply(echo_request_body(record))
    return JsonReply(default_error_body(404), status=404)


@dataclass(frozen=True)
class DefaultReply:
    """Answers like `default_for` would (usable as the `then` of a slow reply)."""

    async def respond(self, request: web.Request, record: Recorded) -> web.StreamResponse:
        return await default_for(record).respond(request, record)
