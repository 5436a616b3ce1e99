"""`settings.prices`: the `prices:` overrides, strict like every setting."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from proxy.settings import ConfigError, Settings
from proxy.settings.loading import load_settings

REPO = Path(__file__).resolve().parents[2]

UPSTREAM = {"name": "up", "base_url": "http://127.0.0.1:9/v1"}


def test_price_overrides_load() -> None:
    settings = Settings.model_validate(
        {
            "upstreams": [UPSTREAM],
            "prices": [
                {"model": "gpt-*", "upstream": "up", "input_per_mtok": 1, "output_per_mtok": 2},
                {"model": "*", "input_per_mtok": 0, "output_per_mtok": 0,
                 "cache_read_per_mtok": 0, "cache_write_per_mtok": 0},
            ],
        }
    )  # fmt: skip
    assert [p.model for p in settings.prices] == ["gpt-*", "*"]
    assert settings.prices[0].cache_read_per_mtok is None
    assert Settings.model_validate({"upstreams": [UPSTREAM]}).prices == []


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ({"model": "x", "input_per_mtok": 1}, "output_per_mtok"),
        ({"model": "x", "input_per_mtok": -1, "output_per_mtok": 1}, "input_per_mtok"),
        ({"model": "x", "input_per_mtok": 1, "output_per_mtok": 1, "cache": 1}, "cache"),
        ({"model": "x", "upstream": "nope", "input_per_mtok": 1, "output_per_mtok": 1},
         "prices.0.upstream: unknown upstream 'nope'"),
    ],
)  # fmt: skip
def test_mistakes_name_their_key(entry: dict[str, object], problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        Settings.model_validate({"upstreams": [UPSTREAM], "prices": [entry]})


def test_the_examples_commented_prices_are_valid(tmp_path: Path) -> None:
    """config.example.yaml shows the overrides commented out: uncommented, they load."""
    text = (REPO / "config.example.yaml").read_text()
    block = text[text.index("# prices:\n") :]
    lines = [line[2:] for line in block.splitlines() if line.startswith("#")]
    path = tmp_path / "c.yaml"
    path.write_text(
        "upstreams: [{name: openai, base_url: 'http://x/v1'}, {name: local, base_url: 'http://y'}]\n"
        + "\n".join(lines)
        + "\n"
    )
    settings = load_settings(path, {})
    assert [p.model for p in settings.prices] == ["gpt-4o*", "*"]
    assert settings.prices[0].cache_write_per_mtok == 3.125


def test_a_misspelt_price_key_is_named(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "upstreams: [{name: a, base_url: 'http://x'}]\n"
        "prices: [{model: '*', input_per_mtok: 1, output_per_mtok: 1, cache_red_per_mtok: 1}]\n"
    )
    with pytest.raises(ConfigError, match=r"prices\.0\.cache_red_per_mtok: unknown key"):
        load_settings(path, {})
