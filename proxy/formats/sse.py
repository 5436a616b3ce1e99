"""Server-sent events, whatever the format: incremental parsing and encoding.

What the events mean (chunks, a done marker, usage) is each format's business
(`proxy.formats.openai_chat.stream` for OpenAI chat completions).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SSEEvent:
    data: bytes
    """The event's `data:` lines joined by `\\n`."""
    event: bytes | None = None


class SSEParser:
    """Incremental parser: feed it bytes as they arrive (any split), get complete events back.

    Handles `\\n`, `\\r\\n` and `\\r` line ends (also when a `\\r\\n` is split between chunks),
    multi-line `data:`, comments and fields without a value. Memory is one pending event.
    """

    def __init__(self) -> None:
        self._line = bytearray()
        self._data: list[bytes] = []
        self._event: bytes | None = None
        self._after_cr = False

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        if self._after_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        self._after_cr = chunk.endswith(b"\r")
        text = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        events: list[SSEEvent] = []
        start = 0
        while (end := text.find(b"\n", start)) >= 0:
            if self._line:
                self._line += text[start:end]
                line = bytes(self._line)
                self._line.clear()
            else:
                line = text[start:end]
            start = end + 1
            event = self._take_line(line)
            if event is not None:
                events.append(event)
        self._line += text[start:]
        return events

    def close(self) -> list[SSEEvent]:
        """End of stream: a last event without its blank line is still delivered."""
        events = []
        if self._line:
            line = bytes(self._line)
            self._line.clear()
            event = self._take_line(line)
            if event is not None:
                events.append(event)
        last = self._take_line(b"")
        return events + ([last] if last is not None else [])

    def _take_line(self, line: bytes) -> SSEEvent | None:
        if not line:
            if not self._data:
                self._event = None
                return None
            event = SSEEvent(b"\n".join(self._data), self._event)
            self._data, self._event = [], None
            return event
        if line.startswith(b":"):
            return None
        name, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if name == b"data":
            self._data.append(value)
        elif name == b"event":
            self._event = value
        return None


def encode_data(payload: bytes) -> bytes:
    """One SSE event carrying `payload` (every line of it prefixed with `data: `)."""
    lines = payload.split(b"\n")
    return b"".join(b"data: " + line + b"\n" for line in lines) + b"\n"


def encode_event(event: SSEEvent) -> bytes:
    head = b"event: " + event.event + b"\n" if event.event is not None else b""
    return head + encode_data(event.data)
