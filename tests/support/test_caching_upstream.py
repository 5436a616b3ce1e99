"""`fakes.caching.CachingUpstream`: a real loopback server reporting a simulated prompt cache in
each format's usage, read back by the real SDKs."""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest
from fakes.anthropic import tool_use_block
from fakes.caching import CachingUpstream
from fakes.prompt_cache import anthropic_blocks, tokens_of

SYSTEM = "You are a careful agent. " * 300  # about 1,900 tokens of JSON


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def system_block() -> list[dict[str, Any]]:
    return [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]


async def test_anthropic_cache_reads_and_writes_in_json_and_streams() -> None:
    clock = Clock()
    async with (
        CachingUpstream(clock=clock) as fake,
        anthropic.AsyncAnthropic(base_url=fake.origin, api_key="k1", max_retries=0) as client,
    ):
        await cache_reads_and_writes(fake, client, clock)


async def cache_reads_and_writes(
    fake: CachingUpstream, client: anthropic.AsyncAnthropic, clock: Clock
) -> None:
    messages: Any = [{"role": "user", "content": "hello"}]
    first = await client.messages.create(
        model="claude-haiku-4-5", max_tokens=10, system=system_block(), messages=messages
    )
    written = first.usage.cache_creation_input_tokens
    assert written is not None and written > 1024 and first.usage.cache_read_input_tokens == 0
    async with client.messages.stream(
        model="claude-haiku-4-5", max_tokens=10, system=system_block(), messages=messages
    ) as stream:
        final = await stream.get_final_message()
    assert final.usage.cache_read_input_tokens == written
    assert final.usage.cache_creation_input_tokens == 0
    body = fake.last.json()
    total = sum(tokens_of(b.data) for b in anthropic_blocks(body))
    assert final.usage.input_tokens == total - written
    assert final.usage.output_tokens == fake.reported[-1]["output_tokens"]
    clock.now += 301
    late = await client.messages.create(
        model="claude-haiku-4-5", max_tokens=10, system=system_block(), messages=messages
    )
    assert late.usage.cache_read_input_tokens == 0  # expired after 5 minutes
    assert len(fake.reported) == 3


async def test_too_many_breakpoints_are_refused_like_anthropic() -> None:
    marked = {"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}
    async with (
        CachingUpstream() as fake,
        anthropic.AsyncAnthropic(base_url=fake.origin, api_key="k", max_retries=0) as client,
    ):
        with pytest.raises(anthropic.BadRequestError, match="maximum of 4 blocks"):
            await client.messages.create(
                model="claude-haiku-4-5",
                max_tokens=5,
                messages=[{"role": "user", "content": [marked] * 5}],  # type: ignore[list-item]
            )
        assert fake.reported == []


async def test_openai_chat_and_responses_report_cached_prefixes() -> None:
    messages: Any = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "a"}]
    async with (
        CachingUpstream() as fake,
        openai.AsyncOpenAI(base_url=fake.base_url, api_key="k", max_retries=0) as client,
    ):
        first = await client.chat.completions.create(model="gpt-4o", messages=messages)
        assert first.usage is not None and first.usage.prompt_tokens_details is not None
        assert first.usage.prompt_tokens_details.cached_tokens == 0
        stream = await client.chat.completions.create(
            model="gpt-4o",
            messages=[*messages, {"role": "user", "content": "b"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        usage = [chunk.usage async for chunk in stream if chunk.usage is not None]
        details = usage[0].prompt_tokens_details
        assert details is not None and details.cached_tokens
        assert details.cached_tokens >= 1024 and (details.cached_tokens - 1024) % 128 == 0
        once = await client.responses.create(model="gpt-4o", instructions=SYSTEM, input="a")
        again = await client.responses.create(model="gpt-4o", instructions=SYSTEM, input="b")
        assert once.usage is not None and again.usage is not None
        assert once.usage.input_tokens_details.cached_tokens == 0
        assert again.usage.input_tokens_details.cached_tokens >= 1024


async def test_a_script_chooses_the_content() -> None:
    def script(record: object, body: dict[str, Any]) -> list[dict[str, Any]]:
        return [tool_use_block("toolu_1", "run", {"n": len(body["messages"])})]

    async with (
        CachingUpstream(script=script) as fake,
        anthropic.AsyncAnthropic(base_url=fake.origin, api_key="k", max_retries=0) as client,
    ):
        answer = await client.messages.create(
            model="claude-haiku-4-5", max_tokens=5, messages=[{"role": "user", "content": "go"}]
        )
        assert answer.stop_reason == "tool_use"
        assert answer.content[0].type == "tool_use" and answer.content[0].input == {"n": 1}
