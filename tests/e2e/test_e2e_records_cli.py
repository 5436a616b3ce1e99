"""`ctxproxy requests` as a user runs it: a separate process reading a running proxy's records
over HTTP with a proxy key (the table, one record, `--json`, the errors)."""

from __future__ import annotations

import asyncio
import json
import sys

from fakes import FakeUpstream, completion, make_usage
from proxy_harness import RunningProxy
from records_harness import KEYS, post, written
from synthetic_harness import SyntheticProxies

HANG_S = 120.0
CHAT = "/v1/chat/completions"
HELLO = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Hello"}]}


async def ctxproxy(proxy: RunningProxy, *args: str, key: str = "sk-acme") -> tuple[int, str, str]:
    await written(proxy)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "proxy.cli", "requests", "--url", proxy.url, "--key", key, *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), HANG_S)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_the_list_as_a_table_and_as_json(
    proxies: SyntheticProxies, fake_upstream: FakeUpstream
) -> None:
    proxy = await proxies.start(**KEYS)
    fake_upstream.enqueue(completion("Hi", usage=make_usage(120, 7)))
    _, first, _ = await post(proxy, CHAT, HELLO)
    _, second, _ = await post(proxy, CHAT, {**HELLO, "model": "gpt-4o-mini"})
    code, out, err = await ctxproxy(proxy)
    assert code == 0 and err == ""
    header, *lines = out.splitlines()
    assert header.split()[:4] == ["TIME", "REQUEST", "ID", "TENANT"]
    assert [line.split()[2] for line in lines] == [second, first]
    assert all(" acme " in line and " ok " in line for line in lines)
    code, out, _ = await ctxproxy(proxy, "--model", "gpt-4o-mini", "--json")
    answer = json.loads(out)
    assert code == 0 and [r["request_id"] for r in answer["data"]] == [second]
    code, out, _ = await ctxproxy(proxy, "--limit", "1")
    assert code == 0 and f"--before {second}" in out
    code, out, _ = await ctxproxy(proxy, "--key", "sk-globex")
    assert code == 0 and out.splitlines()[1:] == []


async def test_one_record(proxies: SyntheticProxies, fake_upstream: FakeUpstream) -> None:
    proxy = await proxies.start(**KEYS)
    _, request_id, _ = await post(proxy, CHAT, HELLO)
    code, out, _ = await ctxproxy(proxy, "show", request_id)
    assert code == 0
    rows = dict(line.split(None, 1) for line in out.splitlines() if line and " " in line)
    assert rows["outcome"].strip() == "ok" and rows["policy"].strip() == "small"
    assert rows["x-ctxproxy-request-id"].strip() == request_id
    code, out, _ = await ctxproxy(proxy, "show", request_id, "--json")
    assert code == 0 and json.loads(out)["request_id"] == request_id
    code, out, err = await ctxproxy(proxy, "show", request_id, key="sk-globex")
    assert code == 1 and out == "" and "404" in err and "record_not_found" in err


async def test_errors_go_to_stderr(proxies: SyntheticProxies) -> None:
    proxy = await proxies.start(**KEYS)
    code, out, err = await ctxproxy(proxy, key="sk-wrong")
    assert code == 1 and out == "" and "401" in err and "invalid_api_key" in err
    code, out, err = await ctxproxy(proxy, "--limit", "0")
    assert code == 1 and "'limit' must be" in err
