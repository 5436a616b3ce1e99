"""Responses `input` items -> the neutral conversation (`proxy.engine.conversation`).

Pure functions over the item list; nothing here copies or changes an item.

* **System prefix** -- the leading items in the `system`/`developer` role (messages, and Codex's
  `additional_tools` item holding its tool definitions; `instructions` are outside the items:
  counted with the request's overhead, never reduced). Such an item after the prefix is an
  instruction unit of its own (protected where it stands).
* **Turn** -- opened by each `user` message.
* **Unit** -- a plain item, or a *tool exchange*: a run of the model's items (`reasoning`,
  assistant messages, calls) holding at least one call that an output answers by `call_id`
  (`function_call` + `function_call_output`, and the custom, computer, local shell, shell and
  apply-patch pairs), plus the run of outputs directly after it. The reasoning items stay in the
  unit of the calls they precede (`Unit.call_items` counts the run), byte for byte. Built-in tool
  calls that hold their own result (`web_search_call`, `file_search_call`, ...) are kept whole,
  in the unit of the model's run they are part of. Without a paired call, a run is cut into
  units of its reasoning items plus the item they precede.

Each problem's `reason` starts with `input[i]:` and its `param` is `input[i]`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from proxy.engine.conversation import Conversation, Problem, Turn, Unit
from proxy.formats.common import str_field
from proxy.formats.openai_responses.fields import (
    call_id_of,
    content_text,
    gives_instructions,
    is_call,
    is_model_item,
    is_output,
    item_type,
    role_of,
)
from proxy.jsonio import dumps


def parse_conversation(items: Sequence[Any]) -> Conversation:
    """Split `items` into system prefix, turns and units; report structural problems."""
    problems: list[Problem] = []
    n = len(items)
    system_end = 0
    while system_end < n and gives_instructions(items[system_end]):
        system_end += 1
    turns: list[Turn] = []
    units: list[Unit] = []
    turn_start = system_end
    i = system_end
    while i < n:
        if units and role_of(items[i]) == "user":
            turns.append(Turn(turn_start, i, tuple(units), role_of(items[turn_start]) != "user"))
            units, turn_start = [], i
        unit = _next_unit(items, i, problems)
        units.append(unit)
        i = unit.end
    if units:
        turns.append(Turn(turn_start, n, tuple(units), role_of(items[turn_start]) != "user"))
    problems.sort(key=lambda p: p.index)
    return Conversation(system_end, tuple(turns), tuple(problems))


def problem(index: int, call_id: str | None, text: str) -> Problem:
    param = f"input[{index}]"
    return Problem(index, call_id, f"{param}: {text}", param)


def _next_unit(items: Sequence[Any], i: int, problems: list[Problem]) -> Unit:
    item = items[i]
    if not isinstance(item, dict):
        problems.append(problem(i, None, "item is not an object"))
        return Unit(i, i + 1, "message")
    if is_output(item):
        problems.append(_stray_output(item, i))
        return Unit(i, i + 1, "message")
    if not is_model_item(item):
        if item_type(item) is None:
            problems.append(problem(i, None, "item has no 'type' nor 'role'"))
        return Unit(i, i + 1, "message", instruction=gives_instructions(item))
    j = i
    while j < len(items) and is_model_item(items[j]):
        j += 1
    if any(is_call(items[k]) for k in range(i, j)):
        return _exchange(items, i, j, problems)
    k = i
    while k < j and item_type(items[k]) == "reasoning":
        k += 1
    return Unit(i, min(k + 1, j), "message")


def _stray_output(item: dict[str, Any], i: int) -> Problem:
    call_id = call_id_of(item)
    kind = item_type(item)
    if call_id is None:
        return problem(i, None, f"{kind} has no string 'call_id'")
    return problem(i, call_id, f"{kind} for '{call_id}' does not follow its call")


def _call_ids(items: Sequence[Any], start: int, end: int, problems: list[Problem]) -> list[str]:
    ids: list[str] = []
    for k in range(start, end):
        if not is_call(items[k]):
            continue
        call_id = call_id_of(items[k])
        if not call_id:
            problems.append(problem(k, None, f"{item_type(items[k])} has no string 'call_id'"))
        elif call_id in ids:
            problems.append(problem(k, call_id, f"call id '{call_id}' appears more than once"))
        else:
            ids.append(call_id)
    return ids


def _exchange(items: Sequence[Any], start: int, head_end: int, problems: list[Problem]) -> Unit:
    """The model's run `items[start:head_end]` (with calls) and the outputs directly after it."""
    ids = _call_ids(items, start, head_end, problems)
    pending, answered = set(ids), set()
    n = len(items)
    j = head_end
    while j < n and is_output(items[j]):
        call_id = call_id_of(items[j])
        if call_id is None:
            problems.append(problem(j, None, f"{item_type(items[j])} has no string 'call_id'"))
        elif call_id in pending:
            pending.remove(call_id)
            answered.add(call_id)
        elif call_id in answered:
            problems.append(problem(j, call_id, f"output for '{call_id}' answers a call twice"))
        else:
            text = f"output for '{call_id}' has no matching call before it"
            problems.append(problem(j, call_id, text))
        j += 1
    where = f"before input[{j}]" if j < n else "before the end of the input"
    for call_id in ids:
        if call_id in pending:
            index = next(k for k in range(start, head_end) if call_id_of(items[k]) == call_id)
            problems.append(problem(index, call_id, f"call '{call_id}' has no output {where}"))
    return Unit(start, j, "tool_exchange", tuple(ids), call_items=head_end - start)


_CANONICAL_FIELDS = ("type", "role", "call_id", "name", "arguments", "input", "encrypted_content")


def canonical_item(item: Any) -> bytes:
    """What an item says, as bytes an SDK's re-serialisation leaves alone: type (`message` for
    a typeless message), role, call id, name, arguments, text (content or output; parts joined)
    and encrypted reasoning; ids, statuses, annotations and the like are left out."""
    if not isinstance(item, dict):
        return dumps(item)
    picked: dict[str, Any] = {"type": item_type(item)}
    for key in _CANONICAL_FIELDS[1:]:
        value = str_field(item, key)
        if value is not None:
            picked[key] = value
    text = content_text(item)
    if text is not None:
        picked["text"] = text
    elif "content" in item or "output" in item:
        picked["value"] = item.get("content", item.get("output"))
    elif "tools" in item:  # Codex's additional_tools, a tool search's output
        picked["value"] = item["tools"]
    return dumps(picked)
