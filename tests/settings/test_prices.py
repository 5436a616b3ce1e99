"""`settings.prices`: the `prices:` overrides, strict like every setting."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from proxy.settings import Settings

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
