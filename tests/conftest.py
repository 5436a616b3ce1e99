"""Shared fixtures: the fake upstream and the recorded provider wire data."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
from fakes import FakeUpstream
from fakes.wire import PARALLEL_TOOL_CALLS_SSE, wire_file
from hang_report import pytest_timeout_set_timer  # noqa: F401  (a hook: names a test that hangs)
from hypothesis_profiles import load_profile
from redis_cluster import LocalCluster, require_cluster_binaries

# CI runs the property tests on a fixed sequence of examples (reproducible red or green);
# developers' runs explore new random examples every time; `HYPOTHESIS_PROFILE=nightly` draws
# each test's full count (tests/support/hypothesis_profiles.py).
load_profile()


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """A plain event loop for synchronous hypothesis tests that drive async code."""
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture
def wire_path() -> Callable[[str], Path]:
    """Resolves a recorded wire file by name (shared copy preferred, vendored fallback)."""
    return wire_file


@pytest.fixture
def parallel_tool_calls_sse() -> Path:
    """The recorded gpt-4o stream with two parallel tool calls, `finish_reason` and usage chunks."""
    return wire_file(PARALLEL_TOOL_CALLS_SSE)


@pytest.fixture
async def fake_upstream() -> AsyncIterator[FakeUpstream]:
    """A started FakeUpstream, stopped (running handlers cancelled) after the test."""
    async with FakeUpstream() as fake:
        yield fake


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under mutmut (bench/mutation/run.sh), the quickest tests first: a mutant's run stops at its
    first failure (`-x`), so most mutants are then killed in a second instead of after the slow
    property and end-to-end tests. mutmut forks each mutant's run from its own process, which
    holds every test's duration from its first, clean run.

    `MUTATION_QUICK_PASS=S` (the quick pass of bench/mutation/run.sh) leaves out the tests that
    took longer than S seconds (the quickest one stays when all did); bench/mutation/slow.py runs
    them on the quick pass's survivors."""
    if not os.environ.get("MUTANT_UNDER_TEST"):
        return
    try:
        from mutmut.state import state
    except ImportError:
        return
    durations = state().duration_by_test
    items.sort(key=lambda item: durations.get(item.nodeid, 0.0))
    limit = os.environ.get("MUTATION_QUICK_PASS")
    if limit is None or "__mutmut_" not in os.environ["MUTANT_UNDER_TEST"] or not items:
        return  # mutmut's listing and timing runs ("list_all_tests", "stats") see every test
    slow = [item for item in items[1:] if durations.get(item.nodeid, 0.0) > float(limit)]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = items[: len(items) - len(slow)]


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[LocalCluster]:
    """A private Redis Cluster (3 masters + 3 replicas) shared by the tests that only read and
    write it (each under its own key prefix); a test that kills a node starts its own. FAILS
    when redis-server or redis-cli is missing."""
    cluster = LocalCluster(*require_cluster_binaries())
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.cleanup()
