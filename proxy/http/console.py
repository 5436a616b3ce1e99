"""`/ui`: the operator console, static files shipped in the package (`proxy/http/ui/`).

The page itself needs no key: it holds no data. Its scripts ask the `/v1/context/*` routes for
everything they show, with the key the operator typed in, so each fetch is authenticated like any
API call. What those routes return is untrusted (stored conversations, tool results), so the
scripts build the page with `textContent` only, and every `/ui` answer carries a Content-Security-
Policy that runs no script but the console's own files and sends nothing anywhere but this origin.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from aiohttp import web

UI_DIR = Path(__file__).with_name("ui")
UI_ROUTE = "/ui"
INDEX = "index.html"
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
CONSOLE_HEADERS: Mapping[str, str] = MappingProxyType(
    {
        "Content-Security-Policy": CONTENT_SECURITY_POLICY,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        # small files that change with the package: always revalidated, never stale
        "Cache-Control": "no-cache",
    }
)
CONTENT_TYPES: Mapping[str, str] = MappingProxyType(
    {
        ".html": "text/html; charset=utf-8",
        ".css": "text/css; charset=utf-8",
        ".js": "text/javascript; charset=utf-8",
        ".svg": "image/svg+xml",
    }
)


def is_console_path(path: str) -> bool:
    """`/ui` and the files under it: served without a key."""
    return path == UI_ROUTE or path.startswith(f"{UI_ROUTE}/")


class ConsoleFiles:
    """The console's files by name, listed once when the routes are added: a request can only
    name one of them (no path is ever built from a request)."""

    def __init__(self, directory: Path = UI_DIR) -> None:
        self._files = {
            path.name: path
            for path in directory.iterdir()
            if path.is_file() and path.suffix in CONTENT_TYPES
        }
        if INDEX not in self._files:
            raise FileNotFoundError(f"{directory}: the console's {INDEX} is missing")

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self._files)

    async def page(self, request: web.Request) -> web.StreamResponse:
        """`GET /ui` and `/ui/`: the console's one page (its views are chosen by the URL's
        fragment, never sent here)."""
        return self._answer(INDEX)

    async def asset(self, request: web.Request) -> web.StreamResponse:
        """`GET /ui/{name}`: a script, the style sheet or an icon."""
        name = request.match_info["name"]
        if name not in self._files:
            raise web.HTTPNotFound()
        return self._answer(name)

    def _answer(self, name: str) -> web.FileResponse:
        path = self._files[name]
        headers = {**CONSOLE_HEADERS, "Content-Type": CONTENT_TYPES[path.suffix]}
        return web.FileResponse(path, headers=headers)


def add_console_routes(app: web.Application, files: ConsoleFiles | None = None) -> None:
    console = files or ConsoleFiles()
    app.router.add_get(UI_ROUTE, console.page)
    app.router.add_get(f"{UI_ROUTE}/", console.page)
    app.router.add_get(UI_ROUTE + "/{name}", console.asset)
