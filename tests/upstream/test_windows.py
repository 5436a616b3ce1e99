"""Windows learned from upstreams: vLLM and llama.cpp listings, errors, caching, failing soft."""

from __future__ import annotations

import asyncio
from typing import Any

from multidict import CIMultiDict
from upstream_double import Answer, UpstreamDouble, broken, json_answer

from proxy.upstream.base import CallTimer, UpstreamResponse
from proxy.upstream.windows import MAX_PROBE_BYTES, KnownWindow, ModelWindows

VLLM = {
    "object": "list",
    "data": [
        {"id": "other", "object": "model", "max_model_len": 999},
        {"id": "qwen", "object": "model", "max_model_len": 32768},
    ],
}
LLAMA_PROPS = {"default_generation_settings": {"n_ctx": 4096}, "total_slots": 1}
NOT_FOUND = json_answer({"error": {"message": "not found"}}, status=404)
HEADERS = CIMultiDict({"Authorization": "Bearer k", "Content-Type": "application/json"})
HANG_S = 30.0


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def ask(windows: ModelWindows, upstream: Any, model: str) -> KnownWindow | None:
    return await windows.for_request(upstream, HEADERS).window(model, ask=True)


async def test_vllm_listing_gives_max_model_len() -> None:
    upstream = UpstreamDouble(json_answer(VLLM), NOT_FOUND)
    windows = ModelWindows()
    assert await ask(windows, upstream, "qwen") == KnownWindow(32768, stated=False)
    listing, props = upstream.calls
    assert (listing.method, listing.path, listing.at_root) == ("GET", "/models", False)
    assert (props.method, props.path, props.at_root) == ("GET", "/props", True)
    assert listing.headers["Authorization"] == "Bearer k" and "Content-Type" not in listing.headers
    assert await ask(windows, upstream, "qwen") == KnownWindow(32768, stated=False)
    assert await ask(windows, upstream, "other") == KnownWindow(999, stated=False)
    assert await ask(windows, upstream, "made-up-by-a-client") is None
    assert len(upstream.calls) == 2  # one listing per upstream, remembered


async def test_llama_cpp_props_at_the_server_root_give_n_ctx() -> None:
    upstream = UpstreamDouble(json_answer({"data": [{"id": "x.gguf"}]}), json_answer(LLAMA_PROPS))
    windows = ModelWindows()
    assert await ask(windows, upstream, "local") == KnownWindow(4096, stated=False)
    assert await ask(windows, upstream, "any-name") == KnownWindow(4096, stated=False)
    assert [(c.path, c.at_root) for c in upstream.calls] == [("/models", False), ("/props", True)]
    older = UpstreamDouble(NOT_FOUND, json_answer({"n_ctx": 2048}))
    assert await ask(ModelWindows(), older, "local") == KnownWindow(2048, stated=False)


async def test_nothing_learned_is_remembered_until_the_ttl_passes() -> None:
    clock = Clock()
    windows = ModelWindows(ttl_s=60, clock=clock)
    upstream = UpstreamDouble(
        NOT_FOUND, Answer(200, body=b"not json"), broken(), broken(), json_answer(VLLM), NOT_FOUND
    )
    assert await ask(windows, upstream, "qwen") is None
    clock.now = 59
    assert await ask(windows, upstream, "qwen") is None
    assert len(upstream.calls) == 2  # no new probe within the TTL
    clock.now = 61
    assert await ask(windows, upstream, "qwen") is None  # an unreachable upstream: still None
    clock.now = 122
    assert await ask(windows, upstream, "qwen") == KnownWindow(32768, stated=False)


class SlowUpstream(UpstreamDouble):
    """Answers after `delay` seconds (a stuck upstream when large)."""

    def __init__(self, delay: float, *script: Any) -> None:
        super().__init__(*script)
        self.delay = delay

    async def open(
        self,
        method: str,
        path: str,
        *,
        headers: CIMultiDict[str],
        body: bytes | None,
        query: str = "",
        timer: CallTimer | None = None,
        at_root: bool = False,
    ) -> UpstreamResponse:
        await asyncio.sleep(self.delay)
        return await super().open(
            method, path, headers=headers, body=body, query=query, timer=timer, at_root=at_root
        )


class StuckUpstream(UpstreamDouble):
    """Never answers: each call waits until it is cancelled."""

    def __init__(self) -> None:
        super().__init__()
        self.cancelled: list[str] = []

    async def open(self, method: str, path: str, **_: Any) -> UpstreamResponse:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.append(path)
            raise
        raise AssertionError("unreachable")


async def test_a_stuck_upstream_holds_a_request_only_for_the_probe_timeout() -> None:
    windows = ModelWindows(probe_timeout_s=0.05)
    upstream = StuckUpstream()
    # The upstream never answers: only the probe's own timeout can end the request (HANG_S
    # merely bounds a broken one).
    assert await asyncio.wait_for(ask(windows, upstream, "qwen"), HANG_S) is None
    assert upstream.cancelled == ["/models"]  # one timeout for both calls: props never asked


async def test_concurrent_requests_share_one_probe() -> None:
    windows = ModelWindows()
    upstream = SlowUpstream(0.05, json_answer(VLLM), NOT_FOUND)
    found = await asyncio.gather(*(ask(windows, upstream, "qwen") for _ in range(5)))
    assert found == [KnownWindow(32768, stated=False)] * 5
    assert len(upstream.calls) == 2 and windows.probes == 1


async def test_a_stated_window_wins_and_entries_are_bounded() -> None:
    windows = ModelWindows(max_entries=2)
    upstream = UpstreamDouble(json_answer(VLLM), NOT_FOUND)
    await ask(windows, upstream, "qwen")
    windows.record_stated("fake", "qwen", 16000)
    assert windows.known("fake", "qwen") == KnownWindow(16000, stated=True)
    windows.record_stated("fake", "a", 1)
    windows.record_stated("fake", "b", 2)  # "qwen" is the least recently used: out
    assert windows.known("fake", "qwen") == KnownWindow(32768, stated=False)  # listed again
    assert windows.known("fake", "b") == KnownWindow(2, stated=True)
    assert windows.known("other-upstream", "b") is None


async def test_without_asking_only_what_is_known_is_told() -> None:
    upstream = UpstreamDouble()  # nothing scripted: any call would fail the test
    request_windows = ModelWindows().for_request(upstream, HEADERS)
    assert await request_windows.window("qwen", ask=False) is None
    assert await request_windows.window("", ask=True) is None
    assert upstream.calls == []


class FailingUpstream(UpstreamDouble):
    """Raises what no upstream should (a bug in an upstream kind)."""

    async def open(self, *args: Any, **kwargs: Any) -> UpstreamResponse:
        raise RuntimeError("bug")


async def test_any_failure_of_a_probe_falls_back_softly() -> None:
    assert await ask(ModelWindows(), FailingUpstream(), "qwen") is None


async def test_a_listing_over_its_cap_is_not_read_to_its_end() -> None:
    """The bytes of a listing (decoded from whatever coding the upstream used) stop being read
    once past `MAX_PROBE_BYTES`: a bomb never makes the proxy read all of it."""
    chunks = [b" " * 65536] * (4 * MAX_PROBE_BYTES // 65536)
    upstream = UpstreamDouble(Answer(chunks=chunks), NOT_FOUND)
    assert await ask(ModelWindows(), upstream, "qwen") is None
    delivered = upstream.responses[0].delivered
    assert MAX_PROBE_BYTES < sum(map(len, delivered)) <= MAX_PROBE_BYTES + 65536
