"""A fake upstream with a prompt cache: it answers chat completions, Responses and Messages
like `FakeUpstream`'s defaults (or as a script says) and reports the usage a provider would,
cached tokens included (`prompt_cache`: OpenAI's automatic prefix caching for the first two,
Anthropic's breakpoints for Messages; one token = 4 bytes of compact JSON).

async with CachingUpstream(clock=clock) as fake:
    client = anthropic.AsyncAnthropic(base_url=fake.origin, api_key="k")
    ...
    fake.reported   # every usage object it answered with, in order

The cache is keyed by the request's credential (`x-api-key` or `Authorization`) and model (and
a chat or Responses request's `prompt_cache_key`). Queued replies (`enqueue`) still come first
and report what they say; only the default answers consult the cache.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .anthropic import (
    COUNT_PATH,
    MESSAGES_PATH,
    anthropic_error,
    anthropic_message,
    anthropic_stream,
    last_user_text,
    text_block,
)
from .bodies import echo_text, split_words
from .defaults import CHAT_PATH, default_for
from .prompt_cache import (
    DEFAULT_TTL_S,
    AnthropicCache,
    CacheUsage,
    Clock,
    OpenAICache,
    TooManyBreakpoints,
    anthropic_blocks,
    block_bytes,
    chat_blocks,
    responses_blocks,
    tokens_of,
)
from .records import Recorded
from .replies import CompletionReply, JsonReply, Reply, StreamCompletionReply
from .responses import (
    ECHO_PREFIX,
    RESPONSES_PATH,
    message_item,
    response_json,
    response_stream,
)
from .responses import last_user_text as last_input_text
from .upstream import FakeUpstream

Script = Callable[[Recorded, dict[str, Any]], Any]
"""(the request, its body) -> the answer's content in the request's own format: Messages
content blocks, a chat message `{"content": ..., "tool_calls": [...]}` (the fake's tool call
specs), or Responses output items; None: the echo."""


class CachingUpstream(FakeUpstream):
    def __init__(
        self,
        *,
        clock: Clock = time.monotonic,
        ttl_s: float = DEFAULT_TTL_S,
        anthropic_min_tokens: int = 1024,
        script: Script | None = None,
        shutdown_timeout_s: float = 0.5,
    ) -> None:
        super().__init__(shutdown_timeout_s=shutdown_timeout_s, default=self._answer)
        self.openai_cache = OpenAICache(clock, ttl_s=ttl_s)
        self.anthropic_cache = AnthropicCache(clock, min_tokens=anthropic_min_tokens)
        self.script = script
        self.reported: list[dict[str, Any]] = []
        """The usage of every answer the cache priced, as sent, in order."""

    def _answer(self, record: Recorded) -> Reply:
        try:
            body = record.json()
        except ValueError:
            body = None
        if record.method != "POST" or not isinstance(body, dict):
            return default_for(record)
        if record.path == MESSAGES_PATH:
            return self._messages(record, body)
        if record.path == COUNT_PATH:
            counted = sum(tokens_of(block.data) for block in anthropic_blocks(body))
            return JsonReply({"input_tokens": counted})
        if record.path == CHAT_PATH:
            return self._chat(record, body)
        if record.path == RESPONSES_PATH:
            return self._responses(record, body)
        return default_for(record)

    def _scripted(self, record: Recorded, body: dict[str, Any]) -> Any:
        return None if self.script is None else self.script(record, body)

    def _messages(self, record: Recorded, body: dict[str, Any]) -> Reply:
        try:
            cached = self.anthropic_cache.request(_key(record, body), anthropic_blocks(body))
        except TooManyBreakpoints as exc:
            return anthropic_error(400, "invalid_request_error", str(exc))
        content = self._scripted(record, body)
        if content is None:
            content = [text_block(f"echo: {last_user_text(body)[:50]}")]
        usage = {
            "input_tokens": cached.input - cached.cache_read - cached.cache_write,
            "cache_creation_input_tokens": cached.cache_write,
            "cache_read_input_tokens": cached.cache_read,
            "output_tokens": tokens_of(block_bytes(content)),
        }
        self.reported.append(usage)
        model = _model(body, "claude-sonnet-4-5")
        if body.get("stream") is True:
            return anthropic_stream(content, model=model, usage_=usage)
        return anthropic_message(content, model=model, usage_=usage)

    def _chat(self, record: Recorded, body: dict[str, Any]) -> Reply:
        cached = self.openai_cache.request(_key(record, body), chat_blocks(body))
        message = self._scripted(record, body) or {"content": echo_text(body)}
        content, calls = message.get("content"), message.get("tool_calls")
        usage = _chat_usage(cached, tokens_of(block_bytes(message)))
        self.reported.append(usage)
        model = _model(body, "gpt-4o-mini")
        if record.is_stream:
            return StreamCompletionReply(split_words(content or ""), calls, usage, model=model)
        return CompletionReply(content, calls, usage, model=model)

    def _responses(self, record: Recorded, body: dict[str, Any]) -> Reply:
        cached = self.openai_cache.request(_key(record, body), responses_blocks(body))
        output = self._scripted(record, body)
        if output is None:
            output = [message_item(ECHO_PREFIX + last_input_text(body)[:50])]
        out = tokens_of(block_bytes(output))
        usage = {
            "input_tokens": cached.input,
            "input_tokens_details": {"cached_tokens": cached.cache_read},
            "output_tokens": out,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": cached.input + out,
        }
        self.reported.append(usage)
        model = _model(body, "gpt-5-fake")
        if record.is_stream:
            return response_stream(output, usage=usage, model=model)
        return response_json(output, usage=usage, model=model)


def _chat_usage(cached: CacheUsage, output: int) -> dict[str, Any]:
    return {
        "prompt_tokens": cached.input,
        "completion_tokens": output,
        "total_tokens": cached.input + output,
        "prompt_tokens_details": {"cached_tokens": cached.cache_read},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }


def _model(body: dict[str, Any], default: str) -> str:
    model = body.get("model")
    return model if isinstance(model, str) and model else default


def _key(record: Recorded, body: dict[str, Any]) -> str:
    credential = record.headers.get("x-api-key") or record.headers.get("Authorization") or ""
    extra = body.get("prompt_cache_key")
    return "\n".join([credential, _model(body, ""), extra if isinstance(extra, str) else ""])
