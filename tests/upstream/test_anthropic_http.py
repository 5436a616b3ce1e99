"""`upstream.anthropic_http`: the HTTP upstream in Anthropic's style, against the fake server."""

from __future__ import annotations

import aiohttp
import pytest
from fakes.anthropic import fake_anthropic
from multidict import CIMultiDict

from proxy.settings import UpstreamSettings
from proxy.upstream.anthropic_http import ANTHROPIC_STYLE, DEFAULT_VERSION, api_root
from proxy.upstream.base import MESSAGES_ROUTE
from proxy.upstream.http_upstream import HttpUpstream


@pytest.mark.parametrize(
    "base",
    ["https://api.anthropic.com", "https://api.anthropic.com/", "https://api.anthropic.com/v1"],
)
def test_the_api_root_ends_with_v1_once(base: str) -> None:
    assert api_root(base) == "https://api.anthropic.com/v1"


async def test_a_completion_goes_to_v1_messages_with_its_bytes_and_headers() -> None:
    async with fake_anthropic() as fake, aiohttp.ClientSession() as session:
        settings = UpstreamSettings(name="claude", kind="anthropic", base_url=fake.origin)
        upstream = HttpUpstream(settings, session, ANTHROPIC_STYLE)
        assert upstream.settings.base_url == fake.origin and upstream.name == "claude"
        body = (
            b'{"model":"claude-haiku-4-5","max_tokens":5,'
            b'"messages":[{"role":"user","content":"hi"}]}'
        )
        headers = CIMultiDict({"x-api-key": "k", "anthropic-beta": "b1,b2"})
        answer = await upstream.send(headers=headers, body=body, route=MESSAGES_ROUTE)
        try:
            assert answer.status == 200
            assert b"echo: hi" in await answer.read()
        finally:
            answer.close()
        sent = fake.last
        assert (sent.path, sent.body) == ("/v1/messages", body)
        assert sent.headers["anthropic-version"] == DEFAULT_VERSION
        assert sent.headers["anthropic-beta"] == "b1,b2" and sent.headers["x-api-key"] == "k"
        assert "anthropic-version" not in headers  # the caller's headers are not changed
        own = CIMultiDict({"anthropic-version": "2099-01-01"})
        count = await upstream.open("POST", "messages/count_tokens", headers=own, body=body)
        count.close()
        assert fake.last.path == "/v1/messages/count_tokens"
        assert fake.last.headers["anthropic-version"] == "2099-01-01"
        chat = await upstream.send(headers=CIMultiDict(), body=b"{}")
        chat.close()
        assert fake.last.path == "/v1/chat/completions"  # Anthropic's OpenAI-compatible route
