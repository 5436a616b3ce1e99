"""Smoke test of the cost-session bench (bench/quality/cost_session.py): a short session sent
directly and through the proxy; the proxy's cost header sums to the fake's usage."""

from __future__ import annotations

import pytest

from bench.quality.cost_session import Variant, main, measure, table

# The default steps without condense_tool_results, which would rewrite the session's command
# outputs even under the window: this test compares the input sent directly and unchanged.
UNCONDENSED = (
    "steps: [{kind: offload_tool_results}, {kind: clear_tool_results}, {kind: drop_turns}]\n"
)


async def test_a_short_session_direct_and_through_the_proxy() -> None:
    variant = Variant("default", "auto", None, True, extra=UNCONDENSED)
    direct, proxied = await measure(6, [variant], True)
    assert direct.run == "direct (unchanged)" and direct.proxy_cost_usd is None
    assert proxied.proxy_cost_usd == pytest.approx(proxied.cost_usd, abs=1e-6)
    assert proxied.proxy_unchanged_usd is not None and proxied.proxy_unchanged_usd > 0
    assert 0 < proxied.cached_share_after_3 <= 1
    assert direct.input_tokens == proxied.input_tokens  # nothing to prepare in six turns
    text = table([direct, proxied])
    assert "| default, window auto |" in text and "$" in text


def test_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--turns", "2", "--windows", "auto", "--json"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[0].startswith('{"run":"direct (unchanged)"')


async def test_a_client_without_breakpoints_under_auto_and_keep() -> None:
    variants = [Variant("default", "auto", mode, False) for mode in ("auto", "keep")]
    direct, auto, keep = await measure(6, variants, False)
    assert direct.run == "direct (unchanged), no client marks" and direct.cache_read == 0
    assert auto.run == "default, window auto, cache_marks auto, no client marks"
    assert auto.cache_read > 0 and auto.cache_write > 0 and auto.cost_usd < keep.cost_usd
    assert keep.cache_read == keep.cache_write == 0
    assert auto.proxy_cost_usd == pytest.approx(auto.cost_usd, abs=1e-6)
