"""`proxy.tokens.backends`: a long text is counted a batch of chunks at a time where the backend
can, with the count it would have chunk by chunk."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from proxy.tokens.backends import (
    ANTHROPIC_TOKENIZER,
    BATCH_CHARS,
    CHUNK_CHARS,
    chunked,
    load_hf,
    tokenizer_dir,
)


def _text(chars: int) -> str:
    rng = random.Random(5)
    return "".join(rng.choice("ab cdé中😀\n{}\ud800") for _ in range(chars))  # a lone surrogate


@pytest.fixture(scope="module")
def claude() -> tuple[object, object]:
    return load_hf(tokenizer_dir() / ANTHROPIC_TOKENIZER)


def test_a_long_text_counts_the_same_in_batches(claude: tuple[object, object]) -> None:
    count, count_many = claude
    assert callable(count) and callable(count_many)
    text = _text(BATCH_CHARS + 3 * CHUNK_CHARS + 17)
    one_by_one = chunked(count)
    batched = chunked(count, count_many)
    assert batched(text) == one_by_one(text) > 0
    assert batched("short") == one_by_one("short")


def test_batches_are_asked_only_for_long_texts() -> None:
    batches: list[list[str]] = []

    def count_many(texts: list[str]) -> int:
        batches.append(texts)
        return sum(map(len, texts))

    count = chunked(len, count_many)
    assert count("x" * (BATCH_CHARS - 1)) == BATCH_CHARS - 1
    assert batches == []
    assert count("y" * (BATCH_CHARS + CHUNK_CHARS + 1)) == BATCH_CHARS + CHUNK_CHARS + 1
    assert [len(batch) for batch in batches] == [BATCH_CHARS // CHUNK_CHARS, 2]
    assert all(len(chunk) <= CHUNK_CHARS for batch in batches for chunk in batch)


def test_a_tokenizer_that_pads_batches_counts_one_text_at_a_time(tmp_path: Path) -> None:
    config = json.loads((tokenizer_dir() / ANTHROPIC_TOKENIZER).read_text())
    config["padding"] = {
        "strategy": "BatchLongest", "direction": "Right", "pad_to_multiple_of": None,
        "pad_id": 0, "pad_type_id": 0, "pad_token": "<pad>",
    }  # fmt: skip
    path = tmp_path / "padded.json"
    path.write_text(json.dumps(config))
    count, count_many = load_hf(path)
    assert count_many is None
    assert count("hello world") > 0
