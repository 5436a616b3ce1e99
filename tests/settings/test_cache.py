"""`settings.cache`: an upstream's prompt-cache lifetime, with per-model overrides."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from proxy.settings import ConfigError, Settings
from proxy.settings.cache import DEFAULT_TTL_SECONDS, PromptCacheSettings
from proxy.settings.loading import load_settings

UPSTREAM = {"name": "up", "base_url": "http://127.0.0.1:9/v1"}


@pytest.mark.parametrize("kind", ["openai", "anthropic", "litellm"])
def test_the_default_is_the_providers_five_minutes(kind: str) -> None:
    settings = Settings.model_validate({"upstreams": [{**UPSTREAM, "kind": kind}]})
    cache = settings.upstreams[0].prompt_cache
    assert DEFAULT_TTL_SECONDS == 300
    assert cache.ttl_for("gpt-4o") == 300
    assert cache.ttl_for("claude-sonnet-4-5") == 300


def test_a_model_glob_overrides_the_upstream_and_the_first_match_wins() -> None:
    cache = PromptCacheSettings.model_validate(
        {"ttl_seconds": 600, "models": {"CLAUDE-*-1h": 3600, "claude-*": 0, "local-*": None}}
    )
    assert cache.ttl_for("claude-opus-1h") == 3600  # case-insensitive, the first glob
    assert cache.ttl_for("claude-haiku") == 0
    assert cache.ttl_for("local-llama") is None
    assert cache.ttl_for("gpt-4o") == 600


def test_null_means_unknown() -> None:
    assert PromptCacheSettings.model_validate({"ttl_seconds": None}).ttl_for("m") is None


@pytest.mark.parametrize(
    ("cache", "problem"),
    [
        ({"ttl_seconds": -1}, "ttl_seconds"),
        ({"ttl_seconds": "5m"}, "ttl_seconds"),
        ({"models": {"gpt-*": -5}}, "models"),
        ({"ttl": 300}, "ttl"),
    ],
)
def test_mistakes_name_their_key(cache: dict[str, object], problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        Settings.model_validate({"upstreams": [{**UPSTREAM, "prompt_cache": cache}]})


def test_a_config_file_mistake_names_the_file_and_the_key(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "upstreams:\n  - {name: up, base_url: 'http://x/v1', prompt_cache: {ttl_seconds: -3}}\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_settings(path, {})
    assert str(path) in str(caught.value)
    assert "upstreams.0.prompt_cache.ttl_seconds" in str(caught.value)
