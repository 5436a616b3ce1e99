"""Policy models: the declarative, per-tenant description of how a request is prepared.

Strict (`extra="forbid"`): a typo in a policy file is an error naming the key, never ignored.
Numbers in `budget` that are <= 1.0 are fractions of the allowance; larger ones are tokens.
Each part owns its config model: `budget` is `engine.budget.BudgetPolicy`, every entry of `steps`
is its step's config (`engine.steps`); this module assembles them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from proxy.engine.budget import BudgetPolicy
from proxy.engine.config_base import StepConfig, StrictModel
from proxy.engine.steps import StepConfigs, default_step_configs
from proxy.engine.steps.defer_tools import DeferToolsConfig
from proxy.engine.wire import CacheMarksMode
from proxy.tokens.backends import check_hf_tokenizer_file
from proxy.tokens.counters import resolve_tokenizer

if TYPE_CHECKING:
    from proxy.engine.wire import WireFormat

Mode = Literal["off", "inspect", "reject", "window", "compact"]
REDUCING_MODES = ("window", "compact")
"""Modes that run the steps (`compact` = `window` with `summarize` in place of `drop_turns`)."""


class PinRule(StrictModel):
    """A message matching every given field is pinned (never dropped or cleared)."""

    role: str | None = None
    name: str | None = None
    contains: str | None = Field(
        default=None, description="Substring of the message's text content."
    )


class ProtectPolicy(StrictModel):
    """Protections every step honours (each step's own, e.g. how many recent turns or tool
    exchanges it keeps, are in its entry under `steps`)."""

    first_user: bool = Field(default=True, description="Keep the first user message (the task).")
    pinned: list[PinRule] = Field(default_factory=list)


class ArtifactsPolicy(StrictModel):
    ttl_seconds: Annotated[int, Field(gt=0)] = 86_400
    max_per_scope: Annotated[int, Field(gt=0)] = 10_000
    max_chars: Annotated[int, Field(gt=0)] = 20_000_000


class ReadToolPolicy(StrictModel):
    enabled: bool = True
    max_page_chars: Annotated[int, Field(gt=0, le=20_000)] = 20_000
    max_rounds: Annotated[int, Field(ge=0, le=20)] = 4
    working_set: bool = Field(
        default=True,
        description="Keep the read rounds of a request (calls and pages, as sent) and put them "
        "back in place when the history comes back, so the model keeps what it read and the "
        "prompt keeps its prefix.",
    )


class RecordsPolicy(StrictModel):
    """What the request records of this policy's requests keep (`server.records` in the config
    says whether records are kept at all)."""

    bodies: bool = Field(
        default=False,
        description="Keep the client's request body and the first prepared body sent upstream "
        "in the record (they can be large and sensitive).",
    )
    max_body_bytes: Annotated[int, Field(gt=0)] = Field(
        default=2 * 1024 * 1024,
        description="A body larger than this is not kept (the record says `too_large`).",
    )


class CountingPolicy(StrictModel):
    tokenizer: str = Field(
        default="auto",
        description="`auto` (by model), `o200k_base`, `cl100k_base`, `estimate`, "
        "or `hf:<path to tokenizer.json>`.",
    )

    @field_validator("tokenizer")
    @classmethod
    def _known_tokenizer(cls, tokenizer: str) -> str:
        # Checked when the policy loads (check, start-up, hot reload), never on a request.
        resolve_tokenizer("", tokenizer)
        path = tokenizer.removeprefix("hf:")
        if tokenizer.startswith("hf:") and path:
            check_hf_tokenizer_file(Path(path))
        return tokenizer


class Policy(StrictModel):
    name: str = Field(default="", description="Set from the file name; not written in files.")
    extends: str | None = Field(default=None, description="Name of the policy this one builds on.")
    description: str = ""
    mode: Mode = "window"
    on_invalid: Literal["forward", "reject"] = Field(
        default="forward", description="Structurally broken messages: forward untouched, or refuse."
    )
    budget: BudgetPolicy = Field(default_factory=BudgetPolicy)
    counting: CountingPolicy = Field(default_factory=CountingPolicy)
    protect: ProtectPolicy = Field(default_factory=ProtectPolicy)
    steps: list[StepConfigs] = Field(
        default_factory=default_step_configs,
        description="The reductions tried in order until the input fits the target; where "
        "several reduce the same message, the one listed last applies. Refusal comes last.",
    )
    artifacts: ArtifactsPolicy = Field(default_factory=ArtifactsPolicy)
    cache_marks: CacheMarksMode = Field(
        default="auto",
        description="Prompt-cache breakpoints (`cache_control`) for upstreams that cache only at "
        "them (Anthropic Messages): `auto` adds up to four at stable points when the request "
        "carries none (the client's own are kept), `keep` never adds any, `off` removes them. "
        "Only in modes `window` and `compact` (the others never change a request).",
    )
    read_tool: ReadToolPolicy = Field(default_factory=ReadToolPolicy)
    records: RecordsPolicy = Field(default_factory=RecordsPolicy)
    models: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Per-model overrides: glob on the request's model (fnmatch, case-insensitive) "
        "-> partial policy, deep-merged over this one (first matching glob wins).",
    )

    @property
    def reduces(self) -> bool:
        """Whether this policy's mode runs the steps."""
        return self.mode in REDUCING_MODES

    @model_validator(mode="before")
    @classmethod
    def _compact(cls, data: Any) -> Any:
        """`mode: compact`: each `drop_turns` entry becomes a `summarize` entry with the same
        settings (the built-in steps when none are written)."""
        if not isinstance(data, dict) or data.get("mode") != "compact":
            return data
        steps = data.get("steps")
        if steps is None:
            steps = [{"kind": config.kind} for config in default_step_configs()]
        if isinstance(steps, list):
            data = {**data, "steps": [_as_summarize(entry) for entry in steps]}
        return data

    def tool_deferral(self) -> DeferToolsConfig | None:
        """The `defer_tools` entry of `steps`, if any (the first one)."""
        return next((s for s in self.steps if isinstance(s, DeferToolsConfig)), None)

    def precompute_at(self) -> float | None:
        """The lowest share of the trigger from which a step works ahead (None: none does)."""
        shares = [at for step in self.steps if (at := step.precompute_at()) is not None]
        return min(shares) if shares else None

    def acts_under_trigger(self, wire: WireFormat, items: Sequence[Any], chars: int) -> bool:
        """Whether some step reduces these items even under the trigger (a quick scan, no
        parse: `StepConfig.acts_under_trigger`); `chars` is the request's size."""
        return any(step.acts_under_trigger(wire, items, chars) for step in self.steps)


def _as_summarize(entry: Any) -> Any:
    if isinstance(entry, StepConfig):
        if entry.kind != "drop_turns":
            return entry
        # the settings written, not drop_turns' own defaults (summarize has its own)
        entry = {**entry.model_dump(exclude_unset=True), "kind": "drop_turns"}
    if isinstance(entry, dict) and entry.get("kind") == "drop_turns":
        return {**entry, "kind": "summarize"}
    return entry
