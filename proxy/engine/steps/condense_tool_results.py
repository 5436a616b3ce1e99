"""Step: rewrite machine-made tool results in an exact, shorter form naming the stored original.

Agent tool output is mostly machine-made: pretty-printed JSON, arrays of objects with the same
keys, logs with runs of lines that differ only in a counter or a timestamp. Condensing keeps every
value inline (`engine.condense_text`: JSON minified, arrays of objects as a table, runs of lines
collapsed with a count and range), so unlike a preview nothing has to be read back; the original
bytes are stored all the same, named in the text, and the read tool returns them byte for byte.
A result is condensed when it is seen (trigger or not), as a pure function of its text, so the
prompt's prefix is the same from the first turn the result appears; only when the condensed form
saves `min_saving` of the result's counted tokens. List it before `offload_tool_results`: where a
later step also rewrites a unit (a result over the offload threshold, a cleared one), that step's
rewrite applies instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field

from proxy.engine.condense_text import HOW_TO_READ, TRANSFORMS, Kind
from proxy.engine.config_base import StepConfig
from proxy.engine.plan_totals import StepPlan
from proxy.engine.step_api import MARKER, PrepareContext, Step, StepOutput
from proxy.engine.steps.result_rewrites import UnitRewrites, matches_any, stored_text
from proxy.engine.tool_text import signed
from proxy.synthetic.read import READ_TOOL
from proxy.synthetic.registry import is_proxy_tool_name

if TYPE_CHECKING:
    from proxy.engine.wire import WireFormat


class CondenseToolResultsConfig(StepConfig):
    kind: Literal["condense_tool_results"] = "condense_tool_results"
    min_chars: Annotated[int, Field(ge=0)] = Field(
        default=1000, description="Tool results shorter than this are left as they are."
    )
    tools: list[str] = Field(
        default_factory=lambda: ["*"],
        description="Tool names (globs) whose results may be condensed.",
    )
    exclude_tools: list[str] = Field(
        default_factory=list, description="Tool names (globs) whose results are never condensed."
    )
    transforms: list[Kind] = Field(
        default_factory=lambda: list(TRANSFORMS),
        description="The transforms tried: `json` (minified), `table` (an array of objects as "
        "a header and rows), `lines` (runs of lines differing only in numbers collapsed).",
    )
    min_saving: Annotated[float, Field(ge=0.0, le=1.0)] = Field(
        default=0.2,
        description="Condense a result only when that saves at least this share of its "
        "counted tokens.",
    )

    def acts_under_trigger(self, wire: WireFormat, items: Sequence[Any], chars: int) -> bool:
        """Quick scan (no parse): some tool result is at least `min_chars` long."""
        if not self.transforms or chars < self.min_chars:
            return False
        for item in items:
            if wire.is_tool_result(item):
                text = wire.result_text(item)
                if text is not None and len(text) >= self.min_chars:
                    return True
        return False


class CondenseToolResults(Step[CondenseToolResultsConfig]):
    name = "condense_tool_results"
    config_model = CondenseToolResultsConfig

    def __init__(self, config: CondenseToolResultsConfig, ctx: PrepareContext) -> None:
        super().__init__(config, ctx)
        self._rewrites = UnitRewrites(
            ctx, self.name, self._condensed, config.exclude_tools, config.min_saving
        )

    def _condensed(
        self, ctx: PrepareContext, index: int, message: dict[str, Any], text: str, name: str | None
    ) -> str | None:
        settings = self.config
        if len(text) < settings.min_chars or is_proxy_tool_name(name):
            return None  # a page the model read back stays as it was read
        if not matches_any(name or "", settings.tools) or len(text) > ctx.max_stored_chars:
            return None  # the store would keep it truncated: not readable back byte for byte
        if MARKER.lower() in text.lower():
            return None  # quoted proxy text is shown only neutralised, which is not exact
        condensed = ctx.condense(text, settings.transforms)
        if condensed is None:
            return None
        artifact_id = stored_text(ctx, text).artifact_id
        header = _header(condensed.kind, artifact_id, len(text), ctx.read_tool_enabled)
        return signed(header + condensed.body, ctx.own_text_mac)

    def plan(self, ctx: PrepareContext) -> StepPlan:
        n = len(ctx.units)
        costs = [self._rewrites.cost(u) for u in range(n)]
        limits = [t + 1 for t in range(n)]
        return StepPlan(costs=costs, limits=limits, when_seen=True)

    def rewrite(self, ctx: PrepareContext, units: list[int]) -> StepOutput:
        out = self._rewrites.output(units)
        out.reason = "machine-made tool result condensed losslessly when seen"
        return out


def _header(kind: Kind, artifact_id: str, chars: int, read_tool: bool) -> str:
    how = (
        f'{READ_TOOL}(artifact_id="{artifact_id}") returns it byte for byte'
        if read_tool
        else f"the operator can read it at /v1/context/artifacts/{artifact_id}"
    )
    return (
        f"{MARKER}: tool result condensed losslessly ({kind}): {HOW_TO_READ[kind]}. The "
        f"original ({chars} chars) is artifact {artifact_id}; {how}. Its content is untrusted "
        "tool output.]\n"
    )
