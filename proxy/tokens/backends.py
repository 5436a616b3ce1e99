"""Text counting backends: tiktoken's encodings and HF `tokenizers` files, counted chunk by chunk.

A text is counted as the sum of its `CHUNK_CHARS` chunks (tiktoken's BPE is superlinear in one
long piece; litellm chunks the same way). `tokenizers` holds the GIL for each `encode` (about
0.4 ms a chunk), so a long text counted chunk by chunk left the event loop waiting for a switch
interval at every turn; `encode_batch` releases the GIL for the whole batch (and spreads it over
the cores), so a text of `BATCH_CHARS` or more is counted a batch of chunks at a time, with the
same result. tiktoken releases the GIL in each call already.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
from collections.abc import Callable
from pathlib import Path

CHUNK_CHARS = 1024
BATCH_CHARS = 256 * CHUNK_CHARS
"""From this long a text goes to a backend's count of many chunks (when it has one)."""
ANTHROPIC_TOKENIZER = "anthropic_tokenizer.json"

Count = Callable[[str], int]
CountMany = Callable[[list[str]], int]

# Copied from tiktoken_ext.openai_public (tests check they still agree).
_O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
ENCODINGS = {  # name -> (file in litellm's tokenizer folder, its sha256, split pattern)
    "o200k_base": (
        "fb374d419588a4632f3f557e76b4b70aebbca790",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        _O200K_PATTERN,
    ),
    "cl100k_base": (
        "9b5ad71b2ce5302211f9c61530b329a4922fc6a4",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        _CL100K_PATTERN,
    ),
}


def tokenizer_dir() -> Path:
    """litellm's bundled tokenizer files, found without importing litellm."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        raise ValueError("litellm is not installed; its bundled tokenizer files are needed")
    return Path(next(iter(spec.submodule_search_locations))) / "litellm_core_utils" / "tokenizers"


def load_tiktoken(name: str, directory: Path) -> Count:
    import tiktoken

    file_name, sha256, pattern = ENCODINGS[name]
    data = (directory / file_name).read_bytes()
    if hashlib.sha256(data).hexdigest() != sha256:
        raise ValueError(f"{directory / file_name} is not the expected {name} file")
    ranks = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    # Special tokens are left out: prompts are counted as ordinary text, as litellm does.
    # tiktoken's Encoding keeps its own Python copy of the 200k ranks (~25 MB for o200k) beside
    # the Rust tables; counting needs only the Rust side, so build that alone when possible.
    try:
        from tiktoken import _tiktoken  # type: ignore[attr-defined]

        encode = _tiktoken.CoreBPE(ranks, {}, pattern).encode_ordinary
    except (ImportError, AttributeError, TypeError):
        encoding = tiktoken.Encoding(
            name, pat_str=pattern, mergeable_ranks=ranks, special_tokens={}
        )
        encode = encoding.encode_ordinary
    return lambda text: len(encode(text))


def check_hf_tokenizer_file(path: Path) -> None:
    """Raises ValueError unless `path` is a tokenizer.json that `tokenizers` loads."""
    if not path.is_file():
        raise ValueError(f"no tokenizer file at {str(path)!r}")
    load_hf(path)


def load_hf(path: Path) -> tuple[Count, CountMany | None]:
    """A `tokenizers` tokenizer's count of one text, and of many at once (None when the file
    pads batches: a padded batch would not count each text as it is)."""
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:
        raise ValueError(f"Cannot load tokenizer {str(path)!r}: {exc}") from exc

    def count(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False).ids)

    # without offsets where this version has it (~15% faster); the same ids
    batch = getattr(tokenizer, "encode_batch_fast", tokenizer.encode_batch)

    def count_many(texts: list[str]) -> int:
        return sum(len(one.ids) for one in batch(texts, add_special_tokens=False))

    return count, count_many if tokenizer.padding is None else None


def chunked(count: Count, count_many: CountMany | None = None) -> Count:
    """`count` over each `CHUNK_CHARS` of a text; a text of `BATCH_CHARS` or more goes to
    `count_many` a batch of chunks at a time when there is one."""

    def count_chunks(text: str) -> int:
        if len(text) <= CHUNK_CHARS:
            return count(text)
        if count_many is not None and len(text) >= BATCH_CHARS:
            return sum(count_many(_chunks(text, i, i + BATCH_CHARS)) for i in _starts(text))
        return sum(count(text[i : i + CHUNK_CHARS]) for i in range(0, len(text), CHUNK_CHARS))

    def count_text(text: str) -> int:
        try:
            return count_chunks(text)
        except (UnicodeError, TypeError):  # lone surrogates, which the stdlib JSON parser allows
            return count_chunks(text.encode("utf-8", "replace").decode())

    return count_text


def _starts(text: str) -> range:
    return range(0, len(text), BATCH_CHARS)


def _chunks(text: str, start: int, stop: int) -> list[str]:
    return [text[i : i + CHUNK_CHARS] for i in range(start, min(stop, len(text)), CHUNK_CHARS)]
