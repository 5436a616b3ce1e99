"""`proxy.http.event_loop`: which loop `serve` runs on, and the check of a loop not installed."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import uvloop

from proxy.cli import main
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


def test_uvloop_required_but_not_installed_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr(event_loop, "uvloop_installed", lambda: False)
    assert event_loop_problem("uvloop") is not None
    config = tmp_path / "c.yaml"
    config.write_text("server: {port: 0, event_loop: uvloop}\n")
    assert main(["serve", "--config", str(config)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"{config}: server.event_loop: uvloop is not installed "
        "(pip install 'ctxproxy[uvloop]'), or choose auto"
    ]


def test_an_unknown_loop_names_the_key(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("server: {port: 0, event_loop: trio}\n")
    assert main(["serve", "--config", str(config)]) == 2
    assert "server.event_loop" in capsys.readouterr().err
