"""A real headless Chromium for the console's tests, driven by Playwright's async API on the
test's own event loop (the proxy under test runs on it too).

The system's Chromium (`/usr/bin/chromium`, Debian's package) is used: Playwright downloads no
browser here. Like Redis, a missing browser fails the tests instead of skipping them (`.ci/run`
installs it). Each page records the dialogs it opened, its uncaught errors and its console errors
(a Content-Security-Policy violation is one): a test asserts there were none.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from playwright.async_api import Browser, ConsoleMessage, Dialog, Error, Page, async_playwright

CHROMIUM = Path("/usr/bin/chromium")
TIMEOUT_MS = 60_000
"""Generous: a loaded machine must not fail a wait that would have succeeded."""
REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO / "docs" / "images"


@dataclass
class Watched:
    """A page and what it did that a safe console never does."""

    page: Page
    dialogs: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    failed_loads: list[str] = field(default_factory=list)
    """Answers with an error status (Chromium logs each as a console error): kept apart, a test
    that expects one (a record of another tenant) asserts it."""

    async def on_dialog(self, dialog: Dialog) -> None:
        self.dialogs.append(dialog.message)
        await dialog.dismiss()  # an open dialog would block the page

    def on_console(self, message: ConsoleMessage) -> None:
        if message.type != "error":
            return
        failed_load = message.text.startswith("Failed to load resource")
        (self.failed_loads if failed_load else self.errors).append(message.text)

    def on_error(self, error: Error) -> None:
        self.errors.append(f"uncaught: {error}")

    def quiet(self) -> None:
        """No dialog, no uncaught error, no console error (a CSP violation is one), no answer
        with an error status."""
        assert self.dialogs == [], self.dialogs
        assert self.errors == [], self.errors
        assert self.failed_loads == [], self.failed_loads


@contextlib.asynccontextmanager
async def chromium() -> AsyncIterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: the console's browser tests need Debian's chromium")
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=str(CHROMIUM))
        try:
            yield browser
        finally:
            await browser.close()


async def watched_page(browser: Browser, width: int = 1400, height: int = 900) -> Watched:
    page = await browser.new_page(viewport={"width": width, "height": height})
    page.set_default_timeout(TIMEOUT_MS)
    watched = Watched(page)
    page.on("dialog", watched.on_dialog)
    page.on("pageerror", watched.on_error)
    page.on("console", watched.on_console)
    return watched


def screenshots_wanted() -> bool:
    """`CTXPROXY_SCREENSHOTS=1`: the tests write the README's pictures of the console."""
    return os.environ.get("CTXPROXY_SCREENSHOTS") == "1"


async def screenshot(page: Page, name: str, *, below: str, max_height: int = 1100) -> None:
    """The page from its top to a little below the element `below` (at most `max_height` px)
    as `docs/images/<name>`, when screenshots are wanted."""
    if not screenshots_wanted():
        return
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    viewport = page.viewport_size
    assert viewport is not None
    box = await page.locator(below).bounding_box()
    assert box is not None, f"{below} is not shown"
    height = min(int(box["y"] + box["height"]) + 16, max_height)
    await page.set_viewport_size({"width": viewport["width"], "height": max(height, 200)})
    try:
        await page.screenshot(path=str(SCREENSHOTS / name))
    finally:
        await page.set_viewport_size(viewport)
