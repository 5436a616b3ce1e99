"""`proxy.http.console`: the console's static files, served without a key, with a strict
Content-Security-Policy; nothing but the listed files can be named."""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from fakes import FakeUpstream
from proxy_harness import RunningProxy, make_settings, start_proxy

from proxy.http.console import CONTENT_SECURITY_POLICY, UI_DIR, ConsoleFiles
from proxy.logs import ACCESS_LOGGER

KEYS = {
    "auth": {"mode": "keys"},
    "tenants": [{"name": "acme", "keys": ["sk-acme"], "policy": "default"}],
}


@pytest.fixture
async def proxy(fake_upstream: FakeUpstream) -> AsyncIterator[RunningProxy]:
    running = await start_proxy(make_settings(fake_upstream.base_url, **KEYS))
    yield running
    await running.stop()


async def fetch(proxy: RunningProxy, path: str) -> tuple[int, dict[str, str], bytes]:
    async with aiohttp.ClientSession() as session, session.get(proxy.url + path) as response:
        return response.status, dict(response.headers), await response.read()


@pytest.mark.parametrize("path", ["/ui", "/ui/"])
async def test_the_page_needs_no_key_and_carries_the_strict_headers(
    proxy: RunningProxy, path: str
) -> None:
    status, headers, body = await fetch(proxy, path)
    assert status == 200
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert headers["Content-Security-Policy"] == (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert body == (UI_DIR / "index.html").read_bytes()


async def test_every_file_the_page_names_is_served_with_its_type(proxy: RunningProxy) -> None:
    """The page's scripts, style sheet and icon, and every module they import."""
    _, _, page = await fetch(proxy, "/ui")
    named = set(re.findall(rb'(?:src|href)="/ui/([\w.-]+)"', page))
    for script in UI_DIR.glob("*.js"):
        named |= set(re.findall(rb'from "\./([\w.-]+)"', script.read_bytes()))
    assert {b"main.js", b"console.css", b"icon.svg", b"request.js"} <= named
    types = {".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}
    for name in sorted(n.decode() for n in named):
        status, headers, body = await fetch(proxy, f"/ui/{name}")
        assert status == 200, name
        assert headers["Content-Type"].split(";")[0] == types[Path(name).suffix], name
        assert headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert body == (UI_DIR / name).read_bytes()


@pytest.mark.parametrize(
    "path", ["/ui/nothing.js", "/ui/..%2Fconsole.py", "/ui/%2e%2e/console.py", "/ui/ui/main.js"]
)
async def test_only_the_console_files_can_be_named(proxy: RunningProxy, path: str) -> None:
    """A name outside the list is not found (a dot-dot path, which the client normalises to
    `/console.py` outside `/ui`, is refused for want of a key)."""
    status, headers, body = await fetch(proxy, path)
    assert status == (401 if "%2e" in path else 404)
    assert b"import" not in body and b"aiohttp" not in body
    assert headers["Content-Type"].startswith("application/json")


async def test_data_routes_still_need_a_key(proxy: RunningProxy) -> None:
    status, _, body = await fetch(proxy, "/v1/context/artifacts/art_" + "0" * 32)
    assert status == 401, body


async def test_no_script_in_the_console_writes_markup() -> None:
    """Stored content is untrusted: the scripts build elements and text nodes, never markup."""
    sinks = re.compile(
        r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function"
        r"|setAttribute\(.on"
    )
    for script in UI_DIR.glob("*.js"):
        assert not sinks.search(script.read_text()), script.name


def test_a_console_without_its_page_fails_at_start_up(tmp_path: Path) -> None:
    (tmp_path / "main.js").write_text("")
    with pytest.raises(FileNotFoundError, match=r"index\.html"):
        ConsoleFiles(tmp_path)
    (tmp_path / "index.html").write_text("")
    (tmp_path / "notes.txt").write_text("")
    assert ConsoleFiles(tmp_path).names == {"index.html", "main.js"}


async def test_the_console_files_are_logged_quietly_like_probes(
    proxy: RunningProxy, caplog: pytest.LogCaptureFixture
) -> None:
    """An open console fetches its files and polls the request list: DEBUG lines, not INFO."""
    caplog.set_level(logging.DEBUG, logger=ACCESS_LOGGER)
    for path in ("/ui", "/ui/main.js", "/ui/missing.js"):
        await fetch(proxy, path)
    records = [r for r in caplog.records if r.name == ACCESS_LOGGER]
    lines = [(r.levelno, r.getMessage().split()[2]) for r in records]
    assert lines == [
        (logging.DEBUG, "/ui"),
        (logging.DEBUG, "/ui/{name}"),
        (logging.INFO, "/ui/{name}"),  # a 404 is worth a line
    ]
