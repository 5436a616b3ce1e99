"""Pure builders of OpenAI chat-completion wire objects (no I/O), modelled on recorded streams.

Everything here is deterministic: the same arguments give the same dicts, so tests can build the
expected value with the same helper the fake used to produce it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

DEFAULT_MODEL = "gpt-4o-mini"
DEFAULT_ID = "chatcmpl-fake0000000000000000000001"
DEFAULT_CREATED = 1_727_346_178
SYSTEM_FINGERPRINT = "fp_5050236cbd"
ECHO_PREFIX = "echo: "

ToolCallSpec = Mapping[str, Any]
"""A tool call, either `{"name", "arguments", "id"?}` (arguments: str or JSON-able) or the full
OpenAI shape `{"id", "type": "function", "function": {"name", "arguments"}}`."""


def tool_call_id(index: int, name: str, arguments: str) -> str:
    """Deterministic, OpenAI-looking call id (`call_` + 24 characters)."""
    digest = hashlib.sha256(f"{index}:{name}:{arguments}".encode()).hexdigest()
    return "call_" + digest[:24]


def normalize_tool_call(index: int, spec: ToolCallSpec) -> dict[str, Any]:
    """Turn either accepted tool-call shape into the full OpenAI message shape."""
    function = spec.get("function")
    source: Mapping[str, Any] = function if isinstance(function, Mapping) else spec
    name = str(source["name"])
    raw_args = source.get("arguments", "")
    arguments = raw_args if isinstance(raw_args, str) else json.dumps(raw_args)
    call_id = spec.get("id") or tool_call_id(index, name, arguments)
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def make_usage(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    """A usage object shaped like OpenAI's (with the details sub-objects)."""
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }


def auto_usage(content: str, tool_calls: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Deterministic usage derived from the output size (about 4 characters per token)."""
    chars = len(content) + sum(len(json.dumps(tc)) for tc in tool_calls)
    return make_usage(prompt_tokens=10, completion_tokens=max(1, chars // 4))


def completion_body(
    content: str | None = "Hello from the fake upstream.",
    *,
    tool_calls: Sequence[ToolCallSpec] | None = None,
    usage: Mapping[str, Any] | None = None,
    model: str = DEFAULT_MODEL,
    id: str = DEFAULT_ID,
    created: int = DEFAULT_CREATED,
    finish_reason: str | None = None,
) -> dict[str, Any]:
    """A full non-streaming `chat.completion` object; usage=None derives one from the output."""
    calls = [normalize_tool_call(i, tc) for i, tc in enumerate(tool_calls or [])]
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "system_fingerprint": SYSTEM_FINGERPRINT,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": finish_reason or ("tool_calls" if calls else "stop"),
            }
        ],
        "usage": dict(usage) if usage is not None else auto_usage(content or "", calls),
    }


def _chunk(
    base: Mapping[str, Any], delta: dict[str, Any], finish_reason: str | None = None
) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
    return {**base, "choices": [choice]}


def _tool_call_deltas(calls: Sequence[dict[str, Any]], arg_chunk: int) -> list[dict[str, Any]]:
    """Per index: a first delta with id/type/name and empty arguments, then argument fragments."""
    deltas: list[dict[str, Any]] = []
    for index, call in enumerate(calls):
        fn = call["function"]
        head = {"name": fn["name"], "arguments": ""}
        deltas.append({"index": index, "id": call["id"], "type": "function", "function": head})
        args: str = fn["arguments"]
        for start in range(0, len(args), max(1, arg_chunk)):
            fragment = args[start : start + max(1, arg_chunk)]
            deltas.append({"index": index, "function": {"arguments": fragment}})
    return deltas


def stream_chunks(
    text_chunks: Sequence[str] = ("Hello", " from", " the", " fake", "."),
    *,
    tool_calls: Sequence[ToolCallSpec] | None = None,
    usage: Mapping[str, Any] | None = None,
    include_usage: bool = False,
    model: str = DEFAULT_MODEL,
    id: str = DEFAULT_ID,
    created: int = DEFAULT_CREATED,
    finish_reason: str | None = None,
    arg_chunk: int = 8,
) -> list[dict[str, Any]]:
    """The `chat.completion.chunk` sequence of one streamed answer (without `[DONE]`).

    Order follows the recorded provider stream: role delta (content null), content deltas,
    tool-call deltas, a separate finish_reason chunk with an empty delta, then (only with
    include_usage) a usage chunk whose `choices` is empty.
    """
    base = {
        "id": id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "system_fingerprint": SYSTEM_FINGERPRINT,
    }
    calls = [normalize_tool_call(i, tc) for i, tc in enumerate(tool_calls or [])]
    chunks = [_chunk(base, {"role": "assistant", "content": None if calls else ""})]
    chunks += [_chunk(base, {"content": text}) for text in text_chunks]
    chunks += [_chunk(base, {"tool_calls": [d]}) for d in _tool_call_deltas(calls, arg_chunk)]
    chunks.append(_chunk(base, {}, finish_reason or ("tool_calls" if calls else "stop")))
    if include_usage:
        final_usage = dict(usage) if usage is not None else auto_usage("".join(text_chunks), calls)
        chunks.append({**base, "choices": [], "usage": final_usage})
    return chunks


def openai_error(
    message: str, *, type: str, code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    """The OpenAI error envelope."""
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def default_error_body(status: int) -> dict[str, Any]:
    """A realistic provider error body for a status code."""
    if status == 429:
        return openai_error(
            "Rate limit reached for gpt-4o-mini in organization org-fake on tokens per min "
            "(TPM): Limit 200000, Used 200000, Requested 1000. Please try again in 1s.",
            type="tokens",
            code="rate_limit_exceeded",
        )
    if status == 401:
        return openai_error(
            "Incorrect API key provided.", type="invalid_request_error", code="invalid_api_key"
        )
    if status == 400:
        return openai_error("Invalid request.", type="invalid_request_error")
    if status == 404:
        return openai_error("Not found.", type="invalid_request_error", code="not_found")
    if status == 503:
        return openai_error(
            "The engine is currently overloaded, please try again later.", type="server_error"
        )
    return openai_error(
        "The server had an error while processing your request.", type="server_error"
    )


def models_list(created: int = 1_715_367_049) -> dict[str, Any]:
    """A realistic `GET /v1/models` answer."""
    ids = [
        "gpt-4o",
        "gpt-4o-2024-08-06",
        "gpt-4o-mini",
        "gpt-4.1",
        "o3-mini",
        "text-embedding-3-small",
    ]
    data = [{"id": mid, "object": "model", "created": created, "owned_by": "system"} for mid in ids]
    return {"object": "list", "data": data}


def _message_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict)]
        return "".join(p for p in parts if isinstance(p, str))
    return ""


def echo_text(request_body: Any) -> str:
    """`"echo: "` + the last user message's text (first 50 characters)."""
    messages = request_body.get("messages") if isinstance(request_body, dict) else None
    last = ""
    for message in messages if isinstance(messages, list) else []:
        if isinstance(message, dict) and message.get("role") == "user":
            last = _message_text(message.get("content"))
    return ECHO_PREFIX + last[:50]


def split_words(text: str) -> list[str]:
    """Split text into stream deltas that concatenate back to it (words keep their spaces)."""
    pieces: list[str] = []
    for word in text.split(" "):
        pieces.append(word if not pieces else " " + word)
    return [p for p in pieces if p]
