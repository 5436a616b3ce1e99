"""The records routes' query: each filter parsed strictly, the session matched by its digest."""

from __future__ import annotations

import pytest
from aiohttp.test_utils import make_mocked_request

from proxy.artifacts.records import RecordQuery
from proxy.errors import ErrorCode, ProxyError
from proxy.http.auth import session_digest
from proxy.http.records import _query


def query(text: str) -> RecordQuery:
    return _query(make_mocked_request("GET", f"/v1/context/requests?{text}"))


def test_every_filter() -> None:
    before = "0123456789abcdef" * 2
    parsed = query(
        f"status=400&outcome=refused&model=gpt-4o&session=s1&tenant=acme&limit=7&before={before}"
    )
    assert parsed == RecordQuery(status=400, outcome="refused", model="gpt-4o",
                                 session=session_digest("s1"), tenant="acme", limit=7,
                                 before=before)  # fmt: skip


def test_empty_values_are_no_filter() -> None:
    assert query("status=&outcome=&model=&limit=") == RecordQuery()


@pytest.mark.parametrize(
    "text",
    ["status=2000", "status=099", "limit=1000", "limit=-1", "outcome=OK", "before=" + "A" * 32],
)
def test_bad_values(text: str) -> None:
    with pytest.raises(ProxyError) as raised:
        query(text)
    assert raised.value.code is ErrorCode.invalid_request
    assert raised.value.param == text.partition("=")[0]
