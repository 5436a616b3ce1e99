"""The operator console in a real headless Chromium, against the real server and the fake
upstream: sign in with a tenant's key, see the requests just made (and only the tenant's own),
open one, see what preparation did where, page through an artifact; stored content is shown as
text, never run."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import openai
import pytest
from browser import Watched, chromium, screenshot, watched_page
from fakes import FakeUpstream
from fakes.anthropic import fake_anthropic
from playwright.async_api import Browser, expect
from proxy_harness import RunningProxy
from records_harness import written
from synthetic_harness import SyntheticProxies

OPERATOR, ACME, GLOBEX = "sk-operator", "sk-acme-console-key", "sk-globex-console-key"
INITECH = "sk-initech-console-key"
SETTINGS: dict[str, Any] = {
    "auth": {"mode": "keys", "operator_keys": [OPERATOR]},
    "tenants": [
        {"name": "acme", "keys": [ACME], "policy": "console"},
        {"name": "globex", "keys": [GLOBEX], "policy": "small"},
        {"name": "initech", "keys": [INITECH], "policy": "compacting"},
    ],
}
CONSOLE_POLICY = "extends: small\nrecords: {bodies: true}\n"
"""The small window of `synthetic_harness`, its records keeping the bodies."""
COMPACTING_POLICY = CONSOLE_POLICY + "mode: compact\n"
"""The same, with the oldest turns summarized (the extract: no model) instead of dropped."""
HOSTILE = "<script>alert('xss')</script><img src=x onerror=\"alert('img')\">"
LOG = HOSTILE + "\n" + "".join(f"log line {n}: status={n * 37 % 101}\n" for n in range(700))
"""The last tool result: offloaded (over the policy's threshold), three pages of 5,000 chars."""
DASH = "\N{EN DASH}"
"""Between the ends of a range, as the console writes it."""
NOTE = "Its build and its tests passed; nothing to fix there. "
"""The earlier answers' text: too much to keep it all, so turns are dropped."""


def history(turns: int) -> list[dict[str, Any]]:
    """A task, `turns` earlier turns of a tool call and its result, then a large log result."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Task: find the failing job."}]
    for i in range(turns + 1):
        if i:
            messages.append({"role": "user", "content": f"Go on with step {i}."})
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{i}",
                        "type": "function",
                        "function": {"name": "read_log", "arguments": f'{{"job": {i}}}'},
                    }
                ],
            }
        )
        result = LOG if i == turns else f"job {i}: " + "ok " * 150
        messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": result})
        if i < turns:
            messages.append({"role": "assistant", "content": f"Job {i} is fine. " + NOTE * 12})
    return messages


@pytest.fixture
async def proxy(proxies: SyntheticProxies) -> RunningProxy:
    policies = {"console": CONSOLE_POLICY, "compacting": COMPACTING_POLICY}
    return await proxies.start(policies=policies, **SETTINGS)


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with chromium() as started:
        yield started


async def chat(proxy: RunningProxy, key: str, model: str, messages: list[dict[str, Any]]) -> str:
    """A completion through the proxy with the openai SDK; its request id."""
    async with openai.AsyncOpenAI(base_url=proxy.base_url, api_key=key, max_retries=0) as client:
        raw = await client.chat.completions.with_raw_response.create(
            model=model,
            messages=messages,  # type: ignore[arg-type]
        )
    await written(proxy)
    return raw.headers["x-ctxproxy-request-id"]


async def refused(proxy: RunningProxy, key: str) -> str:
    """A request too large to fit, refused before any upstream call; its request id."""
    huge = [{"role": "user", "content": "word " * 20_000}]
    async with openai.AsyncOpenAI(base_url=proxy.base_url, api_key=key, max_retries=0) as client:
        with pytest.raises(openai.BadRequestError) as caught:
            await client.chat.completions.create(model="gpt-4o", messages=huge)  # type: ignore[arg-type]
    assert caught.value.code == "context_length_exceeded"
    await written(proxy)
    return caught.value.response.headers["x-ctxproxy-request-id"]


def messages_body() -> dict[str, Any]:
    """An Anthropic Messages request whose last tool result (LOG) is offloaded."""
    call = {"type": "tool_use", "id": "toolu_log", "name": "read_log", "input": {"job": 1}}
    result = {"type": "tool_result", "tool_use_id": "toolu_log", "content": LOG}
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 200,
        "system": "You read logs.",
        "messages": [
            {"role": "user", "content": "Task: find the failing job."},
            {"role": "assistant", "content": [{"type": "text", "text": "Reading it."}, call]},
            {"role": "user", "content": [result]},
        ],
    }


def responses_body() -> dict[str, Any]:
    """A Responses request whose last function output (LOG) is offloaded."""
    return {
        "model": "gpt-4o",
        "instructions": "You read logs.",
        "store": False,
        "input": [
            {"role": "user", "content": "Task: find the failing job."},
            {"type": "function_call", "call_id": "fc_log", "name": "read_log", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "fc_log", "output": LOG},
        ],
    }


async def posted(proxy: RunningProxy, route: str, body: dict[str, Any]) -> str:
    """A request of another format, with a tenant's key as its SDK would send it; its id."""
    headers = {"Authorization": f"Bearer {ACME}", "x-api-key": ACME}
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{proxy.url}{route}", json=body, headers=headers) as response,
    ):
        assert response.status == 200, await response.text()
        request_id = response.headers["x-ctxproxy-request-id"]
    await written(proxy)
    return request_id


async def signed_in(browser: Browser, proxy: RunningProxy, key: str) -> Watched:
    watched = await watched_page(browser)
    page = watched.page
    await page.goto(f"{proxy.url}/ui")
    await page.fill("#key", key)
    await page.click("#login button[type=submit]")
    await expect(page.locator("#nav")).to_be_visible()
    return watched


async def test_a_tenant_sees_its_request_what_was_done_where_and_pages_an_artifact(
    proxy: RunningProxy, browser: Browser, fake_upstream: FakeUpstream
) -> None:
    first = await chat(proxy, ACME, "gpt-4o", history(8))
    too_large = await refused(proxy, ACME)
    watched = await signed_in(browser, proxy, ACME)
    page = watched.page
    row = page.locator(f'tr[data-request-id="{first}"]')
    await expect(row).to_contain_text("gpt-4o")
    await expect(row.locator(".badge.act-offload_tool_results")).to_have_text("offloaded")
    await expect(row.locator(".badge.act-drop_turns")).to_have_text("dropped")
    await expect(row.locator(".outcome")).to_have_text("ok")
    await expect(row).to_contain_text("→")
    refusal = page.locator(f'tr[data-request-id="{too_large}"] .outcome')
    await expect(refusal).to_have_text("400 refused")

    second = await chat(proxy, ACME, "gpt-4o-mini", [{"role": "user", "content": "hi"}])
    fresh = page.locator(f'tr[data-request-id="{second}"]')
    await expect(fresh).to_contain_text("gpt-4o-mini")  # the list polls: no reload
    assert await page.locator("tbody tr").first.get_attribute("data-request-id") == second
    await screenshot(page, "console-list.png", below="table.requests")

    await row.locator("a").click()
    await expect(page.locator(".side-by-side")).to_be_visible()
    dropped = page.locator(".cell.original details.span.act-drop_turns > summary")
    await expect(dropped).to_contain_text("dropped")
    await expect(dropped).to_contain_text("turns")
    notice = page.locator(".cell.prepared .msg.from-proxy").first
    await expect(notice).to_contain_text("earlier turn")
    offloaded = page.locator(".cell.original .msg.act-offload_tool_results")
    await expect(offloaded.locator(".badge")).to_have_text("offloaded")
    await expect(offloaded.locator("pre.content")).to_contain_text(HOSTILE)
    await screenshot(page, "console-request.png", below=".side-by-side")

    link = offloaded.locator("a.artifact")
    artifact_id = await link.text_content()
    assert artifact_id is not None and re.fullmatch(r"art_[0-9a-f]{32}", artifact_id)
    await link.click()
    content = page.locator("#artifact-content")
    position = page.locator("#artifact-position")
    await expect(position).to_have_text(f"chars 0{DASH}5,000 of {len(LOG):,}")
    assert await content.text_content() == LOG[:5000]
    await page.click("#next-page")
    await expect(position).to_have_text(f"chars 5,000{DASH}10,000 of {len(LOG):,}")
    assert await content.text_content() == LOG[5000:10000]
    await page.click("#last-page")
    await expect(page.locator("#next-page")).to_have_class(re.compile("disabled"))
    assert await content.text_content() == LOG[len(LOG) - 5000 :]
    await page.go_back()
    await page.go_back()
    await expect(content).to_have_text(LOG[:5000])
    watched.quiet()


async def test_stored_markup_is_shown_as_text_and_never_runs(
    proxy: RunningProxy, browser: Browser
) -> None:
    request_id = await chat(proxy, ACME, "gpt-4o", history(8))
    watched = await signed_in(browser, proxy, ACME)
    page = watched.page
    await page.goto(f"{proxy.url}/ui#/requests/{request_id}")
    shown = page.get_by_text(HOSTILE).first
    await expect(shown).to_be_visible()
    await page.locator("a.artifact", has_text=re.compile("art_")).first.click()
    await expect(page.locator("#artifact-content")).to_be_visible()
    await page.goto(f"{proxy.url}/ui#/requests/{request_id}")
    await expect(page.locator(".side-by-side")).to_be_visible()
    assert await page.locator("main script, main img").count() == 0
    assert await page.evaluate("document.querySelectorAll('[onerror]').length") == 0
    watched.quiet()


async def test_a_tenant_never_sees_another_tenants_requests(
    proxy: RunningProxy, browser: Browser
) -> None:
    own = await chat(proxy, ACME, "gpt-4o", [{"role": "user", "content": "acme's question"}])
    foreign = await chat(proxy, GLOBEX, "gpt-4.1", [{"role": "user", "content": "globex's"}])
    watched = await signed_in(browser, proxy, ACME)
    page = watched.page
    await expect(page.locator(f'tr[data-request-id="{own}"]')).to_be_visible()
    await expect(page.locator("tbody tr")).to_have_count(1)
    assert "globex" not in await page.locator("main").inner_text()

    await page.goto(f"{proxy.url}/ui#/requests/{foreign}")
    await expect(page.locator("main .error")).to_contain_text("record_not_found")
    assert "gpt-4.1" not in await page.locator("main").inner_text()
    assert watched.failed_loads and all("404" in line for line in watched.failed_loads)
    watched.failed_loads.clear()
    watched.quiet()

    operator = await signed_in(browser, proxy, OPERATOR)
    await expect(operator.page.locator(f'tr[data-request-id="{foreign}"]')).to_contain_text(
        "globex"
    )
    await expect(operator.page.locator(f'tr[data-request-id="{own}"]')).to_contain_text("acme")
    await operator.page.fill("input[name=tenant]", "globex")
    await operator.page.click("form.filters button")
    await expect(operator.page.locator("tbody tr")).to_have_count(1)
    await expect(operator.page.locator(f'tr[data-request-id="{foreign}"]')).to_be_visible()
    operator.quiet()


async def test_an_operator_key_reads_records_but_not_a_tenants_artifacts(
    proxy: RunningProxy, browser: Browser
) -> None:
    request_id = await chat(proxy, ACME, "gpt-4o", history(8))
    watched = await signed_in(browser, proxy, OPERATOR)
    page = watched.page
    await page.goto(f"{proxy.url}/ui#/requests/{request_id}")
    await page.locator(".cell.original .msg.act-offload_tool_results a.artifact").click()
    await expect(page.locator(".artifact-page")).to_contain_text("read it with that tenant's key")
    await expect(page.locator("#nav")).to_be_visible()  # still signed in
    await page.click("#nav a[data-view=requests]")
    await expect(page.locator(f'tr[data-request-id="{request_id}"]')).to_be_visible()
    assert watched.failed_loads and all("401" in line for line in watched.failed_loads)
    watched.failed_loads.clear()
    watched.quiet()


async def test_savings_per_tenant_and_the_effective_policy(
    proxy: RunningProxy, browser: Browser
) -> None:
    await chat(proxy, ACME, "gpt-4o", history(8))
    await chat(proxy, ACME, "gpt-4o", history(4))
    await refused(proxy, ACME)
    watched = await signed_in(browser, proxy, ACME)
    page = watched.page
    await expect(page.locator("tbody tr")).to_have_count(3)
    await page.select_option("select[name=outcome]", "refused")
    await expect(page.locator("tbody tr")).to_have_count(1)
    await expect(page.locator("tbody tr .outcome")).to_have_text("400 refused")
    await page.click("#nav a[data-view=stats]")
    group = page.locator(".stats-group")
    await expect(group.locator("h2")).to_have_text("acme · console")
    await expect(group.locator(".kpi", has_text="requests").locator(".kpi-value")).to_have_text("3")
    await expect(group.locator(".kpi", has_text="refusals").locator(".kpi-value")).to_have_text("1")
    reason = group.locator("td", has_text="protected_content_exceeds_allowance")
    await expect(reason).to_be_visible()
    await expect(group.locator("svg.chart polyline.line.before")).to_have_count(1)
    points = await group.locator("svg.chart polyline.line.before").get_attribute("points")
    assert points is not None and len(points.split()) == 2  # the two prepared requests
    await page.click("#nav a[data-view=policy]")
    await page.fill("input[name=model]", "gpt-4o")
    await page.click("form.filters button")
    effective = page.locator("#policy-json")
    offload = "- kind: offload_tool_results\n    threshold_chars: 2000"
    await expect(effective).to_contain_text(offload)
    await expect(effective).to_contain_text("records:\n  bodies: true")
    watched.quiet()


async def test_a_compaction_shows_what_it_kept_and_what_it_marked_superseded(
    proxy: RunningProxy, browser: Browser
) -> None:
    messages = history(8)
    facts = {
        4: "Note: the deploy code is ZETA-4821.",
        8: "For the record, the port of api is 8080.",
        12: "Correction: the deploy code is now ZETA-9907.",
    }
    for index, fact in facts.items():
        messages[index]["content"] += " " + fact
    request_id = await chat(proxy, INITECH, "gpt-4o", messages)
    watched = await signed_in(browser, proxy, INITECH)
    page = watched.page
    await page.goto(f"{proxy.url}/ui#/requests/{request_id}")
    compaction = page.locator("section.panel", has=page.locator("h2", has_text="Compaction"))
    kept = compaction.locator(".compaction > div", has_text="Kept in the summary")
    await expect(kept.locator("li")).to_have_text(["deploy code", "port of api"])
    superseded = compaction.locator(".compaction > div", has_text="Marked superseded")
    await expect(superseded.locator("li")).to_have_text(
        ["deploy code: ZETA-9907 (was ZETA-4821, corrected at turn 4)"]
    )
    archive = compaction.locator(".compaction > div", has_text="Only in the archive")
    await expect(archive).to_contain_text("originals stay in the archive")
    await expect(compaction.locator("a.artifact").first).to_have_text(re.compile("art_"))
    summarized = page.locator(".cell.original details.span.act-summarize > summary")
    await expect(summarized).to_contain_text("summarized")
    await expect(page.locator(".cell.prepared .msg.from-proxy").first).to_contain_text(
        "deploy code: ZETA-9907"
    )
    watched.quiet()


@pytest.mark.parametrize(
    ("route", "body", "label"),
    [
        ("/v1/messages", messages_body, "result of toolu_log"),
        ("/v1/responses", responses_body, "result of fc_log"),
    ],
    ids=["anthropic_messages", "openai_responses"],
)
async def test_the_other_formats_mark_the_offloaded_result_on_its_item(
    proxies: SyntheticProxies,
    fake_upstream: FakeUpstream,
    browser: Browser,
    route: str,
    body: Any,
    label: str,
) -> None:
    async with fake_anthropic() as claude:
        proxy = await proxies.start(
            policies={"console": CONSOLE_POLICY, "compacting": COMPACTING_POLICY},
            upstreams=[
                {"name": "fake", "base_url": fake_upstream.base_url},
                {"name": "claude", "kind": "anthropic", "base_url": claude.origin},
            ],
            routes=[{"model": "claude*", "upstream": "claude"}],
            **SETTINGS,
        )
        request_id = await posted(proxy, route, body())
    watched = await signed_in(browser, proxy, ACME)
    page = watched.page
    await page.goto(f"{proxy.url}/ui#/requests/{request_id}")
    original = page.locator(".cell.original .msg")
    await expect(original.first).to_contain_text("You read logs.")  # the system prefix
    offloaded = page.locator(".cell.original .msg.act-offload_tool_results")
    await expect(offloaded).to_have_count(1)
    await expect(offloaded).to_contain_text(label)
    await expect(offloaded.locator("pre.content").last).to_contain_text(HOSTILE)
    prepared = page.locator(".cell.prepared .msg.from-proxy")
    await expect(prepared).to_contain_text("tool result offloaded as artifact")
    await expect(page.locator(".cell.original .msg", has_text="call read_log")).to_have_count(1)
    watched.quiet()


async def test_without_bodies_the_actions_are_listed_by_message_index(
    proxy: RunningProxy, browser: Browser
) -> None:
    """globex's policy keeps no bodies in its records: the manifest's actions by message."""
    request_id = await chat(proxy, GLOBEX, "gpt-4o", history(8))
    watched = await signed_in(browser, proxy, GLOBEX)
    page = watched.page
    await page.goto(f"{proxy.url}/ui#/requests/{request_id}")
    rows = page.locator("table.by-index tbody tr")
    await expect(rows).to_have_count(2)
    await expect(rows.nth(0).locator("td").first).to_have_text(f"1{DASH}31")
    await expect(rows.nth(0).locator(".badge")).to_have_text("dropped")
    await expect(rows.nth(1).locator("td").first).to_have_text("34")
    await expect(rows.nth(1).locator(".badge")).to_have_text("offloaded")
    await expect(rows.locator("a.artifact")).to_have_count(2)
    await expect(page.locator(".side-by-side")).to_have_count(0)
    await expect(page.locator("main")).to_contain_text("No bodies in this record")
    watched.quiet()


async def test_the_key_stays_in_the_tabs_session_and_a_wrong_one_is_refused(
    proxy: RunningProxy, browser: Browser
) -> None:
    watched = await watched_page(browser)
    page = watched.page
    await page.goto(f"{proxy.url}/ui")
    await page.fill("#key", "sk-not-a-key")
    await page.click("#login button[type=submit]")
    await expect(page.locator("#login .error")).to_have_text("That key is not accepted.")
    assert await page.evaluate("sessionStorage.length + localStorage.length") == 0
    await expect(page.locator("#nav")).to_be_hidden()
    assert watched.failed_loads and all("401" in line for line in watched.failed_loads)
    watched.failed_loads.clear()

    await page.fill("#key", ACME)
    await page.click("#login button[type=submit]")
    await expect(page.locator("#nav")).to_be_visible()
    stored = await page.evaluate("Object.values(sessionStorage)")
    assert stored == [ACME]
    assert await page.evaluate("localStorage.length + document.cookie.length") == 0
    await page.reload()  # the same tab keeps it
    await expect(page.locator("#nav")).to_be_visible()
    await page.click("#logout")
    await expect(page.locator("#login")).to_be_visible()
    assert await page.evaluate("sessionStorage.length") == 0
    watched.quiet()


async def test_the_page_runs_no_inline_script_even_if_one_got_in(
    proxy: RunningProxy, browser: Browser
) -> None:
    """The second line of defence: were stored markup ever inserted, the Content-Security-Policy
    keeps an inline script and an inline event handler from running."""
    watched = await watched_page(browser)
    page = watched.page
    await page.goto(f"{proxy.url}/ui")
    await expect(page.locator("#login")).to_be_visible()
    await page.evaluate(
        """() => {
            const script = document.createElement("script");
            script.textContent = "window.injected = 1";
            document.body.append(script);
            const img = document.createElement("img");
            img.setAttribute("onerror", "window.injected = 2");
            img.src = "data:,";
            document.body.append(img);
        }"""
    )
    await expect(page.locator("body > img")).to_have_count(1)
    await page.wait_for_function("document.querySelector('body > img').complete")
    assert await page.evaluate("window.injected") is None
    violations = [line for line in watched.errors if "Content Security Policy" in line]
    assert len(violations) == 2, watched.errors
