"""The refusals of preparation: `context_length_exceeded` (or a store outage) with its details."""

from __future__ import annotations

from proxy.engine.budget import Budget
from proxy.engine.policy import Policy
from proxy.errors import ErrorCode, ProxyError, RefusalReason


def refusal(
    budget: Budget,
    policy: Policy,
    items_param: str,
    final: int,
    protected: int,
    *,
    store_failed: bool,
    no_credential: bool = False,
) -> ProxyError:
    """Why a request of `final` tokens (`protected` of them no step may remove) is refused."""
    if no_credential:  # nothing was stored for it: the client's to mend, not an outage
        reason = RefusalReason.no_credential
        store_failed = False
    elif store_failed:
        reason = RefusalReason.artifact_store_unavailable
    elif not policy.reduces:
        reason = RefusalReason.input_exceeds_allowance
    elif protected > budget.limit:
        reason = RefusalReason.protected_content_exceeds_allowance
    else:
        reason = RefusalReason.policy_steps_exhausted
    details = {
        "reason": reason.value,
        "allowance_tokens": budget.allowance,
        "refusal_limit_tokens": budget.limit,
        "final_tokens": final,
        "protected_tokens": protected,
        "reserved_output_tokens": budget.reserved_output,
        "policy": policy.name,
        "context_window_source": budget.window_source.value,
    }
    kept = budget.context_window - budget.limit - budget.safety_margin
    message = (
        f"This model's maximum context length is {budget.context_window} tokens. However, "
        f"your messages resulted in {final} tokens after context preparation "
        f"({kept} tokens are kept for the completion, policy "
        f"'{policy.name}': {reason.replace('_', ' ')}). Please reduce the length of "
        "the messages. (context_length_exceeded)"
    )
    if no_credential:
        message += (
            " The request presented no credential, so the proxy stored nothing to make it fit:"
            " send one (any key, for an upstream that needs none)."
        )
    if store_failed:  # an outage, not the client's prompt: worded so, and retryable (503)
        outage = (
            "The artifact store did not confirm the writes this request needs to fit the "
            f"context window ({final} tokens after preparation, {budget.limit} allowed); "
            "nothing was removed. Retry later."
        )
        return ProxyError(
            ErrorCode.artifact_store_unavailable, outage, details=details, reason=reason
        )
    return ProxyError(
        ErrorCode.context_length_exceeded,
        message,
        param=items_param,
        details=details,
        reason=reason,
    )
