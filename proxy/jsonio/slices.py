"""JSON of large bodies in slices: the values and bytes of `strict`, the GIL held only briefly.

orjson holds the GIL for the whole of one call, whichever thread makes it: parsing a 30 MB body
took 20 ms on an idle core and 50-160 ms on a loaded one, and for that long no other thread of
the process, the event loop's included, ran at all. Here no orjson call is given more than about
`SLICE_BYTES`:

- `loads_sliced(raw)` finds the structure of the body (which quotes delimit strings, where the
  elements and members of its large arrays and objects begin and end) with bounded searches over
  a copy of it in which escaped backslashes and quotes are blanked; it parses runs of small
  elements and members in one call each, descends into large ones, and decodes a long string in
  pieces cut between characters and escapes, joined once. orjson still reads every byte, so a
  cut in the wrong place can only make a piece fail to parse: then the body is parsed whole by
  `strict.loads`, as it is when the slicer finds a shape it does not split (a huge number, a
  closing bracket out of place) or the value needs `strict`'s own checks (nesting deeper than
  `MAX_DEPTH`, integers beyond 64 bits). Either way the value, or the error, is `strict.loads`'.
- `dumps_sliced(value)` writes the value with each string of `LONG_CHARS` or more replaced by a
  placeholder, then splices in each such string's JSON text written slice by slice (JSON escapes
  each character on its own, so the pieces join to what one call would write); the one join
  (`bytes.join`) copies without the GIL.

Python code between the calls lets other threads run every `sys.getswitchinterval()`. A long
string is `grown` into its `str` a piece at a time rather than joined in one copy.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from proxy.errors import ProxyError
from proxy.jsonio import strict

SLICE_BYTES = 256 * 1024
"""The most one orjson call is given (a fraction of a millisecond of work)."""
LONG_CHARS = SLICE_BYTES
"""Strings from this many characters are written in slices by `dumps_sliced`."""
_WINDOW = SLICE_BYTES
"""The most one search or copy of the structure scan covers."""
_NARROW = 4096
"""The window in which the closing bracket of a container is looked for one bracket at a time."""
_AS_BRACKETS = bytes.maketrans(b"{}", b"[]")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_MAX_LEVELS = 32
"""Large containers descended into, at most (deeper ones are parsed whole)."""
_WHITESPACE = b" \t\n\r"
_QUOTE, _BACKSLASH, _COMMA, _COLON = 0x22, 0x5C, 0x2C, 0x3A
_OPEN_ARRAY, _CLOSE_ARRAY, _OPEN_OBJECT, _CLOSE_OBJECT = 0x5B, 0x5D, 0x7B, 0x7D
_CONTINUATION = range(0x80, 0xC0)
_TOP_LEVEL = re.compile(rb'["\[\]{},]')
_CLOSING = re.compile(rb"[\]}]")
_NOT_WHITESPACE = re.compile(rb"[^ \t\n\r]")
_CUT = re.compile(rb"[^\\]{6}|(?<!\\)(?=\\)")
"""Where a string's raw content may be cut: after 6 bytes without a backslash (no escape is
longer), or where a run of backslashes (an escape) starts; `_between_characters` says whether
the place also starts a character."""
_HIGH_SURROGATE = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}")


class _Whole(Exception):
    """The slicer does not split this body: `strict.loads` parses it whole."""


def loads_sliced(raw: bytes) -> Any:
    """`strict.loads(raw)`: the same value, or the same `ProxyError`."""
    if len(raw) <= SLICE_BYTES:
        return strict.loads(raw)
    try:
        value = _Slicer(raw).parse()
        huge = strict.scanned(value)
    except (_Whole, orjson.JSONDecodeError, ProxyError, RecursionError):
        return strict.loads(raw)
    return strict.loads(raw) if huge else value


def _blanked(raw: bytes) -> bytes:
    """`raw` with every escaped backslash and escaped quote blanked (`__`), in windows that
    never cut a run of backslashes: every quote left opens or closes a string."""
    pieces, start, size = [], 0, len(raw)
    while start < size:
        stop = min(start + _WINDOW, size)
        while stop < size and raw[stop - 1] == _BACKSLASH:
            stop += 1  # the run's pairs are counted from its start, in one window
        pieces.append(raw[start:stop].replace(b"\\\\", b"__").replace(b'\\"', b"__"))
        start = stop
    return b"".join(pieces)


def _lowest(outside: bytes) -> int:
    """The lowest the bracket depth goes (0 or less) along text outside strings."""
    brackets = outside.translate(_AS_BRACKETS, _NOT_BRACKETS)
    while b"[]" in brackets:  # once per level of nesting
        brackets = brackets.replace(b"[]", b"")
    return len(brackets.lstrip(b"]")) - len(brackets)


def _opened(outside: bytes) -> int:
    """Brackets opened minus brackets closed in text outside strings."""
    opened = outside.count(b"[") + outside.count(b"{")
    return opened - outside.count(b"]") - outside.count(b"}")


class _Slicer:
    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        self.clean = _blanked(raw)

    def parse(self) -> Any:
        start, end = self._stripped(0, len(self.raw))
        return self._value(start, end, 0)

    def _value(self, start: int, end: int, level: int) -> Any:
        """The value that is exactly `raw[start:end]`."""
        if end - start <= SLICE_BYTES:
            return orjson.loads(self.raw[start:end])
        first, last = self.raw[start], self.raw[end - 1]
        if first == _QUOTE:
            return self._string(start, end)
        if level >= _MAX_LEVELS:
            raise _Whole
        if (first, last) in ((_OPEN_ARRAY, _CLOSE_ARRAY), (_OPEN_OBJECT, _CLOSE_OBJECT)):
            return self._container(start, end, level)
        raise _Whole

    def _container(self, start: int, end: int, level: int) -> Any:
        """A large array or object, a run of its small parts per orjson call."""
        array = self.raw[start] == _OPEN_ARRAY
        opening, closing = (b"[", b"]") if array else (b"{", b"}")
        items: list[Any] = []
        members: dict[Any, Any] = {}
        for first, last in self._runs(start, end):
            if last - first <= 2 * SLICE_BYTES:
                run = orjson.loads(opening + self.raw[first:last] + closing)
                if array:
                    items += run
                else:
                    members.update(run)
            elif array:
                items.append(self._value(first, last, level + 1))
            else:
                key, value_start = self._key(first, last)
                members[key] = self._value(value_start, last, level + 1)
        return items if array else members

    def _runs(self, start: int, end: int) -> Iterator[tuple[int, int]]:
        """Ranges of the container `raw[start:end]`'s inside: runs of whole parts (elements or
        members with the commas between them) of about `SLICE_BYTES`, and each larger part
        alone."""
        limit = end - 1
        at, _ = self._stripped(start + 1, limit)
        while at < limit:
            cut = self._comma_after(at + SLICE_BYTES, at, limit)
            if cut - at <= 2 * SLICE_BYTES:
                yield at, cut
            else:
                yield from self._parts(at, cut)
            if cut == limit:
                return
            at, _ = self._stripped(cut + 1, limit)
            if at == limit:  # a comma before the closing bracket
                raise _Whole

    def _key(self, start: int, end: int) -> tuple[str, int]:
        """A large member's key, and where its value starts."""
        if self.raw[start] != _QUOTE:
            raise _Whole
        close = self._string_end(start + 1, end)
        key = self._value(start, close + 1, 0)
        colon, _ = self._stripped(close + 1, end)
        if colon >= end or self.raw[colon] != _COLON:
            raise _Whole
        value_start, _ = self._stripped(colon + 1, end)
        return key, value_start

    def _string(self, start: int, end: int) -> str:
        """A long string, decoded piece by piece."""
        if self._string_end(start + 1, end) != end - 1:
            raise _Whole
        raw, at = self.raw, start + 1

        def pieces() -> Iterator[str]:
            nonlocal at
            while at < end - 1:
                cut = self._cut(at + SLICE_BYTES, end - 1)
                yield orjson.loads(b'"' + raw[at:cut] + b'"')
                at = cut

        return grown(pieces())

    def _cut(self, target: int, end: int) -> int:
        """A place at or after `target` (or `end`) between two characters and outside escapes."""
        raw, search = self.raw, target - 6
        while search < end:
            stop = min(search + _WINDOW, end)
            found = _CUT.search(raw, search, stop)
            if found is None:
                search = stop - 6 if stop < end else end  # a run may go on in the next window
                continue
            cut = found.end()
            if cut >= target and self._between_characters(cut, end):
                return cut
            search = found.start() + 1
        return end

    def _between_characters(self, cut: int, end: int) -> bool:
        """Not before a UTF-8 continuation byte, nor between the two escapes of a pair."""
        if cut < end and self.raw[cut] in _CONTINUATION:
            return False
        return _HIGH_SURROGATE.fullmatch(self.raw, cut - 6, cut) is None

    def _parts(self, first: int, stop: int) -> Iterator[tuple[int, int]]:
        """The parts of the inside range `raw[first:stop]`, split at its top-level commas."""
        while True:
            comma = self._next_comma(first, stop)
            part = self._stripped(first, comma)
            if part[0] == part[1]:  # `[1,,2]`
                raise _Whole
            yield part
            if comma == stop:
                return
            first = comma + 1

    def _comma_after(self, target: int, at: int, limit: int) -> int:
        """The first top-level comma at or after `target` (or `limit`); `at` starts a part."""
        if target >= limit:
            return limit
        parts = self.clean[at:target].split(b'"')
        depth = _opened(b"".join(parts[0::2]))
        if depth < 0:
            raise _Whole
        resume = target if len(parts) % 2 else self._string_end(target, limit) + 1
        if depth:
            resume = self._closed(resume, depth, limit)
        return self._next_comma(resume, limit)

    def _next_comma(self, at: int, stop: int) -> int:
        """The next comma at the top level (`at` is there), or `stop`."""
        clean = self.clean
        while at < stop:
            found = _TOP_LEVEL.search(clean, at, min(at + _WINDOW, stop))
            if found is None:
                at = min(at + _WINDOW, stop)
                continue
            position, byte = found.start(), clean[found.start()]
            if byte == _COMMA:
                return position
            if byte == _QUOTE:
                at = self._string_end(position + 1, stop) + 1
            elif byte in (_OPEN_ARRAY, _OPEN_OBJECT):
                at = self._closed(position + 1, 1, stop)
            else:  # a closing bracket that closes nothing here
                raise _Whole
        return stop

    def _closed(self, at: int, depth: int, limit: int) -> int:
        """The position after the bracket that closes the `depth` containers open at `at`:
        windows that cannot close them are skipped whole, the last one narrowed down."""
        window = _WINDOW
        while True:
            stop = min(at + window, limit)
            parts = self.clean[at:stop].split(b'"')
            outside = b"".join(parts[0::2])
            if depth + _lowest(outside) > 0:  # nothing closes here: past the window
                depth += _opened(outside)
                at = self._string_end(stop, limit) + 1 if len(parts) % 2 == 0 else stop
                if at >= limit:
                    raise _Whole
                window = _WINDOW
            elif window > _NARROW:
                window //= 2
            else:
                return self._closed_here(at, depth, limit)

    def _closed_here(self, at: int, depth: int, limit: int) -> int:
        """`_closed`, one closing bracket at a time (they close within `_NARROW` bytes)."""
        clean = self.clean
        while True:
            closing = _CLOSING.search(clean, at, limit)
            if closing is None:
                raise _Whole
            stop = closing.start()
            parts = clean[at:stop].split(b'"')
            depth += _opened(b"".join(parts[0::2]))
            if len(parts) % 2 == 0:  # `stop` is inside a string: go on after it
                at = self._string_end(stop, limit) + 1
                continue
            depth, at = depth - 1, stop + 1
            if depth == 0:
                return at

    def _string_end(self, at: int, limit: int) -> int:
        """The quote that closes the string whose content runs from `at`."""
        while at < limit:
            found = self.clean.find(b'"', at, min(at + _WINDOW, limit))
            if found >= 0:
                return found
            at += _WINDOW
        raise _Whole

    def _stripped(self, start: int, end: int) -> tuple[int, int]:
        """`start` and `end` moved past the JSON whitespace at both ends of `raw[start:end]`."""
        raw = self.raw
        while start < end:
            found = _NOT_WHITESPACE.search(raw, start, min(start + _WINDOW, end))
            if found is not None:
                start = found.start()
                break
            start = min(start + _WINDOW, end)
        while end > start and raw[end - 1] in _WHITESPACE:
            end -= 1
        return start, end


def utf8_slices(text: str) -> Iterator[bytes]:
    """`text`'s UTF-8 (lone surrogates passed through), `LONG_CHARS` characters at a time: joined,
    the bytes of one `encode`, which holds the GIL for the whole text."""
    for start in range(0, len(text), LONG_CHARS):
        yield text[start : start + LONG_CHARS].encode("utf-8", "surrogatepass")


def grown(pieces: Iterable[str]) -> str:
    """`"".join(pieces)` without one long copy: the text is grown a piece at a time, and CPython
    resizes a string nobody else holds in place (a `realloc`), so each step copies one piece.
    One join copies the whole text into fresh memory while it holds the GIL (10-15 ms at 30 MB).
    A piece with wider characters than the text so far makes one copy (at most three times)."""
    text = ""
    for piece in pieces:
        text += piece
    return text


# -- writing -------------------------------------------------------------------------------------


def dumps_sliced(value: Any, option: int | None = None) -> bytes:
    """`orjson.dumps(value, option=option)`, each string of `LONG_CHARS` or more written slice by
    slice. Raises what orjson raises (a `TypeError` for what it cannot write)."""
    if not _holds_long(value):
        return orjson.dumps(value, option=option)
    longs: list[str] = []
    tag = f"ctxproxy{secrets.token_hex(16)}_"
    skeleton = orjson.dumps(_lightened(value, longs, tag), option=option)
    pieces, at, seen = [], 0, 0
    for found in re.finditer(rb'"' + tag.encode() + rb'(\d+)"', skeleton):
        pieces += [skeleton[at : found.start() + 1], *_written(longs[int(found[1])])]
        at, seen = found.end() - 1, seen + 1
    if seen != len(longs):  # never: each placeholder is written once, where its string was
        return orjson.dumps(value, option=option)
    pieces.append(skeleton[at:])
    return b"".join(pieces)


def _holds_long(value: Any) -> bool:
    level = [value]
    while level:
        below: list[Any] = []
        for item in level:
            kind = type(item)
            if kind is str:
                if len(item) >= LONG_CHARS:
                    return True
            elif kind is dict:
                below.extend(item.values())
            elif kind is list or kind is tuple:
                below.extend(item)
        level = below
    return False


def _lightened(value: Any, longs: list[str], tag: str) -> Any:
    """`value` with each long string replaced by `tag` and its index in `longs`."""
    kind = type(value)
    if kind is str and len(value) >= LONG_CHARS:
        longs.append(value)
        return f"{tag}{len(longs) - 1}"
    if kind is dict:
        return {key: _lightened(item, longs, tag) for key, item in value.items()}
    if kind is list or kind is tuple:
        return [_lightened(item, longs, tag) for item in value]
    return value


def _written(text: str) -> list[bytes]:
    """The JSON text of `text` without its quotes, slice by slice."""
    return [orjson.dumps(text[i : i + LONG_CHARS])[1:-1] for i in range(0, len(text), LONG_CHARS)]
