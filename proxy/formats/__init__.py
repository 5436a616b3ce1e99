"""Inbound wire formats: one adapter per format, looked up by name.

Adding a format is one module (or package) implementing `proxy.formats.base.ClientFormat` (the
engine's `WireFormat` for the request, `AnswerFormat` for the answer) plus one line in `FORMATS`.
"""

from collections.abc import Mapping
from types import MappingProxyType

from proxy.formats.anthropic_messages import ANTHROPIC_MESSAGES
from proxy.formats.base import ClientFormat
from proxy.formats.openai_chat import OPENAI_CHAT
from proxy.formats.openai_responses import OPENAI_RESPONSES

FORMATS: Mapping[str, ClientFormat] = MappingProxyType(
    {
        OPENAI_CHAT.name: OPENAI_CHAT,
        ANTHROPIC_MESSAGES.name: ANTHROPIC_MESSAGES,
        OPENAI_RESPONSES.name: OPENAI_RESPONSES,
    }
)
