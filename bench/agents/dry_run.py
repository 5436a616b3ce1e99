"""Replay captured client bodies against the proxy's dry run for their manifests.

`POST /v1/context/prepare?format=anthropic_messages|openai_responses` with the client's own
credential headers (so the artifact scope is the CLI's): the manifest names the outcome, the
notes (e.g. why a body was `invalid_forwarded`) and `tokens_before`.
"""

from __future__ import annotations

from typing import Any

import aiohttp

from bench.agents.recorder import ClientRecord

FORMATS = {"/v1/messages": "anthropic_messages", "/v1/responses": "openai_responses"}
PASSED_HEADERS = ("x-api-key", "authorization", "anthropic-version", "anthropic-beta")


def route_of(record: ClientRecord) -> str:
    return record.path.split("?", 1)[0]


def dry_run_format(record: ClientRecord) -> str | None:
    if record.method != "POST":
        return None
    return FORMATS.get(route_of(record))


async def manifests(proxy_url: str, records: list[ClientRecord]) -> dict[int, dict[str, Any]]:
    """seq -> the dry run's answer (`changed`, `manifest`, and `status`; the body left out)."""
    found: dict[int, dict[str, Any]] = {}
    async with aiohttp.ClientSession() as session:
        for record in records:
            fmt = dry_run_format(record)
            if fmt is None:
                continue
            headers = {k: v for k, v in record.headers.items() if k.lower() in PASSED_HEADERS}
            headers["Content-Type"] = "application/json"
            url = f"{proxy_url}/v1/context/prepare?format={fmt}"
            async with session.post(url, data=record.body, headers=headers) as response:
                status = response.status
                try:
                    answer = await response.json(content_type=None)
                except ValueError:
                    answer = {"error": (await response.text())[:500]}
            if isinstance(answer, dict):
                answer.pop("body", None)
                found[record.seq] = {"status": status, **answer}
    return found
