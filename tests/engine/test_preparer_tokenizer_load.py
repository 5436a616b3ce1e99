"""A tokenizer is loaded on first use of its encoding, in a worker thread: never on the loop."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from pipeline_harness import make_harness

from proxy.tokens.counters import Counter, TokenCounters


class RecordingCounters(TokenCounters):
    """Real counters that note which thread built each one."""

    def __init__(self) -> None:
        super().__init__()
        self.built_on: dict[str, int] = {}

    def _build(self, method: str) -> Counter:
        self.built_on[method] = threading.get_ident()
        return super()._build(method)


@pytest.mark.parametrize("model", ["gpt-4o", "claude-sonnet-4-5"])
async def test_the_first_request_of_an_encoding_loads_it_off_the_loop(
    tmp_path: Path, model: str
) -> None:
    (tmp_path / "test.yaml").write_text("extends: default\n")
    counters = RecordingCounters()
    harness = make_harness(tmp_path, counters)
    body = {"model": model, "messages": [{"role": "user", "content": "hello"}]}
    assert not counters.loaded(model)
    prepared = await harness.prepare(body)
    assert prepared.manifest.tokens_before > 0
    assert counters.loaded(model)
    (method, thread), *others = counters.built_on.items()
    assert not others and thread != threading.get_ident()  # the loop runs on this thread
    await harness.prepare(body)  # loaded: nothing is built again
    assert list(counters.built_on) == [method]
