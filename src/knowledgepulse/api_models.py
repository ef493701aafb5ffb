"""What the ``/v1`` API answers: pydantic models, so the OpenAPI document describes every response.

One contract for both servers of the API: ``kp serve`` (:mod:`knowledgepulse.service`) over a
knowledge base, and ``kp view`` (:mod:`knowledgepulse.viewer`) over files. Both answer with
these models, and ``tests/viewer/test_contract.py`` validates every ``kp view`` answer against
the service's OpenAPI document. What only ``kp view`` knows (the files read, a trace's eval
line, the curation groups) is in fields the service leaves out (:data:`VIEWER_ONLY`); what only
a knowledge base knows (when a trace was added, the threshold) is null in ``kp view``.

Scores are the library's own :class:`~knowledgepulse.records.ScoreRecord`; request bodies are
ReasoningTraces (:func:`trace_schemas` puts their schema in the OpenAPI components).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from ._schema import ReasoningTrace
from .records import GroupDuplicate, Relation, ScoreRecord

__all__ = [
    "VIEWER_ONLY",
    "Contribution",
    "ContributionBatch",
    "ContributionStatus",
    "ErrorBody",
    "Group",
    "GroupList",
    "Health",
    "KeyInfo",
    "NearestRef",
    "Preference",
    "Problem",
    "ScoreResponse",
    "SearchHit",
    "SearchRequest",
    "SearchResponse",
    "Stats",
    "TraceDetail",
    "TraceList",
    "TraceListItem",
    "components",
    "trace_schemas",
]

ContributionStatus = Literal["accepted", "already_stored", "rejected", "conflict"]
#: How recall orders what it finds: ``relevant`` by the query alone, ``successful``
#: successful, high-value attempts first.
Preference = Literal["relevant", "successful"]

_ADDED_AT = "When the trace was stored; null in kp view (files hold no time of adding)."
_VIEW = "kp view only (kp serve leaves it out): "


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
    added_at: str | None = Field(description=_ADDED_AT)
    objective: str | None


class TraceList(_Answer):
    """``GET /v1/traces``: one page of traces."""

    items: list[TraceListItem]
    total: int = Field(description="How many traces match, over all pages.")


class TraceDetail(_Answer):
    """``GET /v1/traces/{id}``: the stored trace, its score record, and its near-duplicates."""

    trace: dict[str, Any] | None = Field(
        description="The ReasoningTrace as stored (redacted); null in kp view when only its "
        "score or eval line was read."
    )
    record: ScoreRecord | None
    added_at: str | None = Field(description=_ADDED_AT)
    source: str | None
    near_duplicates: list[NearestRef] = Field(
        description="Its copies, most similar first (exact copies at 1.0, near copies at their "
        "estimated Jaccard similarity). kp serve: the stored copies the key may see (the copy "
        "decision of kp curate); kp view: the traces kp curate --groups grouped with this one."
    )
    sources: dict[str, str] | None = Field(
        default=None,
        description=_VIEW + "where each kind of record was read, e.g. "
        '{"score": "scores.jsonl:3", "trace": "traces.jsonl:3"}.',
    )
    eval: dict[str, Any] | None = Field(
        default=None, description=_VIEW + "the trace's kp eval line (knowledgepulse.eval/1)."
    )


class SearchRequest(_Answer):
    """``POST /v1/search``: a text or a trace, and how many results."""

    text: str | None = Field(default=None, min_length=1)
    trace: dict[str, Any] | None = Field(
        default=None, description="A ReasoningTrace: search by its task text."
    )
    k: int = Field(default=10, ge=1, le=1000)
    prefer: Preference = Field(
        default="relevant",
        description="relevant: by the query alone; successful: successful, high-value "
        "attempts first among the traces found.",
    )


class SearchHit(_Answer):
    """A trace found by ``POST /v1/search``, how similar it is to the query and how it was
    found."""

    id: str
    similarity: float
    value: float | None
    domain: str | None
    objective: str | None
    found_by: Literal["vector", "text", "both"] | None = Field(
        default=None,
        description="Which search found it: the vector search, the full-text search of the "
        "stored tasks, or both (null in kp view, which matches words).",
    )
    vector_rank: int | None = Field(
        default=None, description="Its rank in the vector search (1 = first; null: not there)."
    )
    text_rank: int | None = Field(
        default=None, description="Its rank in the full-text search (1 = first; null: not there)."
    )


class SearchResponse(_Answer):
    """``POST /v1/search``: the traces found, best first."""

    hits: list[SearchHit]
    reason: str | None = Field(
        default=None,
        description="Why nothing was found, when nothing was (a query of only stop words or "
        "punctuation, or no match).",
    )


class KeyInfo(_Answer):
    """The key that asked: what it may do and whose traces it sees besides the network's."""

    name: str
    scope: str = Field(description="read, contribute or admin.")
    team: str | None = Field(description="The key's org: it sees that org's org-visible traces.")


class Stats(_Answer):
    """``GET /v1/stats``: counts over the traces the key may see, and the service's setup."""

    traces: int
    by_domain: dict[str, int]
    mean_value: float | None
    last_added_at: str | None
    threshold: float | None = Field(description="The base's threshold; null in kp view.")
    model: str | None
    dimensions: int | None
    hidden: int | None = Field(
        default=None,
        description="Traces of the base this key may not see (their visibility): counted, "
        "never shown. Null in kp view.",
    )
    key: KeyInfo | None = Field(default=None, description="The key asking; null in kp view.")
    scored: int | None = Field(default=None, description=_VIEW + "traces with a score line.")
    with_steps: int | None = Field(default=None, description=_VIEW + "traces read in full.")
    evaluated: int | None = Field(default=None, description=_VIEW + "traces with an eval line.")
    groups: int | None = Field(default=None, description=_VIEW + "groups of near-duplicates.")
    duplicates: int | None = Field(
        default=None, description=_VIEW + "traces dropped in those groups."
    )
    files: list[str] | None = Field(default=None, description=_VIEW + "the files read.")
    skipped: list[str] | None = Field(
        default=None, description=_VIEW + "each line that could not be shown, 'file:line: why'."
    )
    warnings: list[str] | None = Field(
        default=None, description=_VIEW + "each second record of a kind for one id (ignored)."
    )
    search: Literal["text"] | None = Field(
        default=None, description=_VIEW + "'text': search matches words, there is no embedder."
    )


class Group(_Answer):
    """One group of near-duplicates of ``GET /v1/groups`` (kp view): a ``kp curate --groups``
    line and where it was read."""

    kept: str
    relation: Relation | None = Field(
        default=None, description="The group's relation (exact, near_copy, same_task)."
    )
    duplicates: list[GroupDuplicate]
    reason: str
    source: str = Field(description="Where the line was read: 'file:line'.")


class GroupList(_Answer):
    """``GET /v1/groups`` (kp view only: a knowledge base keeps no groups)."""

    groups: list[Group]


#: The fields of each answer only ``kp view`` fills, which ``kp serve`` leaves out.
VIEWER_ONLY: dict[type[BaseModel], set[str]] = {
    TraceDetail: {"sources", "eval"},
    Stats: {
        "scored",
        "with_steps",
        "evaluated",
        "groups",
        "duplicates",
        "files",
        "skipped",
        "warnings",
        "search",
    },
}


class Health(_Answer):
    """``GET /healthz``: whether the base answers, and which embedder scores."""

    status: Literal["ok", "unavailable"]
    version: str
    knowledge_base: dict[str, Any]
    embedder: dict[str, Any]
    redaction: str


def components(model: type[BaseModel]) -> dict[str, Any]:
    """``model``'s JSON Schema and the schemas it uses, by name, as OpenAPI components."""
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    defs: dict[str, Any] = schema.pop("$defs", {})
    return {**defs, model.__name__: schema}


def trace_schemas() -> dict[str, Any]:
    """The ReasoningTrace JSON Schema and the schemas it uses, by name, referring to each other
    as OpenAPI components (``#/components/schemas/...``)."""
    schema = TypeAdapter(ReasoningTrace).json_schema(
        ref_template="#/components/schemas/{model}", mode="validation", by_alias=True
    )
    defs: dict[str, Any] = schema.pop("$defs", {})
    return {**defs, "ReasoningTrace": schema}
