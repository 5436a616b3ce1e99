"""End-to-end fixtures: the real proxy in front of the fake upstream."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from fakes import FakeUpstream
from proxy_harness import RunningProxy, make_settings, start_proxy


@pytest.fixture
async def proxy(fake_upstream: FakeUpstream) -> AsyncIterator[RunningProxy]:
    running = await start_proxy(make_settings(fake_upstream.base_url))
    yield running
    await running.stop()
