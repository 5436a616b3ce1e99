"""The summarizer seam: what the `summarize` step asks of a model, and what it accepts back.

The step hands a `Summarizer` (`StepServices.summarizer`, assembled per request at the edge: an
`Upstream` with the tenant's credentials, `completion.summarizer`) a `SummaryCall`: fixed
instructions, the previous summary when rolling up, and a plain transcript of the turns to fold
in. The answer must be one JSON object of `SummaryShape` (facts with their current values,
decisions, open questions, files and resources touched, errors seen): anything else is a
failure (`SummarizerError("invalid")`), like a transport error or a timeout. Only what loses
nothing is let through: a list left out (none of its kind), the object in a ```json fence or
between words around it. The shape's JSON schema (`SummaryShape.model_json_schema()`, named
`SCHEMA_NAME`) goes with the call, for an upstream that constrains its answer to it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Protocol

from pydantic import Field, ValidationError

from proxy.engine.config_base import StrictModel

Failure = Literal["upstream", "timeout", "invalid"]

INSTRUCTIONS = (
    "You compact the older part of a conversation so that an assistant can go on without it. "
    "Answer with one JSON object and nothing else, with exactly these keys: "
    '"facts": a list of {"name": ..., "value": ...} with the CURRENT value of every fact, '
    "figure, id, date, owner or setting stated (a later correction replaces an earlier "
    'value); "decisions": a list of strings; "open_questions": a list of strings; '
    '"resources": the files, urls and ids that were read or changed; "errors": the error '
    "messages seen, verbatim. Keep every value exact. If a previous summary is given, fold it "
    "in: keep what still holds, update what changed."
)


class SummarizerError(Exception):
    def __init__(self, failure: Failure, message: str) -> None:
        super().__init__(message)
        self.failure: Failure = failure


@dataclass(frozen=True)
class SummaryCall:
    instructions: str
    previous: str
    """The summary being rolled up ("" for a first summary)."""
    transcript: str
    max_tokens: int
    model: str | None
    """None: the request's model."""
    upstream: str | None
    """An upstream by name; None: the one serving the request."""


@dataclass(frozen=True)
class SummaryReply:
    answer: str
    model: str
    usage: dict[str, int] = field(default_factory=dict)


class Summarizer(Protocol):
    async def summarize(self, call: SummaryCall) -> SummaryReply:
        """The model's answer; raises `SummarizerError` on any failure."""
        ...


Line = Annotated[str, Field(max_length=2000)]


class Fact(StrictModel):
    name: Line
    value: Line


class SummaryShape(StrictModel):
    # A list left out is empty; an unknown key, a wrong type or a fact without its name or
    # value is an error. (A comment: a docstring would be the schema's description.)
    facts: list[Fact] = Field(default_factory=list)
    decisions: list[Line] = Field(default_factory=list)
    open_questions: list[Line] = Field(default_factory=list)
    resources: list[Line] = Field(default_factory=list)
    errors: list[Line] = Field(default_factory=list)


SCHEMA_NAME = "conversation_summary"


def parse_summary(answer: str) -> SummaryShape:
    """The answer as a `SummaryShape`, or `SummarizerError("invalid")`. A ```json fence or
    words around the object are allowed; an object with none of the shape's keys is not (it
    is no summary)."""
    try:
        data = json.loads(answer)
    except ValueError:  # fenced, or with words around it
        data = _embedded(answer)
    if not isinstance(data, dict) or not data.keys() & SummaryShape.model_fields.keys():
        raise SummarizerError("invalid", "the summary is not a JSON object of the expected shape")
    try:
        return SummaryShape.model_validate(data)
    except ValidationError as error:
        raise SummarizerError("invalid", f"the summary is not the expected JSON: {error}") from None


def _embedded(text: str) -> Any:
    """The JSON object between the first `{` and the last `}` of `text`, or None."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        return None
    try:
        return json.loads(text[start : end + 1])
    except ValueError:
        return None


def render(shape: SummaryShape) -> str:
    """The summary as the model will read it (the body under the summary's header)."""
    parts: list[str] = []
    if shape.facts:
        parts.append("Facts (current values):")
        parts += [f"- {fact.name}: {fact.value}" for fact in shape.facts]
    for title, lines in (
        ("Decisions:", shape.decisions),
        ("Open questions:", shape.open_questions),
        ("Errors seen:", shape.errors),
    ):
        if lines:
            parts.append(title)
            parts += [f"- {line}" for line in lines]
    if shape.resources:
        parts.append("Files/resources touched: " + ", ".join(shape.resources))
    return "\n".join(parts)


def batches(entries: Sequence[str], limit: int, count: Callable[[str], int]) -> list[str]:
    """`entries` (transcript lines) joined into batches of at most `limit` tokens each; an
    entry longer than that is cut to fit."""
    out: list[str] = []
    current: list[str] = []
    spent = 0
    for entry in entries:
        cost = count(entry) + 1
        if cost > limit:
            entry = entry[: max(limit * 3, 1)] + " ...[cut]"
            cost = min(count(entry) + 1, limit)
        if current and spent + cost > limit:
            out.append("\n".join(current))
            current, spent = [], 0
        current.append(entry)
        spent += cost
    if current:
        out.append("\n".join(current))
    return out


class SummarizerConfig(StrictModel):
    """Who writes the summary of the dropped turns."""

    kind: Literal["extract", "llm"] = Field(
        default="extract",
        description="extract = a deterministic digest of the span, no model; llm = a summary "
        "written by a model through an upstream (`model`, `upstream`).",
    )
    max_summary_tokens: Annotated[float, Field(gt=0)] = Field(
        default=0.15,
        description="The summary's size at most (fraction of the allowance when <= 1, else "
        "tokens), the list of tool results it names included.",
    )
    model: str | None = Field(default=None, description="llm: the model (default: the request's).")
    upstream: str | None = Field(
        default=None, description="llm: an upstream by name (default: the request's route)."
    )
    timeout_s: Annotated[float, Field(gt=0, le=600)] = Field(
        default=10.0, description="llm: a summary not written within this is a failure."
    )
    on_error: Literal["extract", "drop", "refuse"] = Field(
        default="extract",
        description="llm: when the summarizer fails (error, timeout, an answer of the wrong "
        "shape): use the extract, drop the turns behind a bare notice, or refuse the request.",
    )
    batch_tokens: Annotated[int, Field(gt=0)] | None = Field(
        default=None,
        description="llm: transcript tokens per summarizer call (default: the allowance).",
    )
    precompute_at: Annotated[float, Field(gt=0, le=1)] | None = Field(
        default=0.8,
        description="llm: from this share of the trigger, the summaries the next cut will need "
        "are made in the background, so that the request crossing the trigger finds them "
        "ready (null: never ahead of time).",
    )
    background_timeout_s: Annotated[float, Field(gt=0, le=3600)] = Field(
        default=120.0,
        description="llm: how long a summary made in the background (ahead of time, or not "
        "waited for past timeout_s) may take.",
    )
