"""What preparation did and why: the manifest, and the prepared request it describes."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from proxy.synthetic.catalog import ToolCatalog
from proxy.synthetic.registry import ARTIFACT_TOOLS

if TYPE_CHECKING:
    from proxy.engine.working_set import WorkingSetKey


class Outcome(StrEnum):
    """What preparation did with a request (the manifest's `outcome`, a metrics label)."""

    unchanged = "unchanged"
    """Not prepared at all (`mode: off`, or history held by the provider)."""
    inspected = "inspected"
    within_trigger = "within_trigger"
    within_allowance = "within_allowance"
    """Within the allowance, forwarded as it came: `mode: reject` over the trigger, or a
    reduction whose result (with the read tools it adds) would not fit where the request does."""
    invalid_forwarded = "invalid_forwarded"
    nothing_reduced = "store_unavailable_kept"
    """Over the trigger, and no step could change anything (the store refused every write, or
    nothing was reducible); forwarded as it came. The value keeps its historical name."""
    reduced = "reduced"
    reduced_above_target = "reduced_above_target"


class NoteCode(StrEnum):
    """Fixed codes for what a client should know about its request's preparation: the values of
    the `x-ctxproxy-notes` header (never a model name or any text of the client's)."""

    window_fallback = "window_fallback"
    """The model's window is unknown: the policy's `fallback_context_window` was used."""
    window_upstream = "window_upstream"
    """The window was taken from the upstream's model listing (not the model map)."""
    window_corrected = "window_corrected"
    """The window was corrected by an upstream's context-length error for this model."""
    estimated_tokens = "estimated_tokens"
    """Tokens were estimated (no tokenizer for the model): counts are approximate."""
    retried_after_overflow = "retried_after_overflow"
    """The upstream refused the first attempt as too long; the request was prepared again."""
    counts_calibrated = "counts_calibrated"
    """The budget was scaled by the model's count ratio (the upstream's `usage` vs the proxy)."""
    history_at_provider = "history_at_provider"
    """Not prepared: the request continues history the provider holds (the proxy cannot see it)."""
    no_credential = "no_credential"
    """The request presented no credential: nothing was stored for it, so nothing was offloaded,
    cleared or dropped (its content stays in the prompt)."""
    store_write_budget = "store_write_budget"
    """The tenant's store write budget (bytes per minute or live bytes) refused writes this
    request needed: that content stays in the prompt (the note names the budget)."""
    invalid_forwarded = "invalid_forwarded"
    """Not prepared: the input is structurally broken (`on_invalid: forward`); it went upstream
    untouched. The manifest's notes name the first problem."""
    never_worse = "never_worse"
    """A reduction was left out because it would not have made the request smaller (the read
    tools it brings included): the request went as it came."""


class SummarySource(StrEnum):
    """Where the summary standing for dropped turns came from (a `summarize` action's
    `detail.source`; the `ctxproxy_summaries_total` outcome)."""

    cache = "cache"
    """Frozen in the store by an earlier request (the same bytes again)."""
    fresh = "fresh"
    """Made for this request (an extract, or a summarizer that answered within timeout_s)."""
    background = "background"
    """Made ahead of time (precomputed near the trigger) and found ready or waited for."""
    fallback = "fallback"
    """The summarizer failed or was late: the extract, or no summary (on_error)."""
    last_resort = "last_resort"
    """Left out to avoid a refusal (the header only)."""


@dataclass
class CacheReport:
    """The provider's prompt cache of the conversation, and what its state changed
    (`engine.cache_warmth`: `CacheState` and `CacheApplied` values)."""

    state: str
    age_seconds: float | None
    """Since the conversation's prompt last went upstream (None: no record of it)."""
    ttl_seconds: int | None
    """The cache lifetime that applied (None: unknown)."""
    applied: str = "none"

    def label(self) -> str:
        """`state:applied`, the `x-ctxproxy-cache` header."""
        return f"{self.state}:{self.applied}"


CACHE_HEADER = "x-ctxproxy-cache"
NOTES_HEADER = "x-ctxproxy-notes"
OUTCOME_HEADER = "x-ctxproxy-outcome"
SUMMARY_HEADER = "x-ctxproxy-summary"


@dataclass
class Action:
    step: str
    reason: str
    message_indices: list[int]
    tokens_freed: int
    artifact_ids: list[str] = field(default_factory=list)
    count: int | None = None
    """How many `unit`s the step acted on (what `x-ctxproxy-actions` reports); None: the
    number of messages it changed."""
    unit: str = "items"
    """What `count` counts: the format's items (`messages` in OpenAI chat) or the step's own."""
    detail: dict[str, Any] | None = None
    """What else the step reports (`summarize`: the span, kind, model, tokens, where the summary
    came from, the summarizer's failure, seconds and usage)."""

    def __post_init__(self) -> None:
        if self.count is None:
            self.count = len(self.message_indices)


@dataclass
class Manifest:
    policy: str
    model: str
    mode: str
    counting_method: str = ""
    context_window: int = 0
    context_window_source: str = ""
    """`engine.budget.WindowSource`: policy, upstream_error, model_map, upstream or fallback."""
    reserved_output: int = 0
    allowance: int = 0
    refusal_limit: int = 0
    """The largest prompt forwarded (`budget.refusal_output_floor`); the allowance is the goal."""
    count_ratio: float = 1.0
    """Upstream tokens per counted token (`tokens.calibration`); allowance, trigger, target and
    refusal limit are in counted tokens (the window's tokens divided by it)."""
    count_ratio_source: str = "none"
    """Where `count_ratio` came from (`tokens.calibration_rule.RatioSource`): own (the
    requester's answers), agreed (other credentials'), none, or pinned (the policy)."""
    trigger: int = 0
    target: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    protected_tokens: int = 0
    outcome: Outcome = Outcome.unchanged
    actions: list[Action] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    note_codes: list[NoteCode] = field(default_factory=list)
    """The fixed codes of `x-ctxproxy-notes`, in the order they were noted, each once."""
    cache_marks: dict[str, Any] | None = None
    """Prompt-cache breakpoints, for an upstream that caches at them (`engine.cache_marks`): the
    policy's mode, where the proxy placed some, how many the client sent and how many were
    removed, and the tokens the provider will write (as prepared and unchanged); None otherwise."""
    cache: CacheReport | None = None
    """The conversation's prompt cache (set for a reducing policy's own call)."""
    cost_estimate: dict[str, Any] | None = None
    """The prompt's price as prepared and unchanged (`tokens.prices.estimate`), set by the
    completion driver for a dry run (it knows the upstream); None otherwise."""

    def note(self, code: NoteCode, text: str) -> None:
        """Record a note for people (`notes`) and its code for programs (`note_codes`)."""
        if code not in self.note_codes:
            self.note_codes.append(code)
            self.notes.append(text)

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for action in data["actions"]:  # only the steps that report more carry a detail
            if action["detail"] is None:
                del action["detail"]
        return data

    def action_summary(self) -> str:
        steps = [f"{a.step}:{a.count}" for a in self.actions]
        return ",".join(steps) or "none"

    def summary(self) -> dict[str, Any] | None:
        """The detail of the summary standing for dropped turns, if the request carries one."""
        return next(
            (a.detail for a in self.actions if a.detail is not None and "source" in a.detail),
            None,
        )

    def summary_label(self) -> str | None:
        """`kind:source[:failure]` of that summary (`x-ctxproxy-summary`, the access line)."""
        detail = self.summary()
        if detail is None:
            return None
        failure = detail.get("failure")
        return ":".join([detail["kind"], detail["source"], *([failure] if failure else [])])


@dataclass(frozen=True)
class SyntheticTools:
    """Synthetic tools were appended to the prepared `tools`; the proxy executes their calls."""

    max_rounds: int
    """Rounds of synthetic execution per request; the call after the last one has no read tools."""
    max_page_chars: int
    allowance: int | None = None
    """The request's allowance in tokens, which every follow-up call must fit too."""
    names: tuple[str, ...] = ARTIFACT_TOOLS
    """The canonical names of the tools appended, in their order (last in `tools`)."""
    catalog: ToolCatalog | None = None
    """The tool definitions the policy deferred (`find_tools` is among `names` then)."""
    given: tuple[tuple[str, str], ...] = ()
    """(canonical name, the name preparation gave it) for tools not sent by their own name."""


@dataclass
class Prepared:
    body: bytes
    """Exactly what goes upstream: the client's own bytes when nothing changed."""
    changed: bool
    manifest: Manifest
    parsed: dict[str, Any]
    """The request as a dict (the prepared one when changed)."""
    synthetic: SyntheticTools | None = None
    """Set only when preparation appended the synthetic tools (never for a client's own tools)."""
    working_set: WorkingSetKey | None = None
    """Where the read rounds of this request are kept for the next turn (None: not kept)."""
    sent_key: WorkingSetKey | None = None
    """Where the time this request goes upstream is kept (`cache_warmth.note_sent`; None:
    nothing to keep)."""

    def headers(self) -> dict[str, str]:
        m = self.manifest
        return {
            "x-ctxproxy-policy": m.policy,
            "x-ctxproxy-tokens-before": str(m.tokens_before),
            "x-ctxproxy-tokens-after": str(m.tokens_after),
            "x-ctxproxy-actions": m.action_summary(),
            OUTCOME_HEADER: m.outcome.value,
            **({NOTES_HEADER: ",".join(m.note_codes)} if m.note_codes else {}),
            **({SUMMARY_HEADER: label} if (label := m.summary_label()) else {}),
            **({CACHE_HEADER: m.cache.label()} if m.cache is not None else {}),
        }
