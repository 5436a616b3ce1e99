"""The base of every configuration model the engine reads from a policy file.

Strict: an unknown key is an error naming it (never ignored), values are immutable, and `nan` or
`inf` are refused wherever a number is expected.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from proxy.engine.wire import WireFormat


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class StepConfig(StrictModel):
    """One entry of a policy's `steps`: `kind` names the step (each step file narrows it to its
    own literal, the discriminator of the `steps` union)."""

    kind: str

    relax_note: ClassVar[str] = ""
    RELAX_LEVELS: ClassVar[int] = 2
    """What the manifest says when the relaxed config (below) was used."""

    def relaxed(self, level: int = 1) -> Self | None:
        """This config with its own protections loosened, tried as the last resort before a
        refusal, level by level (each looser than the one before, up to `RELAX_LEVELS`); None
        (the default) when the step has nothing to loosen at that level."""
        return None

    def acts_under_trigger(self, wire: WireFormat, items: Sequence[Any], chars: int) -> bool:
        """Whether this step reduces some of `items` even in a request under the trigger (it
        acts on what it sees, e.g. offloading every oversized result). A quick scan before any
        parse, so that requests with nothing to do stay cheap; `chars` is the request's size
        (no text in it is longer). False by default: steps act only over the trigger."""
        return False

    def precompute_at(self) -> float | None:
        """From which share of the trigger this step has work to start ahead of time (e.g. a
        summary made in the background); None (the default): never."""
        return None
