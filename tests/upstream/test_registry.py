"""`proxy.upstream`: the registry of upstream kinds and the start-up check of their names."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest

from proxy import cli
from proxy.formats import FORMATS
from proxy.settings import UpstreamSettings
from proxy.upstream import UPSTREAM_KINDS, unknown_upstream_kinds
from proxy.upstream.base import caches_at_marks
from proxy.upstream.http_upstream import HttpUpstream


def test_openai_is_the_default_kind() -> None:
    settings = UpstreamSettings(name="u", base_url="http://127.0.0.1:9")
    assert settings.kind == "openai"
    assert UPSTREAM_KINDS["openai"] is HttpUpstream
    assert unknown_upstream_kinds([settings]) == []


def test_anthropic_is_a_kind() -> None:
    settings = UpstreamSettings(name="c", kind="anthropic", base_url="https://api.anthropic.com")
    assert isinstance(UPSTREAM_KINDS["anthropic"](settings, None), HttpUpstream)  # type: ignore[arg-type]
    assert unknown_upstream_kinds([settings]) == []


def test_unknown_kinds_are_named_with_their_index() -> None:
    upstreams = [
        UpstreamSettings(name="a", base_url="http://127.0.0.1:9"),
        UpstreamSettings(name="b", kind="gemini", base_url="http://127.0.0.1:9"),
    ]
    assert unknown_upstream_kinds(upstreams) == [
        "upstreams.1.kind: unknown upstream kind 'gemini' (known: anthropic, litellm, openai)"
    ]


def test_serve_refuses_an_unknown_kind_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("upstreams:\n  - name: x\n    kind: nope\n    base_url: http://127.0.0.1:9\n")
    assert cli.main(["serve", "--config", str(config)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    known = "(known: anthropic, litellm, openai)"
    assert err == [f"{config}: upstreams.0.kind: unknown upstream kind 'nope' {known}"]


@pytest.mark.parametrize(
    ("kind", "native"),
    [("openai", "openai_chat"), ("anthropic", "anthropic_messages"), ("litellm", "openai_chat")],
)
async def test_every_kind_says_which_format_it_speaks_natively(kind: str, native: str) -> None:
    """The form of the proxy's own calls (a summarizer's): a format the registry knows, one that
    writes summarizer calls."""
    settings = UpstreamSettings(name="u", kind=kind, base_url="http://127.0.0.1:9")
    async with aiohttp.ClientSession() as session:
        upstream = UPSTREAM_KINDS[kind](settings, session)
        assert upstream.native_format == native
    form = FORMATS[native]
    assert form.summary_bodies("m", "i", "p", 10) and form.upstream_route


@pytest.mark.parametrize(
    ("kind", "provider", "caches"),
    [
        ("anthropic", None, True),
        ("litellm", "anthropic", True),  # litellm's Messages interface passes them on
        ("litellm", "gemini", False),
        ("litellm", None, False),
        ("openai", None, False),  # vLLM and llama.cpp serve Messages too: no breakpoints there
    ],
)
async def test_which_kinds_cache_at_breakpoints(
    kind: str, provider: str | None, caches: bool
) -> None:
    settings = UpstreamSettings(
        name="u", kind=kind, provider=provider, base_url="http://127.0.0.1:9"
    )
    async with aiohttp.ClientSession() as session:
        assert caches_at_marks(UPSTREAM_KINDS[kind](settings, session)) is caches
