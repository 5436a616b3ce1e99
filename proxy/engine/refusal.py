"""The refusals of preparation: `context_length_exceeded` (or a store outage) with its details."""

from __future__ import annotations

from proxy.engine.budget import Budget
from proxy.engine.policy import Policy
from proxy.errors import ErrorCode, ProxyError, RefusalReason

_ADVICE = {
    RefusalReason.no_credential: " The request presented no credential, so the proxy stored"
    " nothing to make it fit: send one (any key, for an upstream that needs none).",
    RefusalReason.store_write_budget: " The proxy could not store what it would remove: this"
    " tenant's artifact store write budget is used up (bytes per minute, or bytes held until"
    " they expire).",
}
"""What a client can do about a refusal of that reason, after the message."""


def refusal(
    budget: Budget,
    policy: Policy,
    items_param: str,
    final: int,
    protected: int,
    *,
    store_failed: bool,
    no_credential: bool = False,
    write_budget: bool = False,
) -> ProxyError:
    """Why a request of `final` tokens (`protected` of them no step may remove) is refused."""
    reason = _reason(budget, policy, protected, store_failed, no_credential, write_budget)
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
    if reason is RefusalReason.artifact_store_unavailable:
        # an outage, not the client's prompt: worded so, and retryable (503)
        outage = (
            "The artifact store did not confirm the writes this request needs to fit the "
            f"context window ({final} tokens after preparation, {budget.limit} allowed); "
            "nothing was removed. Retry later."
        )
        return ProxyError(
            ErrorCode.artifact_store_unavailable, outage, details=details, reason=reason
        )
    kept = budget.context_window - budget.limit - budget.safety_margin
    message = (
        f"This model's maximum context length is {budget.context_window} tokens. However, "
        f"your messages resulted in {final} tokens after context preparation "
        f"({kept} tokens are kept for the completion, policy "
        f"'{policy.name}': {reason.replace('_', ' ')}). Please reduce the length of "
        "the messages. (context_length_exceeded)"
    )
    return ProxyError(
        ErrorCode.context_length_exceeded,
        message + _ADVICE.get(reason, ""),
        param=items_param,
        details=details,
        reason=reason,
    )


def _reason(
    budget: Budget,
    policy: Policy,
    protected: int,
    store_failed: bool,
    no_credential: bool,
    write_budget: bool,
) -> RefusalReason:
    if no_credential:  # nothing was stored for it: the client's to mend, not an outage
        return RefusalReason.no_credential
    if write_budget:  # the tenant's own budget, not an outage: shorten, or wait
        return RefusalReason.store_write_budget
    if store_failed:
        return RefusalReason.artifact_store_unavailable
    if not policy.reduces:
        return RefusalReason.input_exceeds_allowance
    if protected > budget.limit:
        return RefusalReason.protected_content_exceeds_allowance
    return RefusalReason.policy_steps_exhausted
