"""Token counting: parity with litellm and the OpenAI cookbook, additivity, caching, robustness."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path
from typing import Any

import pytest
from shared_tokens import counter_for, shared_counters

from proxy.tokens import counters as tokens
from proxy.tokens.counters import (
    IMAGE_HIGH_DETAIL_TOKENS,
    REPLY_PRIMER,
    Counter,
    LruCache,
    TokenCounters,
    estimate_tokens,
    resolve_tokenizer,
)

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "where": {"type": "object", "properties": {"lat": {"type": "number"}}},
                "exact": {"type": "boolean"},
            },
            "required": ["city"],
        },
    },
}
NO_ARGS = {"type": "function", "function": {"name": "now", "description": "Current time"}}
CALL = {
    "id": "call_abc123",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Paris", "unit": "celsius"}'},
}
SYSTEM = {"role": "system", "content": "You are a careful assistant. Answer briefly."}
USER = {"role": "user", "content": "What's the weather in Paris and in 東京 today?"}
ASSISTANT_CALLS = {"role": "assistant", "content": None, "tool_calls": [CALL, CALL]}
TOOL_RESULT = {
    "role": "tool",
    "tool_call_id": "call_abc123",
    "content": '{"temp": 21, "sky": "clear"}',
}
PARTS = {
    "role": "user",
    "content": [
        {"type": "text", "text": "Describe this picture."},
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png", "detail": "low"}},
        {"type": "text", "text": "And be concise."},
    ],
}

# (messages, tools, tool_choice); litellm subtracts 4 when tools and a system message coexist.
FIXTURES: list[tuple[list[dict[str, Any]], list[dict[str, Any]] | None, Any]] = [
    ([USER], None, None),
    ([SYSTEM, USER], None, None),
    ([SYSTEM, {**USER, "name": "alice"}], None, None),
    ([{"role": "user", "content": ""}], None, None),
    ([USER, ASSISTANT_CALLS, TOOL_RESULT, TOOL_RESULT], None, None),
    ([USER, {"role": "assistant", "content": "Let me check.", "tool_calls": [CALL]}], None, None),
    ([PARTS], None, None),
    ([SYSTEM, PARTS, {"role": "assistant", "content": "A cat."}], None, None),
    ([USER], [WEATHER], None),
    ([USER], [WEATHER, NO_ARGS], "auto"),
    ([USER], [WEATHER], "none"),
    ([USER], [WEATHER], {"type": "function", "function": {"name": "get_weather"}}),
    ([SYSTEM, USER, ASSISTANT_CALLS, TOOL_RESULT, TOOL_RESULT], [WEATHER, NO_ARGS], "required"),
    ([SYSTEM, USER], [WEATHER], None),
    ([{"role": "developer", "content": "Use metric units.\n\n" * 50}, USER], None, None),
    ([{"role": "user", "content": "word " * 3000}], None, None),  # > one 1024-char chunk
]
SYSTEM_WITH_TOOLS_DISCOUNT = 4


@pytest.fixture(scope="module")
def litellm() -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    return litellm


@pytest.fixture(scope="module")
def counters() -> TokenCounters:
    return shared_counters()


def _body(messages: list[Any], tools: Any, choice: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "m", "messages": messages}
    if tools is not None:
        body["tools"] = tools
    if choice is not None:
        body["tool_choice"] = choice
    return body


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-4"])
@pytest.mark.parametrize(("messages", "tools", "choice"), FIXTURES)
def test_openai_counts_equal_litellm(
    litellm: Any, counters: TokenCounters, model: str, messages: Any, tools: Any, choice: Any
) -> None:
    expected = litellm.token_counter(
        model=model, messages=messages, tools=tools, tool_choice=choice
    )
    if tools and any(m["role"] == "system" for m in messages):
        expected += SYSTEM_WITH_TOOLS_DISCOUNT
    assert counters.for_model(model).count_request(_body(messages, tools, choice)) == expected


def _cookbook(encoding: Any, messages: list[dict[str, str]]) -> int:
    """num_tokens_from_messages from the OpenAI cookbook (gpt-4o / gpt-4 branch)."""
    total = 0
    for message in messages:
        total += 3
        for key, value in message.items():
            total += len(encoding.encode(value))
            if key == "name":
                total += 1
    return total + 3


@pytest.mark.parametrize(
    ("model", "encoding"), [("gpt-4o", "o200k_base"), ("gpt-4", "cl100k_base")]
)
def test_plain_chat_equals_cookbook(
    counters: TokenCounters, monkeypatch: pytest.MonkeyPatch, model: str, encoding: str
) -> None:
    import tiktoken

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tokens.tokenizer_dir()))
    messages = [SYSTEM, {**USER, "name": "alice"}, {"role": "assistant", "content": "Sunny, 21°C."}]
    expected = _cookbook(tiktoken.get_encoding(encoding), messages)
    assert counters.for_model(model).count_request({"messages": messages}) == expected


@pytest.mark.parametrize("name", sorted(tokens.ENCODINGS))
def test_encoding_constants_match_tiktoken(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    import tiktoken
    from tiktoken_ext import openai_public

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tokens.tokenizer_dir()))
    reference = getattr(openai_public, name)()
    _, _, pattern = tokens.ENCODINGS[name]
    assert reference["pat_str"] == pattern
    sample = "Hello, wörld! 1234567 東京 🎉\n\n  def f(x): return x**2  "
    ours = counter_for("x", name).count_text(sample)
    assert ours == len(tiktoken.get_encoding(name).encode_ordinary(sample))


@pytest.mark.parametrize(("messages", "tools", "choice"), FIXTURES)
def test_counts_are_additive(
    counters: TokenCounters, messages: Any, tools: Any, choice: Any
) -> None:
    for model in ("gpt-4o", "claude-3-5-sonnet", "some-unknown-model"):
        counter = counters.for_model(model)
        parts = sum(counter.count_message(m) for m in messages) + counter.count_tools(tools, choice)
        assert counter.count_request(_body(messages, tools, choice)) == parts + REPLY_PRIMER


def test_image_detail_estimates(counters: TokenCounters) -> None:
    counter = counters.for_model("gpt-4o")
    low = counter.count_message(PARTS)
    high = {
        **PARTS,
        "content": [
            {**p, "image_url": {"url": "u"}} if "image_url" in p else p for p in PARTS["content"]
        ],
    }
    assert counter.count_message(high) - low == IMAGE_HIGH_DETAIL_TOKENS - 85


def test_responses_items_count_their_text_like_chat_messages(counters: TokenCounters) -> None:
    counter = counters.for_model("gpt-4o")
    text = "the output of a tool, " * 40
    chat = counter.count_message({"role": "user", "content": text})
    as_parts = counter.count_message(
        {"role": "user", "content": [{"type": "input_text", "text": text}]}
    )
    assert as_parts == chat
    output = {"type": "function_call_output", "call_id": "c", "output": text}
    listed = {**output, "output": [{"type": "input_text", "text": text}]}
    assert counter.count_message(listed) == counter.count_message(output)
    summary = {"type": "reasoning", "summary": [{"type": "summary_text", "text": text}]}
    assert counter.count_message(summary) == counter.count_message({**summary, "summary": text})
    picture = {"type": "input_image", "image_url": "data:" + "A" * 9000}
    image = {"role": "user", "content": [picture]}
    low = {"role": "user", "content": [{"type": "input_image", "detail": "low", "image_url": "x"}]}
    empty = counter.count_message({"role": "user", "content": []})
    assert counter.count_message(image) - empty == IMAGE_HIGH_DETAIL_TOKENS
    assert counter.count_message(low) - empty == 85


def test_encrypted_reasoning_counts_as_the_tokens_it_encodes(counters: TokenCounters) -> None:
    counter = counters.for_model("gpt-4o")
    bare = {"type": "reasoning", "summary": []}
    blob = "gAAAAB" + "Zm9vYmFy" * 1200  # 9,606 base64 characters: ~7,200 bytes
    extra = counter.count_message({**bare, "encrypted_content": blob}) - counter.count_message(bare)
    assert extra == -(-len(blob) * 3 // 16) == 1802
    assert counter.count_text(blob) > 2 * extra  # what it would have counted as text


HOSTILE: list[Any] = [
    None,
    42,
    "just a string",
    ["a", "list"],
    {"role": 7, "content": 3.5},
    {"role": "user", "content": {"nested": [1, {"x": None}]}},
    {"role": "user", "content": [None, 5, {"type": 9}, {"no": "type"}, {"type": "image_url"}]},
    {"role": "user", "content": [{"type": "text", "text": {"not": "a string"}}]},
    {"role": "assistant", "tool_calls": "nope"},
    {"role": "assistant", "tool_calls": [None, {"function": "x"}, {"function": {"arguments": {}}}]},
    {"role": "assistant", "function_call": [1, 2]},
    {"role": "user", "content": "lone \ud800 surrogate"},
    {"role": "user", "content": 10**40},
    {1: "non-string key"},
    {"role": "user", "content": json.loads("[" * 900 + "]" * 900)},
    {"role": "user", "content": [{"type": {"a": 1}}, {"type": ["image"]}, {"type": [], "text": 1}]},
    {"role": "user", "content": [{"type": "tool_result", "content": [{"type": {"text": "x"}}]}]},
]


@pytest.mark.parametrize("model", ["gpt-4o", "claude-3-haiku", "llama-3"])
def test_hostile_input_never_raises(counters: TokenCounters, model: str) -> None:
    counter = counters.for_model(model)
    for message in HOSTILE:
        assert counter.count_message(message) >= tokens.MESSAGE_FRAMING
    assert counter.count_request({"messages": HOSTILE}) > len(HOSTILE) * tokens.MESSAGE_FRAMING
    deep_schema: Any = {"type": "object", "properties": {}}
    for _ in range(600):
        deep_schema = {"type": "object", "properties": {"a": deep_schema}}
    weird_tools = [None, "x", {"function": {"name": "f", "parameters": deep_schema}}]
    for tools, choice in [(weird_tools, 5), ({"a": 1}, {"function": "x"}), ([], "none")]:
        assert counter.count_tools(tools, choice) > 0
    assert counter.count_request("not a body") > 0
    assert counter.count_request({"messages": {"role": "user"}}) > 0


def test_unexpected_values_count_as_json(counters: TokenCounters) -> None:
    counter = counters.for_model("gpt-4o")
    plain = {"role": "user", "content": "hi"}
    extra = {**plain, "metadata": {"trace": "abc def ghi"}}
    diff = counter.count_message(extra) - counter.count_message(plain)
    assert diff == counter.count_text('{"trace":"abc def ghi"}')


def test_message_counts_are_cached_by_content() -> None:
    calls: list[str] = []

    def spy(text: str) -> int:
        calls.append(text)
        return len(text)

    cache = LruCache(100)
    counter = Counter("spy", spy, cache)
    message = {"role": "user", "content": "hello"}
    first = counter.count_message(message)
    again = counter.count_message({"content": "hello", "role": "user"})  # key order irrelevant
    assert first == again == 3 + len("user") + len("hello")
    assert calls == ["user", "hello"]
    counter.count_message({"role": "user", "content": "hello!"})
    assert len(calls) == 4


@pytest.mark.parametrize("randomized", [True, False])
def test_cache_keys_tell_equal_length_texts_apart(
    randomized: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With PYTHONHASHSEED fixed (randomized False) str hashes are predictable, so every message is
    # keyed by a sha256 of its JSON instead of by its fields' hashes.
    monkeypatch.setattr("proxy.tokens.cache._RANDOMIZED_STR_HASH", randomized)
    calls: list[str] = []

    def spy(text: str) -> int:
        calls.append(text)
        return len(text)

    counter = Counter("spy", spy, LruCache(100))
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "hello"},
        {"role": "user", "content": "hellp"},
        {"role": "user", "content": "hello", "name": None},
        {"role": "assistant", "content": None, "tool_calls": [call]},
    ]
    counts = [counter.count_message(m) for m in messages]
    assert counts == [12, 12, 12, 3 + len("assistant") + len("{}")]
    assert calls == ["user", "hello", "user", "hellp", "user", "hello", "assistant", "{}"]
    assert [counter.count_message(dict(m)) for m in messages] == counts
    assert len(calls) == 8  # all four served from the cache the second time


def test_cache_key_includes_the_encoding() -> None:
    cache = LruCache(100)
    ones = Counter("ones", lambda text: 1, cache)
    lengths = Counter("lengths", len, cache)
    message = {"role": "user", "content": "hello"}
    assert ones.count_message(message) == 5
    assert lengths.count_message(message) == 3 + 4 + 5
    assert len(cache) == 2


def test_counters_share_loaded_encodings_and_cache() -> None:
    counters = TokenCounters(cache_size=10)
    assert counters.for_model("gpt-4o") is counters.for_model("gpt-4.1-mini", "o200k_base")
    counters.for_model("gpt-4o").count_message({"role": "user", "content": "x"})
    counters.for_model("gpt-4").count_message({"role": "user", "content": "x"})
    assert len(counters.cache) == 2


@pytest.mark.parametrize(
    ("model", "method"),
    [
        ("gpt-4o-mini", "tiktoken:o200k_base"),
        ("openai/gpt-4.1", "tiktoken:o200k_base"),
        ("gpt-5-nano", "tiktoken:o200k_base"),
        ("gpt-6.2-sol", "tiktoken:o200k_base"),  # Codex 0.171's default model
        ("gpt-10", "tiktoken:o200k_base"),
        ("codex-mini-latest", "tiktoken:o200k_base"),
        ("gpt-oss-120b", "estimate"),
        ("o3-mini", "tiktoken:o200k_base"),
        ("o1", "tiktoken:o200k_base"),
        ("azure/o4-mini", "tiktoken:o200k_base"),
        ("gpt-4-turbo", "tiktoken:cl100k_base"),
        ("gpt-3.5-turbo", "tiktoken:cl100k_base"),
        ("claude-3-5-sonnet-20241022", "hf:"),
        ("anthropic/claude-opus-4", "hf:"),
        ("llama-3.1-70b", "estimate"),
        ("", "estimate"),
    ],
)
def test_auto_selection(model: str, method: str) -> None:
    assert resolve_tokenizer(model) == method


def test_explicit_tokenizers(counters: TokenCounters) -> None:
    assert counters.for_model("llama", "o200k_base").method == "tiktoken:o200k_base"
    assert counters.for_model("gpt-4o", "tiktoken:cl100k_base").method == "tiktoken:cl100k_base"
    assert counters.for_model("gpt-4o", "estimate").method == "estimate"
    path = tokens.tokenizer_dir() / tokens.ANTHROPIC_TOKENIZER
    claude = counters.for_model("gpt-4o", f"hf:{path}")
    assert claude.method == f"hf:{path}"
    assert claude.count_text("Hello world") == 2
    with pytest.raises(ValueError, match="Unknown tokenizer 'p50k'"):
        counters.for_model("gpt-4o", "p50k")
    with pytest.raises(ValueError, match="Cannot load tokenizer"):
        counters.for_model("gpt-4o", "hf:/nonexistent/tokenizer.json")


def _samples() -> dict[str, list[str]]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    licenses = Path("/usr/share/common-licenses")
    prose = [
        (licenses / name).read_text()
        for name in ("GPL-2", "LGPL-3", "MPL-2.0")
        if (licenses / name).exists()
    ]
    prose.append((stdlib / "LICENSE.txt").read_text()[:20_000])
    code = [(stdlib / name).read_text() for name in ("json/decoder.py", "heapq.py", "argparse.py")]
    model_map = tokens.tokenizer_dir().parent.parent / "model_prices_and_context_window_backup.json"
    entries = dict(list(json.loads(model_map.read_text()).items())[:300])
    data = [json.dumps(entries, indent=2), json.dumps(entries, separators=(",", ":"))]
    cjk = [
        "自然语言处理是人工智能和语言学领域的分支学科。此领域探讨如何处理及运用自然语言，"  # noqa: RUF001
        "包括认知、理解、生成等部分。" * 20,
        "吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。"
        "何でも薄暗いじめじめした所でニャーニャー泣いていた事だけは記憶している。" * 20,
        "대한민국의 역사는 매우 길고 다양한 문화를 가지고 있으며, 많은 사람들이 그 전통을 "
        "소중히 여기고 있습니다. " * 20,
    ]
    return {"prose": prose, "code": code, "json": data, "cjk": cjk}


def test_estimate_does_not_undercount_common_text(monkeypatch: pytest.MonkeyPatch) -> None:
    import tiktoken

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tokens.tokenizer_dir()))
    encodings = [tiktoken.get_encoding(name) for name in tokens.ENCODINGS]
    for kind, texts in _samples().items():
        for text in texts:
            exact = max(len(encoding.encode_ordinary(text)) for encoding in encodings)
            estimate = estimate_tokens(text)
            assert estimate >= 0.98 * exact, (kind, text[:40], estimate, exact)
            assert estimate <= 2.0 * exact, (kind, text[:40], estimate, exact)


def test_loading_is_offline_and_never_imports_litellm(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import socket, sys
        def refuse(*args, **kwargs):
            raise AssertionError("network access attempted")
        socket.socket.connect = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse
        from proxy.tokens.catalog import ModelCatalog
        from proxy.tokens.counters import TokenCounters
        counters = TokenCounters()
        body = {"messages": [{"role": "user", "content": "hello world"}]}
        for model in ("gpt-4o", "gpt-4", "claude-3-opus", "mystery"):
            assert counters.for_model(model).count_request(body) > 3
        assert ModelCatalog().lookup("gpt-4o").context_window == 128000
        assert "litellm" not in sys.modules, "litellm was imported"
        print("ok")
        """
    )
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(tmp_path / "empty")}
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
    assert not (tmp_path / "empty").exists()


def test_tokenizer_choices_are_remembered_within_a_bound_and_errors_never() -> None:
    counters = TokenCounters()
    for n in range(3000):  # model names come from clients
        assert not counters.loaded(f"gpt-4o-{n}")
        assert len(counters._methods) <= tokens.METHOD_MEMO_ENTRIES
    assert counters.loaded("claude-x", "estimate") is False
    counters.for_model("llama", "estimate")
    assert counters.loaded("claude-x", "estimate") is True
    for _ in range(2):
        with pytest.raises(ValueError, match="Unknown tokenizer"):
            counters.loaded("gpt-4o", "bogus")
