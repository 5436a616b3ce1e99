"""Chat Completions `messages` -> the neutral conversation (`proxy.engine.conversation`).

Pure functions over the `messages` list; nothing here copies or changes a message.

* **System prefix** -- the leading ``system``/``developer`` messages. A ``system``/``developer``
  message after the prefix is an instruction unit of its own (protected where it stands).
* **Turn** -- opened by each ``user`` message.
* **Unit** -- a plain message, or a *tool exchange*: an assistant message with non-empty
  ``tool_calls`` plus the ``tool`` messages directly following it (results of parallel calls may
  come in any order). Legacy functions: an assistant message with ``function_call`` plus the
  directly following ``role: "function"`` message is one exchange too, with empty
  ``tool_call_ids``. ``tool_calls: []`` (empty list) counts as no tool calls.

Each problem's ``reason`` starts with ``messages[i]:`` and its ``param`` is ``messages[i]``. Turns
and units are still returned, best effort: an exchange always spans its assistant message and the
whole run of ``tool`` messages directly after it (orphans in that run stay inside it), and any
other broken message is a unit of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from proxy.engine.conversation import Conversation, Problem, Turn, Unit
from proxy.formats.openai_chat.fields import content_text, function_of, role_of
from proxy.jsonio import dumps

_PREFIX_ROLES = frozenset({"system", "developer"})


def parse_conversation(messages: Sequence[Any]) -> Conversation:
    """Split ``messages`` into system prefix, turns and units; report structural problems."""
    problems: list[Problem] = []
    n = len(messages)
    system_end = 0
    while system_end < n and role_of(messages[system_end]) in _PREFIX_ROLES:
        system_end += 1

    turns: list[Turn] = []
    units: list[Unit] = []
    turn_start = system_end
    i = system_end
    while i < n:
        if units and role_of(messages[i]) == "user":
            leading = role_of(messages[turn_start]) != "user"
            turns.append(Turn(turn_start, i, tuple(units), leading))
            units = []
            turn_start = i
        unit = _next_unit(messages, i, problems)
        units.append(unit)
        i = unit.end
    if units:
        leading = role_of(messages[turn_start]) != "user"
        turns.append(Turn(turn_start, n, tuple(units), leading))

    problems.sort(key=_problem_index)
    return Conversation(system_end, tuple(turns), tuple(problems))


def problem(index: int, tool_call_id: str | None, text: str) -> Problem:
    """A problem with `messages[index]` (the reason starts with it, the param is it)."""
    param = f"messages[{index}]"
    return Problem(index, tool_call_id, f"{param}: {text}", param)


def _problem_index(p: Problem) -> int:
    return p.index


def _next_unit(messages: Sequence[Any], i: int, problems: list[Problem]) -> Unit:
    """The unit starting at ``messages[i]``; appends what is wrong with it to ``problems``."""
    message = messages[i]
    if not isinstance(message, dict):
        problems.append(problem(i, None, "message is not an object"))
        return Unit(i, i + 1, "message")
    role = message.get("role")
    if role == "user":
        return Unit(i, i + 1, "message")
    if role == "system" or role == "developer":
        return Unit(i, i + 1, "message", instruction=True)
    if role == "assistant":
        calls = message.get("tool_calls")
        if calls is not None and calls != []:
            return _tool_exchange(messages, i, calls, problems)
        if message.get("function_call") is not None:
            return _function_exchange(messages, i, problems)
    elif role == "tool":
        problems.append(_stray_tool_result(message, i))
    elif role == "function":
        problems.append(
            problem(
                i,
                None,
                "function result does not directly follow an assistant message with a "
                "function_call",
            )
        )
    elif "role" not in message:
        problems.append(problem(i, None, "message has no 'role'"))
    elif not isinstance(role, str):
        problems.append(problem(i, None, "'role' is not a string"))
    return Unit(i, i + 1, "message")


def _stray_tool_result(message: dict[str, Any], i: int) -> Problem:
    call_id = message.get("tool_call_id")
    if not isinstance(call_id, str):
        return problem(i, None, "tool message has no string 'tool_call_id'")
    return problem(
        i,
        call_id,
        f"tool result for '{call_id}' does not follow an assistant message with tool_calls",
    )


def _call_ids(message_index: int, calls: Any, problems: list[Problem]) -> list[str]:
    """The usable, distinct ids of an assistant message's ``tool_calls``, in order."""
    i = message_index
    if not isinstance(calls, list):
        problems.append(problem(i, None, "'tool_calls' is not a list"))
        return []
    ids: list[str] = []
    for k, call in enumerate(calls):
        call_id = call.get("id") if isinstance(call, dict) else None
        if not isinstance(call, dict):
            problems.append(problem(i, None, f"tool_calls[{k}] is not an object"))
        elif not isinstance(call_id, str) or not call_id:
            problems.append(problem(i, None, f"tool_calls[{k}] has no string 'id'"))
        elif call_id in ids:
            text = f"tool call id '{call_id}' appears more than once in tool_calls"
            problems.append(problem(i, call_id, text))
        else:
            ids.append(call_id)
    return ids


def _tool_exchange(messages: Sequence[Any], i: int, calls: Any, problems: list[Problem]) -> Unit:
    """An assistant message with tool_calls plus the run of tool messages directly after it."""
    ids = _call_ids(i, calls, problems)
    pending = set(ids)
    answered: set[str] = set()
    n = len(messages)
    j = i + 1
    while j < n:
        result = messages[j]
        if not isinstance(result, dict) or result.get("role") != "tool":
            break
        call_id = result.get("tool_call_id")
        if not isinstance(call_id, str):
            problems.append(problem(j, None, "tool message has no string 'tool_call_id'"))
        elif call_id in pending:
            pending.remove(call_id)
            answered.add(call_id)
        elif call_id in answered:
            problems.append(
                problem(
                    j,
                    call_id,
                    f"tool result for '{call_id}' answers a tool call that already has a result",
                )
            )
        else:
            problems.append(
                problem(
                    j,
                    call_id,
                    f"tool result for '{call_id}' has no matching tool call in the preceding "
                    "assistant message",
                )
            )
        j += 1
    if pending:
        where = f"before messages[{j}]" if j < n else "before the end of the messages"
        for call_id in ids:
            if call_id in pending:
                problems.append(problem(i, call_id, f"tool call '{call_id}' has no result {where}"))
    return Unit(i, j, "tool_exchange", tuple(ids))


def _function_exchange(messages: Sequence[Any], i: int, problems: list[Problem]) -> Unit:
    """Legacy: an assistant ``function_call`` plus the directly following ``function`` message."""
    if i + 1 < len(messages) and role_of(messages[i + 1]) == "function":
        return Unit(i, i + 2, "tool_exchange")
    problems.append(problem(i, None, "function_call has no function result in the next message"))
    return Unit(i, i + 1, "tool_exchange")


_CANONICAL_FIELDS = ("role", "name", "tool_call_id", "content")


def canonical_message(message: Any) -> bytes:
    """What a message says, as bytes an SDK's re-serialisation leaves alone: its role, name,
    `tool_call_id`, content (null and absent alike; text parts joined as text) and each tool
    call's id, name and arguments; other fields (`refusal: null`, `annotations: []`, ...) are
    left out."""
    if not isinstance(message, dict):
        return dumps(message)
    picked = {k: message.get(k) for k in _CANONICAL_FIELDS if message.get(k) is not None}
    text = content_text(message)
    if text is not None:
        picked["content"] = text
    calls = message.get("tool_calls")
    if isinstance(calls, list) and calls:
        picked["tool_calls"] = [_canonical_call(call) for call in calls]
    return dumps(picked)


def _canonical_call(call: Any) -> Any:
    if not isinstance(call, dict):
        return call
    function = function_of(call)
    return [call.get("id"), function.get("name"), function.get("arguments")]
