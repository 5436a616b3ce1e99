"""Hypothesis strategies for hostile OpenAI Responses bodies (`POST /v1/responses`).

* ``responses_requests()`` -> ``dict``: a sound request: `input` is an agent history of
  messages (typed or not, string or parts content), reasoning items (with and without
  `encrypted_content` and ids) before `function_call` / `custom_tool_call` / `shell_call` /
  `local_shell_call` pairs, built-in calls that hold their own result, and plenty of text.
* ``hostile_responses_requests()`` -> ``dict``: such a body with one to three mutations: odd
  `input` shapes (a string, an object, items without `type`, unknown item types, content of the
  wrong kind), calls without outputs, outputs without calls, duplicate call ids, wrong types for
  every top-level field (`stream` as a non-bool, `previous_response_id` beside `input`), tools of
  every kind including one named like the proxy's read tool, lone surrogates and NUL.
* ``hostile_responses_bodies()`` -> ``bytes``: those, or one of them with a raw JSON fragment
  spliced in (`hostile.raw_fragments`), or a body broken as a whole.
"""

from __future__ import annotations

import json
from typing import Any

from hostile import SPLICE, encode, nasty_text, raw_fragments, weird_values
from hypothesis import strategies as st

Body = dict[str, Any]
_SPLICED = json.dumps(SPLICE).encode()
WORDS = ("alpha", "beta", "数据", "🙂", "line", "def", "return", "\"q\"", "\n", "0x1F", "ok")
TOOLS: tuple[Any, ...] = (
    {"type": "function", "name": "shell", "parameters": {"type": "object", "properties": {
        "cmd": {"type": "string"}}}, "strict": False},
    {"type": "custom", "name": "apply_patch", "description": "Apply a patch",
     "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}},
    {"type": "web_search"}, {"type": "web_search_preview", "search_context_size": "low"},
    {"type": "file_search", "vector_store_ids": ["vs_1"]}, {"type": "local_shell"},
    {"type": "shell"}, {"type": "computer_use_preview", "display_width": 1024,
                        "display_height": 768, "environment": "browser"},
    {"type": "mcp", "server_label": "m", "server_url": "https://example.invalid/mcp"},
    {"type": "image_generation"}, {"type": "code_interpreter", "container": {"type": "auto"}},
    {"type": "function", "name": "read_context_artifact", "description": "the client's own",
     "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}},
    {"type": "function", "name": "search_context_artifact", "parameters": {"type": "object"}},
)  # fmt: skip


def _text(draw: st.DrawFn, big: bool = False) -> str:
    size = draw(st.sampled_from((3, 20, 200, 1500, 6000) if big else (1, 3, 8)))
    words = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=6))
    return (" ".join(words) + " ") * (size // 8 + 1)


def _content(draw: st.DrawFn, text: str, part: str) -> Any:
    kind = draw(st.integers(0, 2))
    if kind == 0:
        return text
    parts = [{"type": part, "text": text}]
    return [*parts, {"type": part, "text": "."}] if kind == 2 else parts


def _message(draw: st.DrawFn, role: str, text: str) -> Body:
    part = "output_text" if role == "assistant" else "input_text"
    message: Body = {"role": role, "content": _content(draw, text, part)}
    if draw(st.booleans()):
        message = {"type": "message", **message}
    return message


def _reasoning(draw: st.DrawFn, key: str) -> Body:
    item: Body = {"type": "reasoning", "summary": []}
    if draw(st.booleans()):
        item["id"] = f"rs_{key}"
    if draw(st.integers(0, 3)):
        item["encrypted_content"] = "gAAAAB" + key + "x" * draw(st.sampled_from((8, 400)))
    if draw(st.booleans()):
        item["summary"] = [{"type": "summary_text", "text": f"thinking {key}"}]
    if item == {"type": "reasoning", "summary": []}:  # two bare items would be one and the same
        item["id"] = f"rs_{key}"
    return item


def _pair(draw: st.DrawFn, call_id: str) -> list[Body]:
    kind = draw(st.integers(0, 4))
    result = _text(draw, big=True)
    if kind == 1:
        call = {"type": "custom_tool_call", "call_id": call_id, "name": "apply_patch",
                "input": "*** Begin Patch"}  # fmt: skip
        return [call, {"type": "custom_tool_call_output", "call_id": call_id, "output": result}]
    if kind == 2:
        call = {"type": "shell_call", "call_id": call_id, "action": {"commands": ["ls"]},
                "status": "completed"}  # fmt: skip
        output = [{"stdout": result, "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}]
        return [call, {"type": "shell_call_output", "call_id": call_id, "output": output}]
    if kind == 3:
        call = {"type": "local_shell_call", "id": f"ls_{call_id}", "call_id": call_id,
                "action": {"type": "exec", "command": ["ls"], "env": {}},
                "status": "completed"}  # fmt: skip
        return [call, {"type": "local_shell_call_output", "id": call_id, "output": result}]
    call = {"type": "function_call", "call_id": call_id, "name": "shell",
            "arguments": json.dumps({"cmd": "cat f"})}  # fmt: skip
    if draw(st.booleans()):
        call["id"] = f"fc_{call_id}"
    output: Any = result
    if draw(st.integers(0, 3)) == 0:
        output = [{"type": "input_text", "text": result}]
    return [call, {"type": "function_call_output", "call_id": call_id, "output": output}]


def _step(draw: st.DrawFn, key: str) -> list[Body]:
    """One step of the model: reasoning, then a call and its output (or a built-in call)."""
    head = [_reasoning(draw, key)] if draw(st.booleans()) else []
    kind = draw(st.integers(0, 5))
    if kind == 0:
        search = {"type": "web_search_call", "id": f"ws_{key}", "status": "completed",
                  "action": {"type": "search", "query": "q"}}  # fmt: skip
        return [*head, search]
    if kind == 1:
        return [*head, _message(draw, "assistant", _text(draw))]
    return head + _pair(draw, f"call_{key}")


@st.composite
def responses_requests(draw: st.DrawFn, max_turns: int = 4) -> Body:
    """A sound Responses request (its pairs and reasoning items as the API wants them)."""
    items: list[Any] = []
    if draw(st.booleans()):
        items.append({"type": "message", "role": "developer", "content": "Be brief."})
    for turn in range(draw(st.integers(1, max_turns))):
        items.append(_message(draw, "user", f"question {turn}: " + _text(draw)))
        for step in range(draw(st.integers(0, 3))):
            items += _step(draw, f"{turn}_{step}")
        items.append(_message(draw, "assistant", _text(draw)))
    items.append(_message(draw, "user", "and now?"))
    body: Body = {"model": draw(st.sampled_from(("gpt-5", "gpt-4.1", "o4-mini"))), "input": items}
    if draw(st.booleans()):
        body["instructions"] = "You are a careful assistant."
    if draw(st.booleans()):
        body["tools"] = json.loads(json.dumps(draw(st.lists(st.sampled_from(TOOLS), max_size=4))))
    if draw(st.booleans()):
        body["store"] = False
        body["include"] = ["reasoning.encrypted_content"]
    body["stream"] = draw(st.booleans())
    return body


# -- mutations --------------------------------------------------------------------------------

TOP_VALUES: dict[str, tuple[Any, ...]] = {
    "model": (5, None, "", ["gpt-5"], "gpt-5\x00", "x" * 3000),
    "input": ("", "hi", {}, 3, None, [], [None], [[]], {"role": "user", "content": "x"},
              [{"role": "user"}], [{"type": "message"}], ["bare"], [{}]),
    "instructions": (5, [], [{"role": "system", "content": "s"}], [None], {"x": 1}, None),
    "stream": ("true", 1, 0, None, [True], {}, "false"),
    "previous_response_id": ("resp_123", 5, ["resp"], {}, ""),
    "conversation": ("conv_1", {"id": "conv_1"}, 5),
    "tools": ({}, "tools", [None], [5], [{}], [{"type": "function"}],
              [{"type": "function", "name": 5, "parameters": "x"}], [{"type": "hologram"}],
              [{"type": "function", "name": "read_context_artifact"}]),
    "tool_choice": (5, "required", "none", {"type": "function", "name": "read_context_artifact"},
                    {"type": "function"}, {"type": "hologram"}, ["x"]),
    "max_output_tokens": (-1, 0, 10**30, 1.5, True, "100", None),
    "reasoning": ({"effort": 5}, "high", [], {"summary": "auto", "effort": "high"}),
    "text": ({"format": {"type": "json_schema"}}, "x", 5),
    "include": ("x", [5], ["reasoning.encrypted_content", None]),
    "store": ("yes", 1, None),
    "parallel_tool_calls": ("no", 2),
    "metadata": ([], {"k": {"n": 1}}),
    "x_unknown": (None,),
}  # fmt: skip
ITEM_TYPES = (
    None, 5, "", "hologram", "message", "function_call", "function_call_output", "reasoning",
    "item_reference", "mcp_list_tools", "FUNCTION_CALL", "custom_tool_call_output",
    "computer_call_output", "apply_patch_call", "apply_patch_call_output",
)  # fmt: skip
ITEM_FIELDS: dict[str, tuple[Any, ...]] = {
    "role": (None, 5, "", "robot", "tool", "system", "developer", "assistant", "user\x00"),
    "content": (5, None, "", [5], [[]], [{"type": "hologram"}], [{"type": "input_text"}],
                [{"type": "input_image", "image_url": "data:x"}], {"text": "x"}),
    "call_id": (None, 5, "", ["c"], "call_0_0", "call_999"),
    "output": (None, 5, "", [5], {"o": 1}, [{"type": "input_text", "text": 5}]),
    "arguments": ({"a": 1}, 5, None, "not json {", ""),
    "name": (None, 5, "", "read_context_artifact", "search_context_artifact_ctxproxy"),
    "encrypted_content": (None, 5, "", ["x"]),
    "summary": (None, "x", [5], [{"type": "summary_text"}]),
    "id": (None, 5, "", "rs_dup"),
    "status": (5, "nope"),
}  # fmt: skip


def _pick(draw: st.DrawFn, choices: tuple[Any, ...]) -> Any:
    if draw(st.integers(0, 3)) == 0:
        return draw(weird_values)
    return json.loads(json.dumps(draw(st.sampled_from(choices))))


def _items(body: Body) -> list[Any]:
    items = body.get("input")
    return items if isinstance(items, list) else []


def _dicts(body: Body, *types: str) -> list[Body]:
    out = [i for i in _items(body) if isinstance(i, dict)]
    return [i for i in out if i.get("type") in types] if types else out


def mutate_top(draw: st.DrawFn, body: Body) -> None:
    field = draw(st.sampled_from(sorted(TOP_VALUES)))
    body[field] = _pick(draw, TOP_VALUES[field])


def drop_top(draw: st.DrawFn, body: Body) -> None:
    body.pop(draw(st.sampled_from(("model", "input"))), None)


def mutate_item(draw: st.DrawFn, body: Body) -> None:
    items = _items(body)
    if not items:
        return
    i = draw(st.integers(0, len(items) - 1))
    action = draw(st.integers(0, 5))
    if action == 0 or not isinstance(items[i], dict):
        items[i] = draw(weird_values)
    elif action == 1:
        items[i].pop("type", None)
    elif action == 2:
        items[i]["type"] = _pick(draw, ITEM_TYPES)
    else:
        field = draw(st.sampled_from(sorted(ITEM_FIELDS)))
        items[i][field] = _pick(draw, ITEM_FIELDS[field])


def break_pairs(draw: st.DrawFn, body: Body) -> None:
    """A call without its output, an output without its call, a duplicate call id, an output
    before its call, or a reasoning item moved away from its call."""
    items = _items(body)
    calls = [k for k, i in enumerate(items) if isinstance(i, dict) and "call_id" in i]
    if not calls:
        items.insert(len(items) // 2, {"type": "function_call_output", "call_id": "call_x",
                                       "output": "orphan"})  # fmt: skip
        return
    k = draw(st.sampled_from(calls))
    action = draw(st.integers(0, 3))
    if action == 0:
        del items[k]
    elif action == 1:
        items.insert(draw(st.integers(0, len(items))), json.loads(json.dumps(items[k])))
    elif action == 2:
        items.insert(draw(st.integers(0, len(items))), items.pop(k))
    else:
        reasoning = [r for r, i in enumerate(items) if isinstance(i, dict)
                     and i.get("type") == "reasoning"]  # fmt: skip
        at = draw(st.sampled_from(reasoning)) if reasoning else k
        items.append(items.pop(at))


def nasty(draw: st.DrawFn, body: Body) -> None:
    items = _dicts(body)
    if not items:
        return
    item = draw(st.sampled_from(items))
    key = draw(st.sampled_from(("content", "output", "arguments", "name", "x_extra")))
    value = item.get(key)
    text = draw(nasty_text)
    item[key] = value + text if isinstance(value, str) and draw(st.booleans()) else text


def tools_of_every_kind(draw: st.DrawFn, body: Body) -> None:
    body["tools"] = json.loads(json.dumps(draw(st.lists(st.sampled_from(TOOLS), min_size=1))))
    if draw(st.booleans()):
        body["tool_choice"] = _pick(draw, TOP_VALUES["tool_choice"])


def string_input(draw: st.DrawFn, body: Body) -> None:
    body["input"] = draw(st.one_of(nasty_text, st.just("x" * 30_000), st.just("hello")))


def many_tiny_items(draw: st.DrawFn, body: Body) -> None:
    count = draw(st.sampled_from((2000, 10_000)))
    items: list[Any] = []
    for k in range(count // 4):
        items += [{"role": "user", "content": f"q{k}"},
                  {"type": "function_call", "call_id": f"t{k}", "name": "ls", "arguments": "{}"},
                  {"type": "function_call_output", "call_id": f"t{k}", "output": f"r{k}"},
                  {"role": "assistant", "content": f"a{k}"}]  # fmt: skip
    body["input"] = [*items, {"role": "user", "content": "and now?"}]


def splice_point(draw: st.DrawFn, body: Body) -> None:
    items = _dicts(body)
    if items and draw(st.booleans()):
        item = draw(st.sampled_from(items))
        item[draw(st.sampled_from(("content", "output", "arguments", "x_splice")))] = SPLICE
    else:
        body[draw(st.sampled_from(("x_splice", "stream", "input")))] = SPLICE


MUTATIONS = (
    mutate_top, mutate_top, drop_top, mutate_item, mutate_item, mutate_item, break_pairs,
    break_pairs, nasty, tools_of_every_kind, string_input, many_tiny_items,
)  # fmt: skip


@st.composite
def hostile_responses_requests(draw: st.DrawFn, *, allow_many: bool = True) -> Body:
    body: Body = draw(responses_requests())
    mutations = MUTATIONS if allow_many else MUTATIONS[:-1]
    for mutation in draw(st.lists(st.sampled_from(mutations), min_size=1, max_size=3)):
        mutation(draw, body)
    return body


@st.composite
def _spliced(draw: st.DrawFn) -> bytes:
    body = draw(hostile_responses_requests(allow_many=False))
    splice_point(draw, body)
    return encode(body).replace(_SPLICED, draw(raw_fragments), 1)


@st.composite
def _broken_whole(draw: st.DrawFn) -> bytes:
    raw = encode(draw(responses_requests(max_turns=2)))
    kind = draw(st.integers(0, 4))
    if kind == 0:
        return raw[: draw(st.integers(0, len(raw) - 1))]
    if kind == 1:
        return draw(st.sampled_from((b"", b"null", b"[]", b'"x"', b"{}", b'{"input": []}')))
    if kind == 2:
        return b"\xef\xbb\xbf" + raw
    if kind == 3:
        return raw + b"]"
    return b"[" + raw + b"]"


def hostile_responses_bodies() -> st.SearchStrategy[bytes]:
    return st.one_of(hostile_responses_requests().map(encode), _spliced(), _broken_whole())
