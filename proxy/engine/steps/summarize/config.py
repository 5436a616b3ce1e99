"""The `summarize` step's settings (its `steps` entry in a policy file)."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal, Self

from pydantic import Field, PrivateAttr

from proxy.engine.steps.drop_turns import TurnsConfig
from proxy.engine.steps.summarize.summarizer import SummarizerConfig


class SummarizeConfig(TurnsConfig):
    kind: Literal["summarize"] = "summarize"
    keep_recent_turns: Annotated[int, Field(ge=0)] = Field(
        default=2,
        description="The most recent N turns are never summarized (the current one always is "
        "kept). Two, not drop_turns' one: a summary cut happens once per roll-up, and the turn "
        "before the current one is what the summary most often lacks.",
    )
    summarizer: SummarizerConfig = Field(default_factory=SummarizerConfig)
    roll_up_turns: Annotated[int, Field(ge=0)] = Field(
        default=12,
        description="The summary rolls up (takes in the turns dropped since its last roll-up) "
        "only at a cut at least this many turns after that roll-up, and only once those turns "
        "add up to `roll_up_after`; until then they stand behind one short item after it "
        "(archived as drop_turns does, with what they change of the summary). The summary's "
        "bytes change only at a roll-up, so the cuts in between break the prompt prefix after "
        "it, not before it. 0 (with roll_up_after 0) = roll up at every cut.",
    )
    restate: Literal["at_once", "at_cuts"] = Field(
        default="at_once",
        description="When a fact line of the summary (or of the item after it) that a later "
        "turn corrected is written at its current value, the old one beside it: `at_once`, "
        "in the request that brings the correction (no line shows a superseded value alone; "
        "the prompt prefix breaks at the summary then), or `at_cuts`, at the next cut (the "
        "corrections made up to it; in between the corrected line stands as it was and the "
        "correction later in the prompt, and the prefix breaks only where a cut breaks it).",
    )
    roll_up_after: Annotated[float, Field(ge=0, le=1000)] = Field(
        default=1.0,
        description="The tokens of dropped turns a roll-up waits for, in allowances (see "
        "`roll_up_turns`).",
    )

    _header_only: bool = PrivateAttr(default=False)
    relax_note: ClassVar[str] = (
        "last resort before refusing: the summary of the dropped turns was left out (its "
        "header still names the archive)"
    )

    def relaxed(self, level: int = 1) -> Self | None:
        """The last resort before a refusal: the summary shrinks to its header (as much as a
        drop notice), the digest and the list of tool results left out."""
        if self._header_only:
            return None
        relaxed = self.model_copy()
        relaxed._header_only = True
        return relaxed

    @property
    def header_only(self) -> bool:
        return self._header_only

    def precompute_at(self) -> float | None:
        summarizer = self.summarizer
        return summarizer.precompute_at if summarizer.kind == "llm" else None
