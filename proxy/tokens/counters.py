"""Prompt token counting: tiktoken, HF `tokenizers` and estimate backends behind one protocol.

Message accounting follows litellm's `token_counter` (itself the OpenAI cookbook formula extended
to tools), so that OpenAI counts equal litellm's. Deliberate differences, all conservative:
- Values litellm skips (non-string fields other than `content`, unknown content parts, tool calls
  without a `function`) are counted as their JSON text instead of as nothing.
- `image_url` parts: 85 tokens at `detail: low`, otherwise the high-detail upper bound (1445);
  litellm counts an `auto` URL as 85 because it will not fetch it.
- `tools` with a system message present: litellm subtracts 4 (tools share the system turn); we
  keep them so that counts stay additive per message (`count_tools` never sees the messages).
- Like litellm, only a tool call's `arguments` are counted, not its id or function name.
- Tool definitions inside an item (Codex's Responses `additional_tools` item, a tool search's
  output) are counted as the request's `tools` are, not as their JSON text.
"""

from __future__ import annotations

import json
import math
import re
import threading
from pathlib import Path
from typing import Any, Protocol

import orjson

from proxy.tokens.backends import (
    ANTHROPIC_TOKENIZER,
    ENCODINGS,
    Count,
    chunked,
    load_hf,
    load_tiktoken,
    tokenizer_dir,
)
from proxy.tokens.blocks import (
    BLOCK_COSTS,
    block_tokens,
)
from proxy.tokens.cache import LruCache, cache_digest, message_key
from proxy.tokens.estimate import estimate_tokens
from proxy.tokens.tool_schema import render_tools

REPLY_PRIMER = 3  # every reply is primed with <|start|>assistant<|message|>
MESSAGE_FRAMING = 3  # <|start|>{role}\n{content}<|end|>
NAME_TOKENS = 1
ENCRYPTED_CHARS_PER_TOKEN = 16 / 3
"""An `encrypted_content` blob (Responses reasoning, base64) counts as the tokens it encodes, at
about 4 bytes a token (3 bytes per 4 base64 characters), not as the much longer count tiktoken
gives base64 text: the provider holds reasoning as tokens (and drops earlier turns' reasoning
altogether), so counting the encoding would overstate a long reasoning history several times."""
TOOLS_FRAMING = 9
TOOL_CHOICE_NONE = 1
TOOL_CHOICE_NAMED = 7
IMAGE_LOW_DETAIL_TOKENS = 85
IMAGE_HIGH_DETAIL_TOKENS = 1445  # 85 + 170 * 8 tiles: a 768x2000 image, the most high detail costs
DEFAULT_CACHE_SIZE = 50_000
METHOD_MEMO_ENTRIES = 1024

TEXT_FIELDS = {
    "text": "text",
    "thinking": "thinking",
    "redacted_thinking": "thinking",
    "compaction": "content",
    # OpenAI Responses parts
    "input_text": "text",
    "output_text": "text",
    "summary_text": "text",
    "reasoning_text": "text",
}
PART_LISTS = frozenset({"content", "summary", "output"})
"""Keys whose list value is counted part by part: message content, and the Responses API's
reasoning `summary` and call `output` lists."""

O200K_PREFIXES = ("gpt-4o", "chatgpt-4o", "gpt-4.1", "gpt-4.5", "o1", "o3", "o4", "codex-")
_LATER_GPT = re.compile(r"gpt-(\d+)")
"""`gpt-<N>` from 5 on (gpt-5, Codex's gpt-6.2-sol, ...) count with o200k_base, OpenAI's encoding
since gpt-4o, rather than the estimate."""
CL100K_PREFIXES = ("gpt-4", "gpt-3.5", "gpt-35")

class TokenCounter(Protocol):
    method: str

    def count_text(self, text: str) -> int: ...
    def count_message(self, message: Any) -> int: ...
    def count_tools(self, tools: Any, tool_choice: Any) -> int: ...
    def count_request(self, body: Any) -> int: ...


def resolve_tokenizer(model: str, tokenizer: str = "auto") -> str:
    """The backend for a model: `tiktoken:<encoding>`, `hf:<path>` (path may be empty = bundled
    Anthropic tokenizer) or `estimate`. Raises ValueError for an unknown setting."""
    if tokenizer.startswith("hf:"):
        return tokenizer
    name = tokenizer.removeprefix("tiktoken:")
    if name in ENCODINGS:
        return f"tiktoken:{name}"
    if tokenizer == "estimate":
        return "estimate"
    if tokenizer != "auto":
        choices = "auto, estimate, o200k_base, cl100k_base, hf:<path to tokenizer.json>"
        raise ValueError(f"Unknown tokenizer {tokenizer!r}; expected one of: {choices}")
    base = model.lower().rsplit("/", 1)[-1].removeprefix("ft:")
    later = _LATER_GPT.match(base)
    if base.startswith(O200K_PREFIXES) or (later is not None and int(later.group(1)) >= 5):
        return "tiktoken:o200k_base"
    if base.startswith(CL100K_PREFIXES):
        return "tiktoken:cl100k_base"
    if "claude" in base:
        return "hf:"
    return "estimate"


def json_text(value: Any) -> str:
    """JSON text of anything, never raising (deep or odd values degrade to their leaves)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        pass
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return _leaves_text(value)


def _leaves_text(value: Any) -> str:
    parts: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
            parts.extend(str(key) for key in item)
        elif isinstance(item, list | tuple):
            stack.extend(item)
            parts.append("[]")
        else:
            parts.append(str(item))
    return " ".join(parts)


class Counter:
    """A TokenCounter over one text-counting function, with per-message counts cached."""

    def __init__(self, method: str, count: Count, cache: LruCache) -> None:
        self.method = method
        self.count_text = count
        self._cache = cache

    def count_message(self, message: Any) -> int:
        digest = message_key(message)
        if digest is None:
            return self._message_tokens(message)
        key = (self.method, digest)
        cached = self._cache.get(key)
        if cached is None:
            cached = self._message_tokens(message)
            self._cache.put(key, cached)
        return cached

    def count_tools(self, tools: Any, tool_choice: Any) -> int:
        if not tools and tool_choice is None:
            return 0
        digest = cache_digest([tools, tool_choice])
        key = (self.method, "tools", digest)
        cached = self._cache.get(key) if digest is not None else None
        if cached is None:
            try:
                cached = self._tools_tokens(tools) + self._tool_choice_tokens(tool_choice)
            except RecursionError:
                cached = TOOLS_FRAMING + self._json([tools, tool_choice])
            if digest is not None:
                self._cache.put(key, cached)
        return cached

    def count_request(self, body: Any) -> int:
        if not isinstance(body, dict):
            return self.count_message(body) + REPLY_PRIMER
        messages = body.get("messages")
        if not isinstance(messages, list):
            messages = [] if messages is None else [messages]
        total = sum(self.count_message(message) for message in messages)
        return total + self.count_tools(body.get("tools"), body.get("tool_choice")) + REPLY_PRIMER

    def _json(self, value: Any) -> int:
        return self.count_text(json_text(value))

    def _message_tokens(self, message: Any) -> int:
        if not isinstance(message, dict):
            return MESSAGE_FRAMING + self._json(message)
        total = MESSAGE_FRAMING
        for key, value in message.items():
            if value is None:
                continue
            if key == "tool_calls":
                total += self._tool_calls_tokens(value)
            elif key == "encrypted_content" and isinstance(value, str):
                total += math.ceil(len(value) / ENCRYPTED_CHARS_PER_TOKEN)
            elif key == "function_call":
                total += self._arguments_tokens(value)
            elif isinstance(value, str):
                total += self.count_text(value) + (NAME_TOKENS if key == "name" else 0)
            elif key in PART_LISTS and isinstance(value, list):
                total += sum(self._part_tokens(part) for part in value)
            elif key == "tools" and isinstance(value, list):  # tool definitions in an item
                total += self._tools_tokens(value)
            else:
                total += self._json(value)
        return total

    def _tool_calls_tokens(self, calls: Any) -> int:
        if not isinstance(calls, list):
            return self._json(calls)
        total = 0
        for call in calls:
            function = call.get("function") if isinstance(call, dict) else None
            total += self._arguments_tokens(function) if function is not None else self._json(call)
        return total

    def _arguments_tokens(self, function: Any) -> int:
        if not isinstance(function, dict):
            return self._json(function)
        arguments = function.get("arguments", "")
        return self.count_text(arguments if isinstance(arguments, str) else json_text(arguments))

    def _part_tokens(self, part: Any) -> int:
        if isinstance(part, str):
            return self.count_text(part)
        kind = part.get("type") if isinstance(part, dict) else None
        if not isinstance(kind, str):  # a hostile `type` (an object, a list) is no known part
            return self._json(part)
        if kind in TEXT_FIELDS:
            text = part.get(TEXT_FIELDS[kind]) or ""
            return self.count_text(text if isinstance(text, str) else json_text(text))
        if kind == "image_url" or kind == "input_image":
            image = part.get("image_url") if kind == "image_url" else part
            low = isinstance(image, dict) and image.get("detail") == "low"
            return IMAGE_LOW_DETAIL_TOKENS if low else IMAGE_HIGH_DETAIL_TOKENS
        if kind in BLOCK_COSTS:  # Anthropic blocks: never their base64 counted as text
            return block_tokens(kind, part, self.count_text, self._json, self._part_tokens)
        return self._json(part)

    def _tools_tokens(self, tools: Any) -> int:
        if not tools:
            return 0
        if not isinstance(tools, list):
            return TOOLS_FRAMING + self._json(tools)
        text, rest = render_tools(tools)
        return TOOLS_FRAMING + self.count_text(text) + sum(self._json(value) for value in rest)

    def _tool_choice_tokens(self, choice: Any) -> int:
        match choice:
            case "none":
                return TOOL_CHOICE_NONE
            case {"function": {"name": str() as name}}:
                return TOOL_CHOICE_NAMED + self.count_text(name)
            case {"type": "none"}:
                return TOOL_CHOICE_NONE
            case {"name": str() as name}:
                return TOOL_CHOICE_NAMED + self.count_text(name)
            case str() | dict() | None:
                return 0
        return self._json(choice)


class TokenCounters:
    """Builds counters per model; owns the loaded tokenizers and the shared count cache."""

    def __init__(
        self, *, cache_size: int = DEFAULT_CACHE_SIZE, tokenizers: Path | None = None
    ) -> None:
        self.cache = LruCache(cache_size)
        self._tokenizers = tokenizers
        self._counters: dict[str, Counter] = {}
        self._methods: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()

    def for_model(self, model: str, tokenizer: str = "auto") -> TokenCounter:
        method = self._method(model, tokenizer)
        counter = self._counters.get(method)
        if counter is None:
            with self._lock:
                counter = self._counters.get(method) or self._build(method)
                self._counters[method] = counter
        return counter

    def loaded(self, model: str, tokenizer: str = "auto") -> bool:
        """Whether `for_model(model, tokenizer)` is ready without loading a tokenizer (a first
        load reads and builds it: 0.1-1 s of CPU, never to be done on the event loop)."""
        return self._method(model, tokenizer) in self._counters

    def _method(self, model: str, tokenizer: str) -> str:
        """`resolve_tokenizer`, remembered for the last `METHOD_MEMO_ENTRIES` pairs (asked
        twice per request; model names come from clients: bounded)."""
        key = (model, tokenizer)
        method = self._methods.get(key)
        if method is None:
            method = resolve_tokenizer(model, tokenizer)
            if len(self._methods) >= METHOD_MEMO_ENTRIES:
                self._methods.clear()
            self._methods[key] = method
        return method

    def _build(self, method: str) -> Counter:
        if method == "estimate":
            return Counter(method, estimate_tokens, self.cache)
        directory = self._tokenizers or tokenizer_dir()
        if method.startswith("tiktoken:"):
            count = load_tiktoken(method.removeprefix("tiktoken:"), directory)
            return Counter(method, chunked(count), self.cache)
        path = Path(method.removeprefix("hf:") or directory / ANTHROPIC_TOKENIZER)
        return Counter(f"hf:{path}", chunked(*load_hf(path)), self.cache)
