"""Model metadata from litellm's bundled map."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proxy.tokens.catalog import MEMO_ENTRIES, ModelCatalog, ModelInfo, bundled_map_path


@pytest.fixture(scope="module")
def catalog() -> ModelCatalog:
    return ModelCatalog()


def test_bundled_map_is_found() -> None:
    path = bundled_map_path()
    assert path is not None and path.is_file()


def test_known_models(catalog: ModelCatalog) -> None:
    info = catalog.lookup("gpt-4o")
    assert info is not None
    assert info.context_window == 128000
    assert info.max_output_tokens == 16384


@pytest.mark.parametrize(
    "model", ["openai/gpt-4o", "GPT-4o", "gpt-4o-2099-01-01", "someproxy/openai/gpt-4o"]
)
def test_prefixes_case_and_dates_fall_back_to_the_base_model(
    catalog: ModelCatalog, model: str
) -> None:
    assert catalog.lookup(model) == catalog.lookup("gpt-4o")


def test_exact_match_wins_over_fallbacks(tmp_path: Path) -> None:
    entries = {
        "azure/gpt-x": {"max_input_tokens": 1000, "max_output_tokens": 10},
        "gpt-x": {"max_input_tokens": 2000},
    }
    path = tmp_path / "map.json"
    path.write_text(json.dumps(entries))
    catalog = ModelCatalog(path)
    assert catalog.lookup("azure/gpt-x") == ModelInfo(1000, 10)
    assert catalog.lookup("openai/gpt-x") == ModelInfo(2000, None)


def test_window_falls_back_to_max_tokens_and_ignores_junk(tmp_path: Path) -> None:
    entries = {
        "only-max": {"max_tokens": 4096},
        "junk": {"max_input_tokens": "lots", "max_tokens": True},
        "not-a-dict": 5,
    }
    path = tmp_path / "map.json"
    path.write_text(json.dumps(entries))
    catalog = ModelCatalog(path)
    assert catalog.lookup("only-max") == ModelInfo(4096, None)
    assert catalog.lookup("junk") is None
    assert catalog.lookup("not-a-dict") is None


def test_unknown_models(catalog: ModelCatalog) -> None:
    assert catalog.lookup("definitely-not-a-model-xyz") is None
    assert catalog.lookup("") is None


def test_map_is_read_once_and_lazily(tmp_path: Path) -> None:
    path = tmp_path / "map.json"
    catalog = ModelCatalog(path)  # file does not exist yet: constructing must not read it
    path.write_text(json.dumps({"m": {"max_input_tokens": 10}}))
    assert catalog.lookup("m") == ModelInfo(10, None)
    path.write_text(json.dumps({"m": {"max_input_tokens": 20}}))
    assert catalog.lookup("m") == ModelInfo(10, None)


def test_load_reads_the_map_once_and_loaded_says_so(tmp_path: Path) -> None:
    path = tmp_path / "map.json"
    path.write_text(json.dumps({"m": {"max_input_tokens": 10}}))
    catalog = ModelCatalog(path)
    assert not catalog.loaded()
    catalog.load()
    assert catalog.loaded()
    path.write_text(json.dumps({"m": {"max_input_tokens": 20}}))
    catalog.load()
    assert catalog.lookup("m") == ModelInfo(10, None)


def test_lookups_are_remembered_within_a_bound(tmp_path: Path) -> None:
    path = tmp_path / "map.json"
    path.write_text(json.dumps({"m-2024-01-01": {"max_input_tokens": 10}}))
    catalog = ModelCatalog(path)
    for n in range(MEMO_ENTRIES * 3):  # any name a client sends: memory must stay bounded
        assert catalog.lookup(f"unknown-{n}") is None
        assert len(catalog._found) <= MEMO_ENTRIES
    assert catalog.lookup("m-2024-01-01") == ModelInfo(10, None)
    assert catalog.lookup("m-2024-01-01") == ModelInfo(10, None)  # from the memo
    assert catalog.lookup("M-2024-01-01") == ModelInfo(10, None)
