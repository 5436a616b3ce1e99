"""Inbound wire formats: one adapter per format, looked up by name.

Adding a format is one module (or package) implementing `proxy.engine.wire.WireFormat` plus one
line in `FORMATS`.
"""

from collections.abc import Mapping
from types import MappingProxyType

from proxy.engine.wire import WireFormat
from proxy.formats.openai_chat import OPENAI_CHAT

FORMATS: Mapping[str, WireFormat] = MappingProxyType(
    {
        OPENAI_CHAT.name: OPENAI_CHAT,
    }
)
