"""The closed set of errors ctxproxy answers with, and the OpenAI error envelope."""

from __future__ import annotations

from enum import Enum, StrEnum
from typing import Any


class ErrorCode(Enum):
    """Each code maps to one HTTP status and one OpenAI error `type` (values are unique)."""

    invalid_json = ("invalid_json", 400, "invalid_request_error")
    invalid_request = ("invalid_request", 400, "invalid_request_error")
    invalid_messages = ("invalid_messages", 400, "invalid_request_error")
    context_length_exceeded = ("context_length_exceeded", 400, "invalid_request_error")
    invalid_content_encoding = ("invalid_content_encoding", 400, "invalid_request_error")
    invalid_api_key = ("invalid_api_key", 401, "invalid_request_error")
    not_found = ("not_found", 404, "invalid_request_error")
    artifact_not_found = ("artifact_not_found", 404, "invalid_request_error")
    record_not_found = ("record_not_found", 404, "invalid_request_error")
    method_not_allowed = ("method_not_allowed", 405, "invalid_request_error")
    request_timeout = ("request_timeout", 408, "invalid_request_error")
    request_too_large = ("request_too_large", 413, "invalid_request_error")
    unsupported_media_type = ("unsupported_media_type", 415, "invalid_request_error")
    unsupported_content_encoding = ("unsupported_content_encoding", 415, "invalid_request_error")
    upstream_unavailable = ("upstream_unavailable", 502, "api_error")
    upstream_invalid_response = ("upstream_invalid_response", 502, "api_error")
    upstream_response_too_large = ("upstream_response_too_large", 502, "api_error")
    artifact_store_unavailable = ("artifact_store_unavailable", 503, "api_error")
    summarizer_unavailable = ("summarizer_unavailable", 503, "api_error")
    upstream_timeout = ("upstream_timeout", 504, "api_error")
    internal_error = ("internal_error", 500, "api_error")

    @property
    def status(self) -> int:
        return self.value[1]

    @property
    def error_type(self) -> str:
        return self.value[2]


class RefusalReason(StrEnum):
    """Why context preparation refused a request: the metrics label, the access line's `reason`
    and `ctxproxy.reason` in the error envelope."""

    input_exceeds_allowance = "input_exceeds_allowance"
    protected_content_exceeds_allowance = "protected_content_exceeds_allowance"
    policy_steps_exhausted = "policy_steps_exhausted"
    artifact_store_unavailable = "artifact_store_unavailable"
    invalid_messages = "invalid_messages"
    summarizer_failed = "summarizer_failed"
    no_credential = "no_credential"
    """Too long to send as it is, and nothing can be stored for a request without a credential."""
    store_write_budget = "store_write_budget"
    """Too long to send as it is, and the tenant's store write budget refused what had to be
    stored to make it fit (`store.write_budget`)."""


class ProxyError(Exception):
    """An error that becomes an OpenAI error envelope at the edge (HTTP body or SSE event)."""

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        param: str | None = None,
        details: dict[str, Any] | None = None,
        reason: RefusalReason | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.param = param
        self.details = details
        self.reason = reason
        """Set when context preparation refused the request (never for other errors)."""

    def envelope(self, request_id: str | None = None) -> dict[str, Any]:
        return error_envelope(
            self.code, self.message, param=self.param, details=self.details, request_id=request_id
        )


def error_envelope(
    code: ErrorCode,
    message: str,
    *,
    param: str | None = None,
    details: dict[str, Any] | None = None,
    request_id: str | None = None,
) -> dict[str, Any]:
    error: dict[str, Any] = {
        "message": message,
        "type": code.error_type,
        "param": param,
        "code": code.name,
    }
    extra = dict(details or {})
    if request_id is not None:
        extra["request_id"] = request_id
    if extra:
        error["ctxproxy"] = extra
    return {"error": error}
