"""Test fakes: a real aiohttp server that plays an OpenAI-compatible provider.

async with FakeUpstream() as fake:
    fake.enqueue(stream_completion(["Hi", " there"]))
    client = openai.AsyncOpenAI(base_url=fake.base_url, api_key="test")
"""

from .bodies import (
    DEFAULT_CREATED,
    DEFAULT_ID,
    DEFAULT_MODEL,
    completion_body,
    echo_text,
    make_usage,
    models_list,
    openai_error,
    stream_chunks,
)
from .builders import (
    completion,
    dynamic_reply,
    error_reply,
    invalid_json_reply,
    json_reply,
    never_reply,
    replay_file,
    reset_reply,
    slow_reply,
    sse_reply,
    stream_completion,
)
from .records import Recorded
from .replies import Reply
from .responses import (
    function_call_item,
    message_item,
    reasoning_item,
    response_body,
    response_json,
    response_stream,
    responses_error,
    responses_usage,
)
from .upstream import FakeUpstream
from .wire import PARALLEL_TOOL_CALLS_SSE, wire_file

__all__ = [
    "DEFAULT_CREATED",
    "DEFAULT_ID",
    "DEFAULT_MODEL",
    "PARALLEL_TOOL_CALLS_SSE",
    "FakeUpstream",
    "Recorded",
    "Reply",
    "completion",
    "completion_body",
    "dynamic_reply",
    "echo_text",
    "error_reply",
    "function_call_item",
    "invalid_json_reply",
    "json_reply",
    "make_usage",
    "message_item",
    "models_list",
    "never_reply",
    "openai_error",
    "reasoning_item",
    "replay_file",
    "reset_reply",
    "response_body",
    "response_json",
    "response_stream",
    "responses_error",
    "responses_usage",
    "slow_reply",
    "sse_reply",
    "stream_chunks",
    "stream_completion",
    "wire_file",
]
