"""The event loop `ctxproxy serve` runs on (`server.event_loop`).

uvloop (libuv) runs the same asyncio code with less CPU per callback, socket read and timer than
asyncio's own loop; it is an optional extra, so `auto` uses it only when it is installed.
Measured side by side in bench/overhead (`ctxproxy-pass` and `ctxproxy-pass-asyncio`).
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Callable
from typing import Literal

EventLoopChoice = Literal["auto", "uvloop", "asyncio"]
LoopFactory = Callable[[], asyncio.AbstractEventLoop]


def uvloop_installed() -> bool:
    return importlib.util.find_spec("uvloop") is not None


def event_loop_problem(choice: EventLoopChoice) -> str | None:
    """Why `choice` cannot be served on this installation (None: it can)."""
    if choice == "uvloop" and not uvloop_installed():
        return "uvloop is not installed (pip install 'ctxproxy[uvloop]'), or choose auto"
    return None


def chosen_loop(choice: EventLoopChoice) -> Literal["uvloop", "asyncio"]:
    if choice == "auto":
        return "uvloop" if uvloop_installed() else "asyncio"
    return choice


def loop_factory(choice: EventLoopChoice) -> LoopFactory | None:
    """The factory of the chosen loop; None is asyncio's default."""
    if chosen_loop(choice) == "asyncio":
        return None
    import uvloop

    factory: LoopFactory = uvloop.new_event_loop
    return factory
