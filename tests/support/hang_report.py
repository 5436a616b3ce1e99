"""What a timed-out test was waiting for (pytest-timeout, `timeout_method = "thread"`).

pytest-timeout's own report is every thread's stack, and a test stuck in an event loop shows only
the loop idling in `select`. Before that report and the end of the process, this one names the
test and prints what each asyncio task of the running loops is awaiting, outermost first.
"""

from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import Iterator
from typing import Any

import pytest

_MAX_DEPTH = 80


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_timeout_set_timer(item: pytest.Item, settings: Any) -> bool | None:
    if settings.method != "thread":
        return None  # pytest-timeout's own timer
    timer = threading.Timer(settings.timeout, _report_then_end, args=(item, settings))
    timer.name = "hang_report timer"
    timer.daemon = True
    item.cancel_timeout = timer.cancel  # type: ignore[attr-defined]  # the plugin's cancel hook
    timer.start()
    return True


def _report_then_end(item: pytest.Item, settings: Any) -> None:
    import pytest_timeout

    capture = item.config.pluginmanager.getplugin("capturemanager")
    if capture is not None:  # to the terminal, not into the test's captured output
        capture.suspend_global_capture(item)
    writer = item.config.get_terminal_writer()
    try:
        writer.sep("+", title=f"Timeout after {settings.timeout} s: {item.nodeid}")
        for task in _running_tasks():
            writer.line(f"task {task.get_name()}:")
            for line in _awaiting(task.get_coro()):
                writer.line(f"    {line}")
    except Exception as exc:  # a report from another thread is best effort; the exit is not
        writer.line(f"(no asyncio report: {exc!r})")
    pytest_timeout.timeout_timer(item, settings)  # thread stacks, then os._exit(1)


def _running_tasks() -> Iterator[asyncio.Task[Any]]:
    for obj in gc.get_objects():
        if isinstance(obj, asyncio.AbstractEventLoop) and obj.is_running():
            yield from list(asyncio.all_tasks(obj))


def _awaiting(awaitable: Any) -> Iterator[str]:
    """The chain of coroutines a task is suspended in, and what the innermost one awaits."""
    for _ in range(_MAX_DEPTH):
        frame = getattr(awaitable, "cr_frame", None) or getattr(awaitable, "gi_frame", None)
        if frame is None:
            yield f"awaits {awaitable!r}"[:300]
            return
        yield f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}"
        awaitable = getattr(awaitable, "cr_await", None) or getattr(awaitable, "gi_yieldfrom", None)
