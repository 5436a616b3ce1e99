"""`server.records`: strict, with defaults that keep records for a day, a thousand per tenant."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from proxy.settings import Settings
from proxy.settings.records import RecordsSettings

UPSTREAMS = [{"name": "u", "base_url": "http://127.0.0.1:9/v1"}]


def test_defaults() -> None:
    records = Settings.model_validate({"upstreams": UPSTREAMS}).server.records
    assert records == RecordsSettings()
    assert (records.enabled, records.max_records, records.ttl_seconds) == (True, 1000, 86400)


@pytest.mark.parametrize(
    "records",
    [{"max_record": 10}, {"max_records": 0}, {"ttl_seconds": 0}, {"max_pending": 0}],
)
def test_strict(records: dict[str, object]) -> None:
    with pytest.raises(ValidationError) as raised:
        Settings.model_validate({"upstreams": UPSTREAMS, "server": {"records": records}})
    assert "server.records" in str(raised.value).replace("\n", ".").replace(" ", "")
