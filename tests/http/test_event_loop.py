"""`proxy.http.event_loop`: which loop `serve` runs on, and the check of a loop not installed."""

from __future__ import annotations

import asyncio

import pytest
import uvloop

from proxy.http import event_loop
from proxy.http.event_loop import chosen_loop, event_loop_problem, loop_factory


def test_auto_is_uvloop_when_installed_else_asyncio(monkeypatch: pytest.MonkeyPatch) -> None:
    assert chosen_loop("auto") == "uvloop"
    factory = loop_factory("auto")
    assert factory is not None
    loop = factory()
    try:
        assert isinstance(loop, uvloop.Loop)
    finally:
        loop.close()
    monkeypatch.setattr(event_loop, "uvloop_installed", lambda: False)
    assert chosen_loop("auto") == "asyncio"
    assert loop_factory("auto") is None
    assert event_loop_problem("auto") is None


def test_asyncio_is_asyncio_s_own_loop_even_with_uvloop_installed() -> None:
    assert chosen_loop("asyncio") == "asyncio"
    assert loop_factory("asyncio") is None
    with asyncio.Runner(loop_factory=loop_factory("asyncio")) as runner:
        assert not isinstance(runner.get_loop(), uvloop.Loop)
