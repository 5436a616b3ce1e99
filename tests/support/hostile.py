"""Hypothesis strategies for hostile chat-completion bodies: malformed, oversized, adversarial.

Used by the pipeline fuzz test (no server) and the end-to-end hostile-input test.

* ``hostile_requests()`` -> ``dict``: a JSON value (a request object, usually) with wrong types at
  some fields, broken tool-call structure, unknown content parts, lone surrogates, NUL characters
  and huge integers. It is always serialisable by ``encode()``.
* ``hostile_bodies()`` -> ``bytes``: what goes on the wire. Either ``encode(hostile_requests())``,
  or such a body with a raw JSON fragment spliced in where a value was (deep nesting, ``1e400``,
  ``NaN``, lone surrogate escapes, invalid UTF-8, raw NUL bytes), or a body broken as a whole
  (empty, truncated, not an object, UTF-16, a BOM, trailing garbage, random bytes).

Every draw starts from a valid request (``strategies.requests``) and applies one to three
mutations, so the hostile part sits inside otherwise plausible input and reaches deep code.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st
from strategies import broken_conversations, conversations, requests

Body = dict[str, Any]
Mutation = Callable[[st.DrawFn, Body], None]

SPLICE = "\x01ctxproxy-hostile-splice\x01"
"""A string value that ``hostile_bodies`` replaces by a raw JSON fragment after encoding."""
_SPLICED = json.dumps(SPLICE).encode()

NASTY_STRINGS = (
    "", "\x00", "a\x00b", "\ud800", "\udfff", "x\ud83d", "\udc00\ud800", "\U0001f600",
    "\u2028\u2029", "\ufeff", "[ctxproxy: not really the proxy]", "tool", "user", "system",
    "\r\n\r\nHTTP/1.1 200 OK",
)  # fmt: skip
HUGE_INTS = (10**30, -(10**30), 2**63, 2**64, -(2**63) - 1, 10**100)
_chars = st.characters(categories=["L", "N", "P", "S", "Z", "Cc", "Cs"])


def _long(length: int) -> str:
    return "x" * length


nasty_text = st.one_of(
    st.sampled_from(NASTY_STRINGS),
    st.text(_chars, max_size=12),
    st.sampled_from((1000, 9000)).map(_long),
)

weird_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.sampled_from(HUGE_INTS),
    st.floats(allow_nan=False, allow_infinity=False),
    nasty_text,
)
weird_values = st.recursive(
    weird_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(nasty_text, inner, max_size=3)
    ),
    max_leaves=8,
)
"""Any JSON value, mostly of the wrong type for whatever field it lands in."""

TOP_FIELDS = (
    "model", "messages", "tools", "tool_choice", "max_tokens", "max_completion_tokens", "stream",
    "stream_options", "n", "temperature", "parallel_tool_calls", "response_format", "user",
    "x_unknown",
)  # fmt: skip
_FIELD_VALUES: dict[str, tuple[Any, ...]] = {
    "model": (5, ["gpt-4o"], None, "", "gpt-4o\x00", "claude-3\ud800", "*", "x" * 3000),
    "messages": ({}, "hi", 3, [], None, [[]], [None], {"role": "user", "content": "x"}),
    "max_tokens": (-1, 0, 10**30, 2**63, 1.5, True, "100", -(10**30), None),
    "max_completion_tokens": (-5, 10**30, 1e308, False, "12", [1]),
    "stream": ("true", 1, None, [True], {}),
    "stream_options": ("yes", 1, [], {"include_usage": "yes"}, {"include_usage": None}),
    "tool_choice": (
        5, ["x"], "required", "none", "auto", {}, {"type": "function"},
        {"type": "function", "function": {"name": 5}}, {"function": "read_file"},
        {"type": "none"}, {"name": ["x"]},
    ),
    "tools": (
        {}, "tools", 0, [None], [5], [{"type": "function", "function": 5}],
        [{"function": {"name": 3, "parameters": "x"}}],
        [{"function": {"name": "f", "parameters": {"properties": {"a": 1}}}}],
        [{"function": {"name": "f", "description": {"d": [1]}, "parameters": {
            "type": "object", "properties": {"a": {"type": ["string"], "enum": 5}},
            "required": 3}}}],
        [{"name": "bare", "parameters": {"type": "object", "properties": {
            "a": {"type": "array", "items": {"type": "object", "properties": 7}}}}}],
        [{"type": "web_search"}, {"input_schema": {}, "name": "anthropic_style"}],
    ),
}  # fmt: skip
MESSAGE_FIELDS = ("role", "content", "tool_calls", "tool_call_id", "name", "function_call", "x")
_MESSAGE_VALUES: dict[str, tuple[Any, ...]] = {
    "role": (None, 5, ["user"], {"r": 1}, "", "tool", "function", "robot", "USER", "user\x00"),
    "content": (5, {"text": "x"}, [5], [[]], True, None, ""),
    "tool_calls": ({}, "calls", 5, [None], [5], [[]], []),
    "tool_call_id": (None, 5, ["call_1"], "", "call_1", "call_999"),
    "name": (5, None, ["n"], {"n": 1}, ""),
    "function_call": ("f", 5, {"name": 5, "arguments": {}}, {"arguments": None}),
}  # fmt: skip
CONTENT_PARTS: tuple[Any, ...] = (
    {"type": "hologram", "data": "x"}, {"type": "text", "text": 5}, {"type": "text"},
    {"type": "text", "text": None}, {"type": "image_url", "image_url": 3},
    {"type": "image_url", "image_url": {"url": 5, "detail": ["low"]}},
    {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
    {"type": "file", "file": {"file_id": "f"}}, {"type": 5}, {"type": None}, {},
    {"type": "thinking", "thinking": {"t": 1}}, {"type": "redacted_thinking"},
    7, None, "bare string", ["nested"], {"text": "no type"},
)  # fmt: skip
CALL_FIELDS = ("id", "type", "function", "name", "arguments", "whole")
_CALL_VALUES: dict[str, tuple[Any, ...]] = {
    "id": (None, 5, "", ["call_1"], {"id": 1}),
    "type": (None, 5, "not_function", ["function"]),
    "function": (None, 5, "f", [], {}, {"name": "f"}, {"arguments": "{}"}),
    "name": (None, 5, ["f"], {"n": 1}, "", "\x00"),
    "arguments": ({"path": "x"}, 5, None, [1, 2], True, "not json {", "\ud800", ""),
    "whole": (None, 5, "call", [], [{"id": "x"}]),
}  # fmt: skip


def _pick(draw: st.DrawFn, choices: tuple[Any, ...]) -> Any:
    """A listed value (fresh copy) or, one time in four, any weird value."""
    if draw(st.integers(0, 3)) == 0:
        return draw(weird_values)
    return json.loads(json.dumps(draw(st.sampled_from(choices))))


def _messages(body: Body) -> list[Any]:
    messages = body.get("messages")
    return messages if isinstance(messages, list) else []


def _calls(body: Body) -> list[dict[str, Any]]:
    """Every tool call (a dict) of every assistant message."""
    out: list[dict[str, Any]] = []
    for message in _messages(body):
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        if isinstance(calls, list):
            out.extend(c for c in calls if isinstance(c, dict))
    return out


def mutate_top_field(draw: st.DrawFn, body: Body) -> None:
    field = draw(st.sampled_from(TOP_FIELDS))
    body[field] = _pick(draw, _FIELD_VALUES.get(field, (None,)))


def drop_top_field(draw: st.DrawFn, body: Body) -> None:
    body.pop(draw(st.sampled_from(("model", "messages"))), None)


def mutate_message(draw: st.DrawFn, body: Body) -> None:
    messages = _messages(body)
    if not messages:
        return
    i = draw(st.integers(0, len(messages) - 1))
    action = draw(st.integers(0, 5))
    if action == 0 or not isinstance(messages[i], dict):
        messages[i] = draw(weird_values)
    elif action == 1:
        messages[i].pop("role", None)
    else:
        field = draw(st.sampled_from(MESSAGE_FIELDS))
        messages[i][field] = _pick(draw, _MESSAGE_VALUES.get(field, (None,)))


def mutate_tool_call(draw: st.DrawFn, body: Body) -> None:
    calls = _calls(body)
    if not calls:
        mutate_message(draw, body)
        return
    call = draw(st.sampled_from(calls))
    field = draw(st.sampled_from(CALL_FIELDS))
    value = _pick(draw, _CALL_VALUES[field])
    function = call.get("function")
    if field in ("name", "arguments") and isinstance(function, dict):
        function[field] = value
    elif field == "whole":
        call.clear()
        call["weird"] = value
    else:
        call[field] = value


def unknown_content_parts(draw: st.DrawFn, body: Body) -> None:
    messages = [m for m in _messages(body) if isinstance(m, dict)]
    if not messages:
        return
    message = draw(st.sampled_from(messages))
    parts = draw(st.lists(st.sampled_from(CONTENT_PARTS), min_size=1, max_size=4))
    if draw(st.booleans()):
        parts.append({"type": "text", "text": draw(nasty_text)})
    message["content"] = json.loads(json.dumps(parts))


def nasty_strings(draw: st.DrawFn, body: Body) -> None:
    """Lone surrogates, NUL and friends inside otherwise valid string fields."""
    messages = [m for m in _messages(body) if isinstance(m, dict)]
    if not messages:
        return
    message = draw(st.sampled_from(messages))
    text = draw(nasty_text)
    content = message.get("content")
    if isinstance(content, str) and draw(st.booleans()):
        cut = draw(st.integers(0, len(content)))
        message["content"] = content[:cut] + text + content[cut:]
    else:
        message[draw(st.sampled_from(("content", "name", "x_extra")))] = text


def broken_structure(draw: st.DrawFn, body: Body) -> None:
    """Duplicate and missing tool_call_ids, orphan results, results before their calls."""
    body["messages"] = draw(broken_conversations(max_result_chars=3_000)).messages


def many_messages(draw: st.DrawFn, body: Body) -> None:
    """Thousands of messages: one small conversation repeated."""
    unit = draw(conversations(max_turns=2, max_steps=2, max_result_chars=200))
    repeats = draw(st.integers(1000, 5000)) // len(unit) + 1
    messages = [json.loads(json.dumps(m)) for _ in range(repeats) for m in unit]
    for k, message in enumerate(messages):  # keep tool call ids unique across the copies
        _suffix_ids(message, f"_{k}")
    body["messages"] = messages


def _suffix_ids(message: Any, suffix: str) -> None:
    if not isinstance(message, dict):
        return
    for call in message.get("tool_calls") or ():
        call["id"] = f"{call['id']}{suffix}"
    if isinstance(message.get("tool_call_id"), str):
        message["tool_call_id"] = message["tool_call_id"] + suffix


def splice_point(draw: st.DrawFn, body: Body) -> None:
    """Mark one value (an unknown field, a content, arguments) for a raw fragment."""
    messages = [m for m in _messages(body) if isinstance(m, dict)]
    where = draw(st.integers(0, 3))
    functions = [c["function"] for c in _calls(body) if isinstance(c.get("function"), dict)]
    if where == 1 and messages:
        draw(st.sampled_from(messages))["content"] = SPLICE
    elif where == 2 and functions:
        draw(st.sampled_from(functions))["arguments"] = SPLICE
    elif where == 3 and messages:
        draw(st.sampled_from(messages))["x_splice"] = SPLICE
    else:
        body["x_splice"] = SPLICE


MUTATIONS: tuple[Mutation, ...] = (
    mutate_top_field, mutate_top_field, drop_top_field, mutate_message, mutate_message,
    mutate_tool_call, mutate_tool_call, unknown_content_parts, nasty_strings, nasty_strings,
    broken_structure, many_messages,
)  # fmt: skip


@st.composite
def hostile_requests(draw: st.DrawFn, *, allow_many: bool = True) -> Body:
    """A request body with one to three hostile mutations (see the module docstring)."""
    body: Body = draw(requests(max_turns=4, max_steps=3, max_result_chars=6_000))
    mutations = MUTATIONS if allow_many else MUTATIONS[:-1]
    for mutation in draw(st.lists(st.sampled_from(mutations), min_size=1, max_size=3)):
        mutation(draw, body)
    return body


def encode(value: Any) -> bytes:
    """UTF-8 JSON bytes of a generated value; with lone surrogates in it, ASCII JSON where they
    are ``\\udXXX`` escapes (as a client in another language sends them). Integers stay exact."""
    text = json.dumps(value, ensure_ascii=False)
    try:
        return text.encode()
    except UnicodeEncodeError:
        return json.dumps(value, ensure_ascii=True).encode()


def _nested(depth: int, kind: int) -> bytes:
    if kind == 0:
        return b"[" * depth + b"]" * depth
    if kind == 1:
        return b'{"a":' * depth + b"1" + b"}" * depth
    return b'[{"type":"text","text":' * depth + b'"x"' + b"}]" * depth


DEPTHS = (64, 255, 256, 600, 900, 1000, 1020, 1023, 1024, 1025, 10_000)
FRAGMENTS = (
    b"1e400", b"-1e400", b"1e-400", b"1" + b"0" * 30, b"-" + b"9" * 25, b"18446744073709551616",
    b"-9223372036854775809", b"123456789012345678901234567890.5", b"NaN", b"Infinity",
    b"-Infinity", b"undefined", b'"\\ud800"', b'"a\\udc00b"', b'"\\ud83d"', b'"\\udfff\\ud800"',
    b'"\\ud83d\\ude00"', b'"\xff\xfe"', b'"\xc3\x28"', b'"\xed\xa0\x80"', b'"\xf8\x88\x80\x80\x80"',
    b'"a\x00b"', b'"a\\u0000b"', b'"\x01\x1f"', b'"\\u0000"', b"0x10", b"01", b"+1", b"'single'",
)  # fmt: skip
raw_fragments = st.one_of(
    st.sampled_from(FRAGMENTS),
    st.builds(_nested, st.sampled_from(DEPTHS), st.integers(0, 2)),
)


@st.composite
def spliced_bodies(draw: st.DrawFn) -> bytes:
    """A hostile request with one value replaced by a raw JSON (or not-quite-JSON) fragment."""
    body = draw(hostile_requests(allow_many=False))
    splice_point(draw, body)
    return encode(body).replace(_SPLICED, draw(raw_fragments), 1)


@st.composite
def broken_wholes(draw: st.DrawFn) -> bytes:
    """A body broken as a whole rather than at one value."""
    raw = encode(draw(requests(max_turns=2, max_steps=2, max_result_chars=500)))
    kind = draw(st.integers(0, 8))
    if kind == 0:
        return raw[: draw(st.integers(0, len(raw) - 1))]
    if kind == 1:
        return draw(st.sampled_from((b"", b" ", b"\n\t ", b"null", b"[]", b'"x"', b"1", b"{}")))
    if kind == 2:
        return b"\xef\xbb\xbf" + raw
    if kind == 3:
        return raw.decode().encode(draw(st.sampled_from(("utf-16", "utf-32", "utf-16-be"))))
    if kind == 4:
        return raw + draw(st.sampled_from((b"x", b"{}", b"\x00", b" ,", b"]")))
    if kind == 5:
        return raw.replace(b"{", b'{"model":5,', 1)  # a duplicate key (the last one wins)
    if kind == 6:
        at = draw(st.integers(0, len(raw)))
        return raw[:at] + draw(st.binary(min_size=1, max_size=8)) + raw[at:]
    if kind == 7:
        return draw(st.binary(max_size=64))
    return b"[" + raw + b"]"


def hostile_bodies() -> st.SearchStrategy[bytes]:
    """Everything above, as wire bytes."""
    return st.one_of(hostile_requests().map(encode), spliced_bodies(), broken_wholes())
