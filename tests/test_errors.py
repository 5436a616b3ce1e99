from __future__ import annotations

from proxy.errors import ErrorCode, ProxyError, RefusalReason


def test_every_code_is_distinct_and_named_by_its_value() -> None:
    assert len({c.value for c in ErrorCode}) == len(list(ErrorCode))
    for code in ErrorCode:
        assert code.value[0] == code.name
        assert 400 <= code.status < 600


def test_envelope_shape_with_details() -> None:
    error = ProxyError(
        ErrorCode.context_length_exceeded, "too long", param="messages", details={"reason": "r"}
    )
    body = error.envelope("rid")
    assert body == {
        "error": {
            "message": "too long",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
            "ctxproxy": {"reason": "r", "request_id": "rid"},
        }
    }


def test_envelope_without_details_has_no_extension() -> None:
    body = ProxyError(ErrorCode.upstream_timeout, "slow").envelope()
    assert "ctxproxy" not in body["error"]
    assert body["error"]["type"] == "api_error"
    assert ErrorCode.upstream_timeout.status == 504


def test_only_refusals_carry_a_typed_reason() -> None:
    assert ProxyError(ErrorCode.upstream_timeout, "slow").reason is None
    refusal = ProxyError(
        ErrorCode.context_length_exceeded,
        "too long",
        reason=RefusalReason.protected_content_exceeds_allowance,
    )
    assert refusal.reason == "protected_content_exceeds_allowance"
    assert "reason" not in refusal.envelope()["error"]  # details say it, never the attribute
