"""Hostile bodies through the real server: a typed 4xx or a correct forward, never a 500 or a hang.

Three proxies share one fake upstream: the repo's policies, a tiny window that forces reductions,
and the tiny window with `on_invalid: reject`. Every generated body is POSTed raw to both
`/v1/chat/completions` and `/v1/context/prepare` with a client timeout, then `/healthz` must answer.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from fakes import FakeUpstream
from hostile import encode, hostile_bodies, hostile_requests
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples
from pipeline_harness import agent_history, write_policy
from proxy_harness import RunningProxy, make_settings, start_proxy

from proxy.errors import ErrorCode
from proxy.formats.openai_chat.conversation import parse_conversation
from proxy.jsonio import loads

# growth_turns 0: cuts go to the target only, so the first tool result of a 12-turn history is
# offloaded in place rather than dropped (the lone-surrogate test reads it at its index).
TINY = """
budget: {context_window: 2500, reserved_output: 200, safety_margin: 0, growth_turns: 0}
steps:
  - {kind: offload_tool_results, threshold_chars: 300, preview_head_chars: 60,
     preview_tail_chars: 20}
  - {kind: clear_tool_results, keep_recent_exchanges: 0}
  - {kind: drop_turns, keep_recent_turns: 1}
"""
REJECT = TINY + "on_invalid: reject\nread_tool: {max_rounds: 0}\n"
JSON = {"Content-Type": "application/json"}
CLIENT_KEY = {"Authorization": "Bearer sk-hostile-client"}
"""Artifacts are read back in the scope of the key that stored them (anonymous is private)."""
TIMEOUT = aiohttp.ClientTimeout(total=30)
CODES = {code.name: code for code in ErrorCode}
MiB = 1024 * 1024


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes
    forwarded: bool
    upstream_failed: bool


@dataclass
class Servers:
    loop: asyncio.AbstractEventLoop
    fake: FakeUpstream
    proxies: dict[str, RunningProxy]
    session: aiohttp.ClientSession

    def run(self, coroutine: Any) -> Any:
        return self.loop.run_until_complete(coroutine)


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    loop = asyncio.new_event_loop()
    fake = FakeUpstream()
    loop.run_until_complete(fake.start())
    proxies: dict[str, RunningProxy] = {}
    for name, text in (("default", None), ("tiny", TINY), ("reject", REJECT)):
        overrides: dict[str, Any] = {}
        if text is not None:
            directory = tmp_path_factory.mktemp(name)
            write_policy(directory, text, name="default")
            overrides["policies_dir"] = str(directory)
        settings_ = make_settings(fake.base_url, **overrides)
        proxies[name] = loop.run_until_complete(start_proxy(settings_))
    session = loop.run_until_complete(_session())
    yield Servers(loop, fake, proxies, session)
    loop.run_until_complete(session.close())
    for running in proxies.values():
        loop.run_until_complete(running.stop())
    loop.run_until_complete(fake.stop())
    loop.close()


async def _session() -> aiohttp.ClientSession:
    return aiohttp.ClientSession(timeout=TIMEOUT)


async def post(servers: Servers, proxy: str, path: str, raw: bytes) -> Answer:
    fake = servers.fake
    received, errors = len(fake.received), len(fake.errors)
    url = f"{servers.proxies[proxy].base_url}{path}"
    async with servers.session.post(url, data=raw, headers=JSON) as response:
        body = await response.read()
        headers = dict(response.headers)
    return Answer(
        response.status, headers, body, len(fake.received) > received, len(fake.errors) > errors
    )


async def healthy(servers: Servers, proxy: str) -> bool:
    url = f"{servers.proxies[proxy].url}/healthz"
    async with servers.session.get(url) as response:
        return response.status == 200 and (await response.json())["status"] == "ok"


def assert_proxy_error(answer: Answer) -> str:
    """A typed error from the proxy itself: the OpenAI envelope, a known code, its status."""
    assert not answer.forwarded
    assert answer.headers.get("Content-Type", "").startswith("application/json")
    error = loads(answer.body)["error"]
    assert set(error) >= {"message", "type", "param", "code"}
    code = CODES[error["code"]]
    assert answer.status == code.status and error["type"] == code.error_type
    assert isinstance(error["message"], str) and error["message"]
    assert error["ctxproxy"]["request_id"] == answer.headers["x-ctxproxy-request-id"]
    return code.name


def assert_forwarded(raw: bytes, answer: Answer, sent: bytes) -> str:
    """The fake upstream's reply passed through, for the client's bytes or a sound rewrite."""
    if answer.headers.get("x-ctxproxy-actions", "none") == "none":
        assert sent == raw
    else:
        prepared = json.loads(sent)  # valid JSON even from lone surrogates or huge integers
        assert parse_conversation(prepared["messages"]).problems == ()
    if answer.headers.get("Content-Type", "").startswith("text/event-stream"):
        assert answer.body.rstrip().endswith(b"data: [DONE]")
        return "forwarded stream"
    assert loads(answer.body)["object"] == "chat.completion"
    return "forwarded"


def check_chat(servers: Servers, raw: bytes, answer: Answer) -> str:
    if answer.forwarded and answer.upstream_failed:
        # The fake itself choked (its stdlib parser recursing): its 500 passes through.
        assert answer.status == 500
        return "upstream failed"
    assert answer.status < 500, answer.body[:500]
    if answer.status == 200:
        return assert_forwarded(raw, answer, servers.fake.last.body)
    if answer.forwarded:  # the upstream's own 4xx, passed through
        assert "error" in loads(answer.body)
        return f"upstream {answer.status}"
    return assert_proxy_error(answer)


def check_prepare(raw: bytes, answer: Answer) -> str:
    assert not answer.forwarded  # the dry run never calls upstream
    assert answer.status < 500, answer.body[:500]
    if answer.status != 200:
        return assert_proxy_error(answer)
    payload = loads(answer.body)
    manifest = payload["manifest"]
    if payload["changed"]:
        assert parse_conversation(payload["body"]["messages"]).problems == ()
        assert manifest["tokens_after"] <= manifest["allowance"]
    else:
        assert payload["body"] == loads(raw)
    return f"prepared {manifest['outcome']}"


E2E = settings(
    max_examples=examples(150),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@E2E
@given(raw=hostile_bodies(), proxy=st.sampled_from(["default", "tiny", "reject"]))
def test_hostile_bodies_through_the_server(servers: Servers, raw: bytes, proxy: str) -> None:
    chat = servers.run(post(servers, proxy, "/chat/completions", raw))
    event(f"chat {proxy}: {check_chat(servers, raw, chat)}")
    dry = servers.run(post(servers, proxy, "/context/prepare", raw))
    event(f"prepare {proxy}: {check_prepare(raw, dry)}")
    assert servers.run(healthy(servers, proxy))


@settings(E2E, max_examples=examples(100))
@given(
    body=hostile_requests(allow_many=False),
    turns=st.integers(6, 14),
    proxy=st.sampled_from(["tiny", "reject"]),
)
def test_hostile_requests_that_must_be_reduced(
    servers: Servers, body: dict[str, Any], turns: int, proxy: str
) -> None:
    """The same mutations on top of a long history: the reducing and read-tool paths run."""
    if isinstance(body.get("messages"), list):
        body["messages"] = agent_history(turns, result_chars=1200) + body["messages"]
    raw = encode(body)
    chat = servers.run(post(servers, proxy, "/chat/completions", raw))
    event(f"chat {proxy}: {check_chat(servers, raw, chat)}")
    dry = servers.run(post(servers, proxy, "/context/prepare", raw))
    event(f"prepare {proxy}: {check_prepare(raw, dry)}")


# --- explicit cases -------------------------------------------------------------------------


@pytest.fixture
async def tiny_proxy(tmp_path: Path, fake_upstream: FakeUpstream) -> AsyncIterator[RunningProxy]:
    write_policy(tmp_path, TINY, name="default")
    running = await start_proxy(make_settings(fake_upstream.base_url, policies_dir=str(tmp_path)))
    yield running
    await running.stop()


async def send(url: str, raw: bytes, timeout: aiohttp.ClientTimeout = TIMEOUT) -> tuple[int, bytes]:
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.post(url, data=raw, headers={**JSON, **CLIENT_KEY}) as response,
    ):
        return response.status, await response.read()


def error_code(body: bytes) -> str:
    return str(loads(body)["error"]["code"])


@pytest.mark.parametrize("path", ["/chat/completions", "/context/prepare"])
@pytest.mark.parametrize("raw", [b"", b" ", b"\x00", b'{"model":"gpt-4o","messages":[]}\x00'])
async def test_empty_and_nul_only_bodies(
    proxy: RunningProxy, fake_upstream: FakeUpstream, path: str, raw: bytes
) -> None:
    status, body = await send(f"{proxy.base_url}{path}", raw)
    assert (status, error_code(body)) == (400, "invalid_json")
    assert fake_upstream.received == []


def big_request(total_bytes: int) -> bytes:
    """A valid agent conversation of about `total_bytes`, made of 1 MB tool results."""
    turns = total_bytes // (1 << 20) + 1
    messages: list[Any] = agent_history(turns, result_chars=64)
    for message in messages:
        if message["role"] == "tool":
            message["content"] = "0123456789abcdef\n" * ((1 << 20) // 17)
    return json.dumps({"model": "gpt-4o", "messages": messages}).encode()


async def test_a_50_mb_body_is_413_under_the_default_limit(
    proxy: RunningProxy, fake_upstream: FakeUpstream
) -> None:
    raw = big_request(50 * MiB)
    assert len(raw) > 50 * MiB > proxy.services.settings.server.max_body_bytes
    status, body = await send(f"{proxy.base_url}/chat/completions", raw)
    assert (status, error_code(body)) == (413, "request_too_large")
    assert fake_upstream.received == []


async def test_a_50_mb_valid_body_under_a_raised_limit_is_reduced(
    fake_upstream: FakeUpstream,
) -> None:
    settings_ = make_settings(fake_upstream.base_url, server={"max_body_bytes": 64 * MiB})
    running = await start_proxy(settings_)
    try:
        raw = big_request(50 * MiB)
        # a generous bound: this guards against a hang, not a speed target (see bench/)
        status, body = await send(
            f"{running.base_url}/chat/completions", raw, aiohttp.ClientTimeout(total=180)
        )
    finally:
        await running.stop()
    assert status == 200, body[:300]
    sent = json.loads(fake_upstream.last.body)
    assert len(fake_upstream.last.body) < 1 * MiB  # every 1 MB result went behind a preview
    assert parse_conversation(sent["messages"]).problems == ()


async def test_5000_messages(tiny_proxy: RunningProxy, fake_upstream: FakeUpstream) -> None:
    messages = agent_history(1250, result_chars=200)
    assert len(messages) >= 5000
    raw = json.dumps({"model": "gpt-4o", "messages": messages}).encode()
    status, body = await send(f"{tiny_proxy.base_url}/chat/completions", raw)  # TIMEOUT: a hang
    assert status == 200, body[:300]
    sent = json.loads(fake_upstream.last.body)["messages"]
    assert len(sent) < len(messages) and parse_conversation(sent).problems == ()
    assert sent[-1] == messages[-1] and sent[:2] == messages[:2]


@pytest.mark.parametrize("text", ["\ud800", "x\udfffy", "\udc00\ud800", "nul\x00"])
async def test_a_reduced_tool_result_with_lone_surrogates_or_nul(
    tiny_proxy: RunningProxy, fake_upstream: FakeUpstream, text: str
) -> None:
    messages = agent_history(12, result_chars=1200)
    original = text * (2000 // len(text))
    messages[3]["content"] = original  # the first tool result: offloaded behind a preview
    raw = encode({"model": "gpt-4o", "messages": messages})
    status, body = await send(f"{tiny_proxy.base_url}/chat/completions", raw)
    assert status == 200, body[:300]
    sent = json.loads(fake_upstream.last.body)
    assert sent["messages"][3]["content"].startswith("[ctxproxy")
    artifact_id = sent["messages"][3]["content"].split("artifact ", 1)[1].split(";", 1)[0]
    async with (
        aiohttp.ClientSession(timeout=TIMEOUT, headers=CLIENT_KEY) as session,
        session.get(f"{tiny_proxy.base_url}/context/artifacts/{artifact_id}") as response,
    ):
        assert response.status == 200
        page = json.loads(await response.read())
    # What the JSON text means: an escaped high+low surrogate pair is one character.
    meant = json.loads(json.dumps(original))
    assert page["content"] and page["content"] == meant[: len(page["content"])]
    status, body = await send(f"{tiny_proxy.base_url}/context/prepare", raw)
    assert status == 200 and json.loads(body)["body"]["messages"][4:] == sent["messages"][4:]


async def test_nul_characters_escaped_are_forwarded_raw_nul_bytes_are_refused(
    proxy: RunningProxy, fake_upstream: FakeUpstream
) -> None:
    escaped = b'{"model":"gpt-4o","messages":[{"role":"user","content":"a\\u0000b"}]}'
    status, _ = await send(f"{proxy.base_url}/chat/completions", escaped)
    assert status == 200 and fake_upstream.last.body == escaped
    raw_nul = escaped.replace(b"\\u0000", b"\x00")
    status, body = await send(f"{proxy.base_url}/chat/completions", raw_nul)
    assert (status, error_code(body)) == (400, "invalid_json")
    assert len(fake_upstream.received) == 1
