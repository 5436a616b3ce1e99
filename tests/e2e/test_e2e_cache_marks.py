"""Issue 27, item 5: breakpoints where they pay. The agent session of `agent_session` with a
client that places NO cache breakpoint (the real `anthropic` SDK) through the proxy against the
caching fake (Anthropic's breakpoint rules): under `cache_marks: auto` (the default) the proxy
places them and most of the input is read from the cache, and its cost headers equal the fake's
usage; under `keep` nothing is ever cached; an OpenAI-format request on an OpenAI upstream is
untouched."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import anthropic
import openai
import pytest
from agent_session import MODEL, ScriptedModel, Session, Turn, run_session
from fakes.caching import CachingUpstream
from proxy_harness import make_settings, start_proxy
from shared_tokens import shared_catalog

from proxy.completion.usage_headers import usd
from proxy.tokens.prices import PriceTable, price_of
from proxy.tokens.usage import TokenUsage

TURNS = 16
PRICES = PriceTable([], shared_catalog()).lookup("claude", MODEL)
TIMEOUTS = {"first_byte_s": 60, "idle_read_s": 60, "total_s": 120}


@asynccontextmanager
async def proxied(tmp_path: Path, policy: str, kind: str = "anthropic") -> AsyncIterator[
    tuple[CachingUpstream, str]
]:  # fmt: skip
    """The caching fake and a proxy's URL routing to it as an upstream of `kind`."""
    (tmp_path / "marks.yaml").write_text(policy)
    script = ScriptedModel() if kind == "anthropic" else None
    async with CachingUpstream(script=script) as fake:
        base = fake.origin if kind == "anthropic" else f"{fake.origin}/v1"
        upstream = {"name": "claude", "kind": kind, "base_url": base, "timeouts": TIMEOUTS}
        settings = make_settings(
            fake.origin,
            upstreams=[upstream],
            policies_dir=str(tmp_path),
            tenants=[{"name": "default", "policy": "marks"}],
        )
        proxy = await start_proxy(settings)
        try:
            yield fake, proxy.url
        finally:
            await proxy.stop()


async def unmarked_session(tmp_path: Path, policy: str, turns: int) -> Session:
    async with (
        proxied(tmp_path, policy) as (fake, url),
        anthropic.AsyncAnthropic(base_url=url, api_key="sk-agent", max_retries=0) as sdk,
    ):
        session = await run_session(sdk, fake, turns, marks=False)
        for record in fake.requests("/v1/messages"):
            assert json.dumps(record.json()).count("cache_control") <= 4
        return session


def usage_of(turn: Turn) -> TokenUsage:
    output = int(turn.reported["output_tokens"])
    return TokenUsage(turn.input, output, turn.cache_read, turn.cache_write)


async def test_a_client_without_breakpoints_gets_cached_under_auto(tmp_path: Path) -> None:
    assert PRICES is not None
    session = await unmarked_session(tmp_path, "extends: default\n", TURNS)
    assert len(session.turns) == TURNS
    for turn in session.turns:
        usage, headers = usage_of(turn), turn.headers
        assert int(headers["x-ctxproxy-input-tokens"]) == usage.input
        assert int(headers["x-ctxproxy-cached-tokens"]) == usage.cache_read
        assert int(headers["x-ctxproxy-cache-write-tokens"]) == usage.cache_write
        assert headers["x-ctxproxy-cost-usd"] == usd(price_of(usage, PRICES) or -1)
        if headers["x-ctxproxy-tokens-before"] == headers["x-ctxproxy-tokens-after"]:
            # as it came (no breakpoint) the request would have had nothing cached
            unchanged = price_of(TokenUsage(usage.input, usage.output, 0, 0), PRICES)
            assert headers["x-ctxproxy-cost-unchanged-usd"] == usd(unchanged or -1)
    assert session.turns[0].cache_write > 0  # the first request writes its marked prefix
    share = session.cached_share(after=3)
    print(f"auto: cached share after turn 3 {share:.1%}")
    assert share >= 0.70


async def test_keep_leaves_a_client_without_breakpoints_uncached(tmp_path: Path) -> None:
    session = await unmarked_session(tmp_path, "extends: default\ncache_marks: keep\n", 5)
    assert [t.cache_read for t in session.turns] == [0] * 5
    assert [t.cache_write for t in session.turns] == [0] * 5


async def test_the_dry_run_lists_the_breakpoints_and_prices_their_write(tmp_path: Path) -> None:
    body = {"model": MODEL, "max_tokens": 10, "system": "Be brief. " * 400,
            "messages": [{"role": "user", "content": "hello " * 50}]}  # fmt: skip
    async with (
        proxied(tmp_path, "extends: default\n") as (fake, url),
        aiohttp.ClientSession() as http,
        http.post(f"{url}/v1/context/prepare?format=anthropic_messages", json=body,
                  headers={"x-api-key": "sk-c"}) as response,  # fmt: skip
    ):
        answer = await response.json()
    assert answer["changed"] is True
    assert answer["body"]["system"][0]["cache_control"] == {"type": "ephemeral"}
    manifest = answer["manifest"]
    marks = manifest["cache_marks"]
    assert marks["mode"] == "auto"
    assert marks["placed"] == ["system[0]", "messages[0].content[0]"]
    estimate = manifest["cost_estimate"]
    assert estimate["cache_write_tokens"] == estimate["input_tokens"] > 1000
    assert PRICES is not None and PRICES.cache_write is not None
    expected = estimate["input_tokens"] * PRICES.cache_write
    assert estimate["input_usd"] == pytest.approx(expected)
    assert fake.requests("/v1/messages") == []


async def test_an_openai_request_on_an_openai_upstream_is_untouched(tmp_path: Path) -> None:
    async with (
        proxied(tmp_path, "extends: default\n", kind="openai") as (fake, url),
        openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="sk-o", max_retries=0) as client,
    ):
        messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
        await client.chat.completions.create(model="gpt-4o", messages=messages)  # type: ignore[arg-type]
        sent = fake.requests("/v1/chat/completions")[0].json()
    assert sent == {"model": "gpt-4o", "messages": messages}
