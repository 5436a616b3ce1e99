"""Step: keep the tool definitions within a budget, the rest behind the proxy's `find_tools`.

Agents with many MCP servers send every tool definition on every request: a hundred tools can
take half the window before the first message. When the client's definitions count more than
`budget` tokens (a share of the allowance when <= 1), the upstream gets the tools always kept
(`keep`, names or globs, and every built-in tool), the tools the conversation used or loaded
recently (`recent_tools` of them, the forced `tool_choice` too), and one synthetic tool,
`search_tool`,
that searches the others (a lexical ranking of names, descriptions and parameter names) and loads
the best matches into the follow-up call. The client's contract is unchanged: it never sees that
tool, and a call of a deferred tool the model names directly goes to it like any other.

Unlike the other steps it acts on the request's tool definitions, not on its items: it is applied
(`engine.tool_deferral`) to the client's own call before the items are planned, whether or not
the request is over its trigger (it keeps the tool list stable from the first request on); the
planner never moves its horizon.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, field_validator

from proxy.engine.config_base import StepConfig
from proxy.engine.plan_totals import StepPlan
from proxy.engine.step_api import PrepareContext, Step, StepOutput
from proxy.synthetic.find_tools import FIND_TOOLS
from proxy.synthetic.registry import ARTIFACT_TOOLS

_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


class DeferToolsConfig(StepConfig):
    kind: Literal["defer_tools"] = "defer_tools"
    budget: Annotated[float, Field(gt=0)] = Field(
        default=0.1,
        description="The most the tool definitions may count: a share of the allowance when "
        "<= 1, else tokens. Over it, tools are deferred behind the search tool.",
    )
    keep: list[str] = Field(
        default_factory=list,
        description="Tools always sent (names or globs, case-sensitive); built-in tools always "
        "are.",
    )
    recent_tools: Annotated[int, Field(ge=0, le=256)] = Field(
        default=16,
        description="How many tools the conversation called or loaded most recently stay sent.",
    )
    slim_schemas: bool = Field(
        default=False,
        description="Slim the schemas of the tools sent and loaded, losslessly: titles that "
        "repeat a name and empty descriptions removed, definitions used once inlined.",
    )
    search_tool: str = Field(
        default=FIND_TOOLS,
        description="The search tool's name (another one when a client tool has it).",
    )

    @field_validator("search_tool")
    @classmethod
    def _tool_name(cls, name: str) -> str:
        if not _TOOL_NAME.fullmatch(name):
            raise ValueError("must be 1-64 letters, digits, `_` or `-`")
        if name in ARTIFACT_TOOLS:
            raise ValueError(f"{name!r} is the name of another of the proxy's tools")
        return name

    def limit(self, allowance: int) -> int:
        """The budget in tokens for a request of this `allowance`."""
        if self.budget <= 1:
            return int(self.budget * allowance)
        return int(self.budget)


class DeferTools(Step[DeferToolsConfig]):
    name = "defer_tools"
    config_model = DeferToolsConfig
    in_default_policy = False
    counts = "tool_definitions"

    def plan(self, ctx: PrepareContext) -> StepPlan:
        n = len(ctx.units)
        return StepPlan(costs=[ctx.unit_cost(u) for u in range(n)], limits=[0] * n)

    def rewrite(self, ctx: PrepareContext, units: list[int]) -> StepOutput:
        return StepOutput()
