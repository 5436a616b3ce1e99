"""The soak test's upstream: an OpenAI-shaped aiohttp server that also drives synthetic reads.

When a request offers `read_context_artifact` and names an artifact but carries no result of a
read yet, it answers with a call of that tool (the proxy must execute it and ask again);
otherwise it answers with a short completion, streamed when asked.

    python bench/soak/upstream.py --port 9200
"""

from __future__ import annotations

import argparse
import re
from typing import Any

import orjson
from aiohttp import web

ARTIFACT = re.compile(r"art_[0-9a-f]{32}")
USAGE = {"prompt_tokens": 50, "completion_tokens": 5, "total_tokens": 55}


def _completion(message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-soak",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "gpt-4o",
        "usage": USAGE,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }


def _wants_read(body: dict[str, Any]) -> str | None:
    tools = body.get("tools") or []
    if not any(t.get("function", {}).get("name") == "read_context_artifact" for t in tools):
        return None
    messages = body.get("messages") or []
    if any(str(m.get("tool_call_id", "")).startswith("soak_read") for m in messages):
        return None
    found = ARTIFACT.search(orjson.dumps(messages).decode())
    return found.group(0) if found else None


async def chat(request: web.Request) -> web.StreamResponse:
    body = orjson.loads(await request.read())
    artifact = _wants_read(body)
    if artifact:
        arguments = orjson.dumps({"artifact_id": artifact, "offset": 0, "max_chars": 500}).decode()
        call = {
            "id": "soak_read_1",
            "type": "function",
            "function": {"name": "read_context_artifact", "arguments": arguments},
        }
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        if body.get("stream"):
            return await _stream(request, [{"tool_calls": [{"index": 0, **call}]}], "tool_calls")
        return web.json_response(_completion(message, "tool_calls"))
    if body.get("stream"):
        deltas = [{"role": "assistant", "content": ""}, {"content": "ok"}, {"content": " then"}]
        return await _stream(request, deltas, "stop")
    return web.json_response(_completion({"role": "assistant", "content": "ok"}, "stop"))


async def _stream(
    request: web.Request, deltas: list[dict[str, Any]], finish: str
) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    base = {
        "id": "chatcmpl-soak",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "gpt-4o",
    }
    for delta in deltas:
        chunk = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
        await response.write(b"data: " + orjson.dumps(chunk) + b"\n\n")
    last = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}
    await response.write(b"data: " + orjson.dumps(last) + b"\n\ndata: [DONE]\n\n")
    await response.write_eof()
    return response


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/chat/completions", chat)
    web.run_app(app, host="127.0.0.1", port=args.port, print=None, access_log=None)


if __name__ == "__main__":
    main()
