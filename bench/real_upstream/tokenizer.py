"""A Hugging Face tokenizer.json built from a GGUF file's own vocabulary and merges, so that
ctxproxy can count a llama.cpp model's tokens exactly (`counting.tokenizer: hf:<path>`), checked
against llama.cpp's tokenizer. Runs in bench/.llama-venv (needs `gguf` and `llama_cpp`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

_PRE_TOKENIZERS: dict[str, list[dict[str, Any]]] = {
    # llama.cpp's LLAMA_VOCAB_PRE_TYPE_SMOLLM: single digits, then the GPT-2 byte-level split.
    "smollm": [{"type": "Digits", "individual_digits": True}],
    "gpt2": [],
}


def export_tokenizer(gguf_path: str, out: str, texts: list[str]) -> int:
    from gguf import GGUFReader

    reader = GGUFReader(gguf_path)

    def strings(key: str) -> list[str]:
        f = reader.fields[key]
        return [bytes(f.parts[i]).decode("utf-8") for i in f.data]

    pre_field = reader.fields.get("tokenizer.ggml.pre")
    pre = bytes(pre_field.parts[pre_field.data[0]]).decode() if pre_field else "gpt2"
    model_field = reader.fields["tokenizer.ggml.model"]
    kind = bytes(model_field.parts[model_field.data[0]]).decode()
    if kind != "gpt2" or pre not in _PRE_TOKENIZERS:
        print(f"{gguf_path}: tokenizer {kind}/{pre} is not supported here", file=sys.stderr)
        return 1
    tokens, merges = strings("tokenizer.ggml.tokens"), strings("tokenizer.ggml.merges")
    types_field = reader.fields["tokenizer.ggml.token_type"]
    types = [int(types_field.parts[i][0]) for i in types_field.data]
    byte_level = {
        "type": "ByteLevel",
        "add_prefix_space": False,
        "trim_offsets": True,
        "use_regex": True,
    }
    tokenizer = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": i,
                "content": t,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
            for i, t in enumerate(tokens)
            if types[i] == 3  # CONTROL
        ],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [*_PRE_TOKENIZERS[pre], byte_level]},
        "post_processor": None,
        "decoder": byte_level,
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": {t: i for i, t in enumerate(tokens)},
            "merges": merges,
        },
    }
    Path(out).write_text(json.dumps(tokenizer, ensure_ascii=False))
    return check_tokenizer(gguf_path, out, texts)


def check_tokenizer(gguf_path: str, tokenizer_json: str, texts: list[str]) -> int:
    """Compare the exported tokenizer with llama.cpp's own on `texts`."""
    import llama_cpp
    from tokenizers import Tokenizer

    ours = Tokenizer.from_file(tokenizer_json)
    theirs = llama_cpp.Llama(model_path=gguf_path, vocab_only=True, verbose=False)
    same = 0
    for text in texts:
        a = ours.encode(text, add_special_tokens=False).ids
        b = theirs.tokenize(text.encode(), add_bos=False, special=False)
        same += a == list(b)
    print(
        f"exported tokenizer: {len(ours.get_vocab())} tokens; identical to llama.cpp's on "
        f"{same}/{len(texts)} texts",
        file=sys.stderr,
    )
    return 0 if same == len(texts) else 1
