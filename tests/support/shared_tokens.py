"""One set of loaded tokenizers and one model map for the whole test run.

A `TokenCounters` loads each encoding the first time a model needs it (the 200k BPE ranks of
o200k_base parsed and built: ~0.3-1 s), so every test that made its own paid that again. What a
counter returns depends only on the text and the encoding (its cache only saves time), and the
model map is read-only, so tests share these. Tests of loading or of the count cache itself build
their own `TokenCounters`.
"""

from __future__ import annotations

import functools

from proxy.tokens.catalog import ModelCatalog
from proxy.tokens.counters import TokenCounter, TokenCounters


@functools.cache
def shared_counters() -> TokenCounters:
    """The run's `TokenCounters` (each encoding loaded on its first use, then kept)."""
    return TokenCounters()


@functools.cache
def shared_catalog() -> ModelCatalog:
    """The run's model map (read on its first lookup, then kept)."""
    return ModelCatalog()


def counter_for(model: str, tokenizer: str = "auto") -> TokenCounter:
    """The shared counter of `model` (`TokenCounters.for_model`)."""
    return shared_counters().for_model(model, tokenizer)
