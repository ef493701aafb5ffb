"""What the API answers: pydantic models, so the OpenAPI document describes every response.

Scores are the library's own :class:`~knowledgepulse.records.ScoreRecord`; request bodies are
ReasoningTraces (:func:`trace_schemas` puts their schema in the OpenAPI components).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from .._schema import ReasoningTrace
from ..records import ScoreRecord

__all__ = [
    "Contribution",
    "ContributionBatch",
    "ContributionStatus",
    "ErrorBody",
    "Health",
    "NearestRef",
    "Problem",
    "ScoreResponse",
    "SearchHit",
    "SearchRequest",
    "SearchResponse",
    "Stats",
    "TraceDetail",
    "TraceList",
    "TraceListItem",
    "trace_schemas",
]

ContributionStatus = Literal["accepted", "already_stored", "rejected", "conflict"]


class _Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Problem(_Answer):
    """One thing wrong with a request: the field's path (``steps[2].type``) and why."""

    path: str
    message: str


class ErrorBody(_Answer):
    """Every error answer: what went wrong, and for a 422 each field that is wrong."""

    detail: str
    problems: list[Problem] = Field(default_factory=list)


class NearestRef(_Answer):
    """A stored trace and its cosine similarity to the one in question."""

    id: str
    similarity: float


class ScoreResponse(_Answer):
    """``POST /v1/score``: one score record per trace, in order (nothing is stored)."""

    records: list[ScoreRecord]


class Contribution(_Answer):
    """What became of one contributed trace.

    ``status``: ``accepted`` (stored now), ``already_stored`` (the id was contributed before:
    this is the stored result), ``rejected`` (its value is below the threshold; the
    explanation says why), ``conflict`` (kept for compatibility: an id held by a trace this
    key may not see is answered as if it were free, and the trace stored under the key's
    namespace; see docs/service.md, "Threat model").
    ``nearest`` is the most similar stored trace this key may see (None: none, or one it
    may not see).
    """

    id: str
    status: ContributionStatus
    accepted: bool
    value: float | None
    threshold: float
    explanation: str
    nearest: NearestRef | None
    record: ScoreRecord | None
    added_at: str | None = None


class ContributionBatch(_Answer):
    """``POST /v1/traces/batch``: one :class:`Contribution` per trace, in order."""

    results: list[Contribution]


class TraceListItem(_Answer):
    """One row of ``GET /v1/traces``."""

    id: str
    value: float | None
    complexity: float | None
    novelty: float | None
    tool_diversity: float | None
    outcome: float | None
    domain: str | None
    success: bool | None
    nearest: NearestRef | None
    added_at: str
    objective: str | None


class TraceList(_Answer):
    items: list[TraceListItem]
    total: int = Field(description="How many traces match, over all pages.")


class TraceDetail(_Answer):
    """``GET /v1/traces/{id}``: the stored trace, its score record, and its near-duplicates."""

    trace: dict[str, Any] = Field(description="The ReasoningTrace as stored (redacted).")
    record: ScoreRecord | None
    added_at: str
    source: str | None
    near_duplicates: list[NearestRef]


class SearchRequest(_Answer):
    """``POST /v1/search``: a text or a trace, and how many results."""

    text: str | None = Field(default=None, min_length=1)
    trace: dict[str, Any] | None = Field(
        default=None, description="A ReasoningTrace: search by its embedding text."
    )
    k: int = Field(default=10, ge=1, le=1000)


class SearchHit(_Answer):
    id: str
    similarity: float
    value: float | None
    domain: str | None
    objective: str | None


class SearchResponse(_Answer):
    hits: list[SearchHit]


class Stats(_Answer):
    """``GET /v1/stats``: counts over the traces the key may see, and the service's setup."""

    traces: int
    by_domain: dict[str, int]
    mean_value: float | None
    last_added_at: str | None
    threshold: float
    model: str | None
    dimensions: int | None


class Health(_Answer):
    """``GET /healthz``: whether the base answers, and which embedder scores."""

    status: Literal["ok", "unavailable"]
    version: str
    knowledge_base: dict[str, Any]
    embedder: dict[str, Any]
    redaction: str


def trace_schemas() -> dict[str, Any]:
    """The ReasoningTrace JSON Schema and the schemas it uses, by name, referring to each other
    as OpenAPI components (``#/components/schemas/...``)."""
    schema = TypeAdapter(ReasoningTrace).json_schema(
        ref_template="#/components/schemas/{model}", mode="validation", by_alias=True
    )
    defs: dict[str, Any] = schema.pop("$defs", {})
    return {**defs, "ReasoningTrace": schema}
