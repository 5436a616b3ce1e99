"""Architecture: the engine and the completion loop name no wire field of any client format (the
adapters in `proxy/formats/` do; the engine asks them through `proxy.engine.wire.WireFormat`, the
completion loop through `proxy.formats.base.ClientFormat`).

Every string (or bytes) literal in `proxy/engine/**/*.py` and `proxy/completion/**/*.py`
(docstrings aside) is checked against the field names below. Role values the policy itself speaks
of (`user`, `system`, `developer` in `drop_turns.notice_role`, pin rules) are policy vocabulary,
not wire access, and are not listed.
"""

from __future__ import annotations

import ast
from pathlib import Path

PROXY = Path(__file__).resolve().parents[2] / "proxy"
ENGINE = PROXY / "engine"
COMPLETION = PROXY / "completion"

OPENAI_CHAT_FIELDS = frozenset(
    {
        "messages",
        "role",
        "content",
        "name",
        "tool_calls",
        "tool_call_id",
        "function_call",
        "function",
        "arguments",
        "id",
        "type",
        "text",
        "image_url",
        "tools",
        "tool_choice",
        "parameters",
        "model",
        "stream",
        "max_tokens",
        "max_completion_tokens",
        "assistant",
        # the answer ("message" and "tool" are the engine's own words too: a message unit, an
        # artifact's tool)
        "n",
        "choices",
        "delta",
        "index",
        "finish_reason",
        "usage",
        "error",
        "parallel_tool_calls",
        "[DONE]",
    }
)
ANTHROPIC_MESSAGES_FIELDS = frozenset(
    {
        "tool_use",
        "tool_use_id",
        "input_schema",
        "thinking",
        "redacted_thinking",
        "signature",
        "cache_control",
        "content_block_delta",
        "message_delta",
        "message_stop",
        "stop_reason",
    }
)
OPENAI_RESPONSES_FIELDS = frozenset(
    {
        "input",
        "instructions",
        "call_id",
        "function_call_output",
        "reasoning",
        "encrypted_content",
        "max_output_tokens",
        "output",
        "response.completed",
    }
)
WIRE_FIELDS = OPENAI_CHAT_FIELDS | ANTHROPIC_MESSAGES_FIELDS | OPENAI_RESPONSES_FIELDS


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the constants that are docstrings (of modules, classes, functions, attributes)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for k, statement in enumerate(body):
            is_doc = isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
            first = k == 0 and isinstance(
                node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
            )
            after_assignment = k > 0 and isinstance(body[k - 1], ast.Assign | ast.AnnAssign)
            if is_doc and (first or after_assignment):
                found.add(id(statement.value))
    return found


def wire_literals(source: str) -> list[tuple[int, str]]:
    """(line, literal) of every non-docstring string or bytes constant in `source` that names a
    field."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    return sorted(
        (node.lineno, text)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and id(node) not in docs
        and (text := _text(node.value)) in WIRE_FIELDS
    )


def _text(value: object) -> str | None:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value if isinstance(value, str) else None


def _leaks(files: list[Path]) -> list[str]:
    return [
        f"{path.relative_to(PROXY.parent)}:{line}: {literal!r}"
        for path in files
        for line, literal in wire_literals(path.read_text(encoding="utf-8"))
    ]


def test_the_engine_names_no_wire_field() -> None:
    files = sorted(ENGINE.rglob("*.py"))
    assert len(files) > 10  # the scan sees the engine
    leaks = _leaks(files)
    assert leaks == [], "wire fields belong in proxy/formats/:\n" + "\n".join(leaks)


def test_the_completion_loop_names_no_wire_field() -> None:
    files = sorted(COMPLETION.rglob("*.py"))
    assert len(files) >= 4  # the scan sees run, rounds, stream, reply
    leaks = _leaks(files)
    assert leaks == [], "wire fields belong in proxy/formats/:\n" + "\n".join(leaks)


def test_the_scan_finds_what_it_looks_for() -> None:
    source = '''
"""A module docstring naming messages and role is fine."""
limit: int = 0
"""So is an attribute docstring: max_tokens."""
def f(message):
    """And a function's: tool_calls."""
    return message.get("role"), message["tool_calls"], {"content": 1}, f"{message}[content]"
'''
    assert wire_literals(source) == [(7, "content"), (7, "role"), (7, "tool_calls")]
    assert wire_literals('chunk = {"usage": 1}\nend = b"[DONE]"') == [(1, "usage"), (2, "[DONE]")]
