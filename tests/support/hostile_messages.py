"""Hypothesis strategies for hostile Anthropic Messages bodies (`POST /v1/messages` and
`/v1/messages/count_tokens`).

* ``messages_histories()`` -> a sound agent history: user turns, assistant turns thinking then
  calling tools (`tool_use`), their `tool_result` blocks (string or block content) in the next
  user message, sometimes large enough for the small window to offload, clear and drop.
* ``hostile_messages()`` -> ``dict``: a request on such a history with one to three mutations:
  `system` as a string, blocks or a wrong type; content as a string; unknown block types; a
  `tool_use` without its result; a result without its `tool_use`; duplicate ids; results out of
  order; thinking blocks in odd places; huge results (string, blocks, images inside); nasty
  unicode; a wrong type at any field; `stream` not a bool; more than four `cache_control`
  markers; a client tool named like the proxy's read tool; `max_tokens` missing or huge.

Everything drawn is serialisable by ``hostile.encode`` (lone surrogates included).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from hostile import NASTY_STRINGS, weird_values
from hypothesis import strategies as st

Body = dict[str, Any]
Mutation = Callable[[st.DrawFn, Body], None]

MODEL = "claude-haiku-4-5"
READ = "read_context_artifact"
CLIENT_TOOL = {
    "name": "run",
    "description": "Run a command",
    "input_schema": {"type": "object", "properties": {"cmd": {"type": "string"}}},
}
TINY_PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg"
    "=="
)
IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": TINY_PNG}}
BLOCK_KINDS = (
    "text",
    "image",
    "document",
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
    "server_tool_use",
    "web_search_tool_result",
    "search_result",
    "container_upload",
    "mystery",
    "",
    "TEXT",
)
TOP_FIELDS = (
    "model",
    "max_tokens",
    "messages",
    "system",
    "tools",
    "tool_choice",
    "stream",
    "metadata",
    "temperature",
    "stop_sequences",
    "thinking",
    "top_k",
)


def _words(n: int, k: int) -> str:
    return " ".join(f"w{(k * 7919 + i) % 10007}" for i in range(n))


@st.composite
def result_content(draw: st.DrawFn, k: int) -> Any:
    size = draw(st.sampled_from((20, 200, 800, 3000)))
    text = _words(size, k)
    shape = draw(st.sampled_from(("string", "blocks", "image", "two")))
    if shape == "string":
        return text
    if shape == "blocks":
        return [{"type": "text", "text": text}]
    if shape == "image":
        return [{"type": "text", "text": text}, copy.deepcopy(IMAGE)]
    return [{"type": "text", "text": text[: len(text) // 2]}, {"type": "text", "text": text}]


@st.composite
def messages_histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A sound history ending with a user message."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Start the task, please."}]
    for k in range(draw(st.integers(1, 7))):
        calls = draw(st.integers(1, 3))
        content: list[dict[str, Any]] = []
        if draw(st.booleans()):
            content.append({"type": "thinking", "thinking": f"step {k}", "signature": f"sig{k}=="})
        if draw(st.booleans()):
            content.append({"type": "redacted_thinking", "data": f"opaque{k}"})
        if draw(st.booleans()):
            content.append({"type": "text", "text": f"Running step {k}."})
        ids = [f"toolu_{k}_{c}" for c in range(calls)]
        content += [
            {"type": "tool_use", "id": i, "name": "run", "input": {"cmd": f"ls {i}"}} for i in ids
        ]
        messages.append({"role": "assistant", "content": content})
        results: list[dict[str, Any]] = [
            {"type": "tool_result", "tool_use_id": i, "content": draw(result_content(k * 3 + c))}
            for c, i in enumerate(ids)
        ]
        if draw(st.booleans()):
            results.append({"type": "text", "text": "continue"})
        messages.append({"role": "user", "content": results})
    messages.append({"role": "user", "content": "And now?"}) if draw(st.booleans()) else None
    return messages


def _pick_message(draw: st.DrawFn, body: Body, role: str | None = None) -> dict[str, Any] | None:
    found = [
        m
        for m in body.get("messages") or []
        if isinstance(m, dict) and (role is None or m.get("role") == role)
    ]
    return draw(st.sampled_from(found)) if found else None


def _blocks(message: dict[str, Any] | None) -> list[Any]:
    content = message.get("content") if message else None
    return content if isinstance(content, list) else []


def m_system(draw: st.DrawFn, body: Body) -> None:
    body["system"] = draw(
        st.one_of(
            st.sampled_from(("You are terse.", "", "\ud800 system \x00")),
            st.just(
                [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}]
            ),
            st.just([{"type": "image", "source": {}}, "loose string", None]),
            weird_values,
        )
    )


def m_string_content(draw: st.DrawFn, body: Body) -> None:
    message = _pick_message(draw, body)
    if message is not None:
        message["content"] = draw(st.sampled_from((*NASTY_STRINGS, "plain text")))


def m_unknown_block(draw: st.DrawFn, body: Body) -> None:
    message = _pick_message(draw, body)
    if message is not None and isinstance(message.get("content"), list):
        kind = draw(st.sampled_from(BLOCK_KINDS))
        block = {
            "type": kind,
            **draw(
                st.dictionaries(
                    st.sampled_from(
                        (
                            "text",
                            "id",
                            "content",
                            "tool_use_id",
                            "data",
                            "input",
                            "name",
                            "signature",
                        )
                    ),
                    weird_values,
                    max_size=3,
                )
            ),
        }
        at = draw(st.integers(0, len(message["content"])))
        message["content"].insert(at, block)


def m_drop_result(draw: st.DrawFn, body: Body) -> None:
    message = _pick_message(draw, body, "user")
    blocks = _blocks(message)
    results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
    if results:
        blocks.remove(draw(st.sampled_from(results)))


def m_orphan_result(draw: st.DrawFn, body: Body) -> None:
    message = _pick_message(draw, body, "user")
    if message is not None:
        orphan = {
            "type": "tool_result",
            "tool_use_id": draw(st.sampled_from(("toolu_ghost", "", "toolu_0_0"))),
            "content": "orphan",
        }
        if isinstance(message.get("content"), list):
            message["content"].insert(0, orphan)
        else:
            message["content"] = [orphan]


def m_duplicate_ids(draw: st.DrawFn, body: Body) -> None:
    message = _pick_message(draw, body, "assistant")
    uses = [b for b in _blocks(message) if isinstance(b, dict) and b.get("type") == "tool_use"]
    if uses:
        uses.append(copy.deepcopy(uses[0]))
        _blocks(message).append(uses[-1])
        if draw(st.booleans()):  # a second result for it too
            for m in body["messages"]:
                for b in _blocks(m):
                    if isinstance(b, dict) and b.get("tool_use_id") == uses[0]["id"]:
                        _blocks(m).append(copy.deepcopy(b))
                        return


def m_results_out_of_order(draw: st.DrawFn, body: Body) -> None:
    message = _pick_message(draw, body, "user")
    blocks = _blocks(message)
    if len(blocks) > 1:
        blocks[:] = draw(st.permutations(blocks))


def m_thinking_odd(draw: st.DrawFn, body: Body) -> None:
    message = _pick_message(draw, body)
    if message is None:
        return
    block = draw(
        st.sampled_from(
            (
                {"type": "thinking", "thinking": "odd", "signature": "sig=="},
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "thinking", "thinking": None},
                {"type": "thinking"},
            )
        )
    )
    if not isinstance(message.get("content"), list):
        message["content"] = [{"type": "text", "text": str(message.get("content"))}]
    if draw(st.booleans()):
        message["content"].append(dict(block))
    else:
        results = [b for b in message["content"] if isinstance(b, dict) and "tool_use_id" in b]
        target = results[0] if results else None
        if target is not None:
            target["content"] = [dict(block)]
        else:
            message["content"].insert(0, dict(block))


def m_huge_result(draw: st.DrawFn, body: Body) -> None:
    message = _pick_message(draw, body, "user")
    results = [
        b for b in _blocks(message) if isinstance(b, dict) and b.get("type") == "tool_result"
    ]
    if not results:
        return
    size = draw(st.sampled_from((50_000, 300_000)))
    text = _words(size // 6, size)
    target = draw(st.sampled_from(results))
    target["content"] = draw(
        st.sampled_from(
            (
                text,
                [{"type": "text", "text": text}],
                [
                    {"type": "text", "text": text},
                    copy.deepcopy(IMAGE),
                    {"type": "text", "text": "tail"},
                ],
                [copy.deepcopy(IMAGE)] * 3,
            )
        )
    )


def m_unicode(draw: st.DrawFn, body: Body) -> None:
    message = _pick_message(draw, body)
    text = draw(st.sampled_from(NASTY_STRINGS)) + draw(st.text(max_size=20))
    for block in _blocks(message):
        if isinstance(block, dict) and isinstance(block.get("text"), str):
            block["text"] = text + block["text"]
            return
        if isinstance(block, dict) and isinstance(block.get("content"), str):
            block["content"] = text + block["content"]
            return


def m_wrong_type(draw: st.DrawFn, body: Body) -> None:
    where = draw(st.sampled_from(("top", "message", "block", "role")))
    value = draw(weird_values)
    if where == "top":
        body[draw(st.sampled_from(TOP_FIELDS))] = value
        return
    message = _pick_message(draw, body)
    if message is None:
        return
    if where == "message":
        message[draw(st.sampled_from(("content", "role", "name")))] = value
    elif where == "role":
        message["role"] = draw(st.sampled_from(("system", "tool", "", "USER", None)))
    else:
        blocks = [b for b in _blocks(message) if isinstance(b, dict)]
        if blocks:
            block = draw(st.sampled_from(blocks))
            block[
                draw(
                    st.sampled_from(
                        (
                            "type",
                            "id",
                            "tool_use_id",
                            "content",
                            "input",
                            "text",
                            "is_error",
                            "cache_control",
                            "name",
                        )
                    )
                )
            ] = value


def m_stream(draw: st.DrawFn, body: Body) -> None:
    body["stream"] = draw(st.sampled_from((1, 0, "true", "false", None, [], {}, 1.0, True)))


def m_cache_marks(draw: st.DrawFn, body: Body) -> None:
    marked = 0
    want = draw(st.integers(5, 12))
    for message in body.get("messages") or []:
        for block in _blocks(message):
            if isinstance(block, dict) and marked < want:
                block["cache_control"] = {"type": "ephemeral"}
                marked += 1
                for inner in block.get("content") if isinstance(block.get("content"), list) else []:
                    if isinstance(inner, dict):
                        inner["cache_control"] = {"type": "ephemeral", "ttl": "5m"}
    if draw(st.booleans()):
        body["system"] = [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}]
        body["tools"] = [{**CLIENT_TOOL, "cache_control": {"type": "ephemeral"}}]


def m_read_tool_name(draw: st.DrawFn, body: Body) -> None:
    tool = {
        "name": READ,
        "description": "the client's own",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
    }
    body["tools"] = [*(body.get("tools") or []), tool] if draw(st.booleans()) else [tool]
    message = _pick_message(draw, body, "assistant")
    for block in _blocks(message):
        if isinstance(block, dict) and block.get("type") == "tool_use":
            block["name"] = READ
            block["input"] = {"path": "/etc/hosts", "artifact_id": "art_" + "0" * 32}


def m_max_tokens(draw: st.DrawFn, body: Body) -> None:
    choice = draw(st.sampled_from(("missing", 10**12, 2**63, -1, 0, 1.5, "100", None, 10**400)))
    if choice == "missing":
        body.pop("max_tokens", None)
    else:
        body["max_tokens"] = choice


def m_shape(draw: st.DrawFn, body: Body) -> None:
    """Odd conversation shapes: an empty content list, an assistant prefill last, two user
    messages in a row, no messages, a single message."""
    messages = body["messages"] if isinstance(body.get("messages"), list) else []
    shape = draw(st.sampled_from(("empty", "prefill", "twice", "none", "one")))
    if shape == "empty" and messages:
        draw(st.sampled_from(messages))["content"] = []
    elif shape == "prefill":
        messages.append({"role": "assistant", "content": "The answer is"})
    elif shape == "twice" and messages:
        messages.append(copy.deepcopy(messages[-1]))
    elif shape == "none":
        body["messages"] = []
    elif shape == "one":
        body["messages"] = messages[:1]


MUTATIONS: tuple[Mutation, ...] = (
    m_shape,
    m_system,
    m_string_content,
    m_unknown_block,
    m_drop_result,
    m_orphan_result,
    m_duplicate_ids,
    m_results_out_of_order,
    m_thinking_odd,
    m_huge_result,
    m_unicode,
    m_wrong_type,
    m_stream,
    m_cache_marks,
    m_read_tool_name,
    m_max_tokens,
)


@st.composite
def sound_messages(draw: st.DrawFn) -> Body:
    body: Body = {
        "model": MODEL,
        "max_tokens": draw(st.sampled_from((64, 256, 1024))),
        "messages": draw(messages_histories()),
        "tools": [dict(CLIENT_TOOL)],
    }
    if draw(st.booleans()):
        body["stream"] = True
    if draw(st.booleans()):
        body["system"] = "You are a careful agent."
    return body


@st.composite
def hostile_messages(draw: st.DrawFn, mutations: int = 3) -> Body:
    body = draw(sound_messages())
    for mutation in draw(st.lists(st.sampled_from(MUTATIONS), min_size=1, max_size=mutations)):
        mutation(draw, body)
    return body


def tiny_messages(count: int) -> list[dict[str, Any]]:
    """`count` tiny alternating messages ending with a user one (10,000 of them for the run)."""
    messages = [{"role": ("user", "assistant")[k % 2], "content": f"m{k}"} for k in range(count)]
    if messages and messages[-1]["role"] != "user":
        messages.append({"role": "user", "content": "last"})
    return messages
