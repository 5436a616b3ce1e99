"""The dry-run snapshot's `--large` requests (bench/quality/dryrun_large.py): bodies of 1 MB and
more in the three formats, deterministic, and large answers recorded by their digest."""

from __future__ import annotations

import hashlib
import json

from bench.quality.dryrun_formats import MESSAGES, RESPONSES
from bench.quality.dryrun_large import PREFIX, RECORDED_WHOLE_BYTES, large_requests, recorded


def test_the_large_requests_are_large_deterministic_and_in_each_format() -> None:
    requests = large_requests()
    labels = [label for label, _, _ in requests]
    assert len(labels) == len(set(labels)) and all(label.startswith(PREFIX) for label in labels)
    assert all(len(body) >= 1_000_000 for _, _, body in requests)
    assert max(len(body) for _, _, body in requests) > 20_000_000
    paths = {path for _, path, _ in requests}
    assert paths == {"/v1/context/prepare", MESSAGES, RESPONSES}
    for _, _, body in requests:
        assert isinstance(json.loads(body), dict)
    by_label = {label: body for label, _, body in requests}
    escaped = by_label[f"{PREFIX}tool-result-3mb-escaped"]
    assert escaped.isascii() and b"\\u" in escaped
    again = large_requests()
    assert [hashlib.sha256(b).digest() for _, _, b in again] == [
        hashlib.sha256(b).digest() for _, _, b in requests
    ]


def test_only_a_large_request_s_large_answer_is_recorded_by_its_digest() -> None:
    big = b'{"a":"' + b"x" * RECORDED_WHOLE_BYTES + b'"}'
    assert recorded("chat-small", big) == big
    assert recorded(f"{PREFIX}many-messages", b'{"ok":1}') == b'{"ok":1}'
    kept = json.loads(recorded(f"{PREFIX}many-messages", big))
    assert kept == {"sha256": hashlib.sha256(big).hexdigest(), "bytes": len(big)}
