"""The records knowledgepulse writes, one per output line, defined once.

``kp score`` writes one :class:`ScoreRecord` per trace and ``kp eval`` one :class:`EvalRecord`
per case; ``kp report``, the knowledge base and any other consumer read them back through the
same types. Field names on disk equal attribute names. Every record carries a ``schema``
field (``knowledgepulse.score/1``, ``knowledgepulse.eval/1``) so a reader can tell what a
line is and which version wrote it; ``kp schema score|eval|trace`` prints the JSON Schema.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Final, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from ._schema import ReasoningTrace
from .copies import CopyMatch
from .memory._cache import Nearest
from .rubrics._rubric import EvaluationResult

__all__ = [
    "EVAL_SCHEMA",
    "GROUPS_SCHEMA",
    "SCORE_SCHEMA",
    "EvalRecord",
    "GroupRecord",
    "Nearest",
    "NearestRelation",
    "NoveltyBy",
    "NoveltySource",
    "OutputRecord",
    "RecordedScore",
    "ScoreRecord",
    "StoredStatus",
    "Weights",
    "json_schema",
    "parse_output_record",
]

SCORE_SCHEMA: Final = "knowledgepulse.score/1"
EVAL_SCHEMA: Final = "knowledgepulse.eval/1"
GROUPS_SCHEMA: Final = "knowledgepulse.groups/1"

# The values a score line carries, defined once: the scorer (``scoring/``) makes them.
#: Where novelty came from: the embedder against a non-empty memory, the embedder against an
#: empty one (0.5 by SPEC), or no embedder at all (0.5 fallback).
NoveltySource = Literal["embedding", "empty_cache", "no_embedder"]
#: Which novelty: by the task's facets (``task``) or the seed's whole-trace vector (``seed``).
NoveltyBy = Literal["task", "seed"]
#: What the nearest trace is to a trace, by the task novelty's facets.
NearestRelation = Literal[
    "copy", "same_task_same_way", "same_task_other_tools", "same_task", "other_task"
]
#: With a knowledge base: whether a trace was added to it, was already stored, or was not.
StoredStatus = Literal["added", "already_stored", "not_added"]


class RecordedScore(Protocol):
    """What a score line is made of: the attributes of a
    :class:`~knowledgepulse.ValueScore` that :meth:`ScoreRecord.of` reads. Declared here so
    the records sit below the scorer that writes them."""

    @property
    def value(self) -> float:
        """The value in [0, 1]."""

    @property
    def complexity(self) -> float:
        """The complexity dimension."""

    @property
    def novelty(self) -> float:
        """The novelty dimension."""

    @property
    def tool_diversity(self) -> float:
        """The tool diversity dimension."""

    @property
    def outcome(self) -> float:
        """The outcome dimension."""

    @property
    def profile(self) -> str:
        """The domain profile's name."""

    @property
    def weights(self) -> tuple[float, float, float, float]:
        """The profile's weights: complexity, novelty, tool diversity, outcome."""

    @property
    def rules(self) -> Sequence[str]:
        """The rules that fired."""

    @property
    def novelty_source(self) -> NoveltySource:
        """Where novelty came from."""

    @property
    def nearest(self) -> Nearest | None:
        """The most similar trace in memory when the trace was scored."""

    @property
    def explanation(self) -> str:
        """One plain sentence on how the value was reached."""

    @property
    def stored(self) -> StoredStatus | None:
        """With a knowledge base: what became of the trace there."""

    @property
    def copy_of(self) -> CopyMatch | None:
        """The trace seen before that this one is a copy of."""

    @property
    def novelty_by(self) -> NoveltyBy | None:
        """Which novelty made the novelty."""

    @property
    def nearest_relation(self) -> NearestRelation | None:
        """By the task novelty: what the nearest trace is to this one."""

    @property
    def nearest_similarity(self) -> float | None:
        """By the task novelty: the similarity to the nearest trace."""


class Weights(BaseModel):
    """A domain profile's four weights, by dimension."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    complexity: float
    novelty: float
    tool_diversity: float
    outcome: float


class _Line:
    """Writing a record as one compact JSON line, leaving out unset (None or empty) optional
    fields."""

    # A ClassVar, so pydantic leaves it a plain class attribute each record type can set.
    OMIT_WHEN_NONE: ClassVar[tuple[str, ...]] = ("index",)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = self.model_dump(mode="json", by_alias=True)  # type: ignore[attr-defined]
        for name in self.OMIT_WHEN_NONE:
            if data.get(name) in (None, {}):
                data.pop(name, None)
        for item in data.get("duplicates") or ():  # a group line's members: no null relation
            if isinstance(item, dict) and item.get("relation", "") is None:
                del item["relation"]
        return data

    def to_json(self) -> str:
        """One compact JSON line (no trailing newline)."""
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))


_INDEX_HELP = "The element's position when the input record was an element of a JSON list."
_GROUP_HELP = (
    "With --group-by FIELD: {FIELD: the task this attempt belongs to} (null when the input "
    "had no value there); kp report --group-by FIELD groups on it."
)


class ScoreRecord(_Line, BaseModel):
    """One scored trace: the value, its breakdown, the sharing decision and where it came from."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    schema_: Literal["knowledgepulse.score/1"] = Field(default=SCORE_SCHEMA, alias="schema")
    id: str
    score: float = Field(ge=0.0, le=1.0, description="The value in [0, 1].")
    complexity: float
    novelty: float
    tool_diversity: float
    outcome: float
    profile: str
    weights: Weights
    rules: list[str] = Field(default_factory=list)
    novelty_source: NoveltySource
    nearest: Nearest | None = None
    explanation: str = ""
    domain: str
    success: bool
    threshold: float | None = None
    passed: bool | None = None
    stored: StoredStatus | None = Field(
        default=None,
        description="With a knowledge base: whether the trace was added to it, was already "
        "stored (this is then its stored score), or was not added.",
    )
    # Where the trace came from: file (``<stdin>`` for stdin), line, and list index.
    source: str | None = None
    line: int | None = None
    index: int | None = Field(default=None, description=_INDEX_HELP)
    group: dict[str, str | None] | None = Field(default=None, description=_GROUP_HELP)
    copy_of: CopyMatch | None = Field(
        default=None,
        description="The trace seen before that this one is a copy of: its id (null when the "
        "reader may not see it), the relation (exact: the same normalised text; near_copy: "
        "estimated Jaccard similarity of word shingles at least the copy threshold) and the "
        "similarity. Absent when it is a copy of none.",
    )
    novelty_by: NoveltyBy | None = Field(
        default=None,
        description="Which novelty made the novelty: task (by the task's facets: the task "
        "text's vector, the values the run's tools were given, copies; calibrated) or seed "
        "(one vector of the objective and every step, 1 - cosine). Absent without an embedder.",
    )
    nearest_relation: NearestRelation | None = Field(
        default=None,
        description="By the task novelty: what the nearest trace is to this one (a copy, an "
        "attempt at the same task done the same way or with other tools, another task).",
    )
    nearest_similarity: float | None = Field(
        default=None,
        description="By the task novelty: the similarity to the nearest trace by the facets, "
        "before calibration (novelty = clip(2.2 x (0.9 - similarity))).",
    )

    @classmethod
    def of(
        cls,
        score: RecordedScore,
        trace: ReasoningTrace,
        *,
        source: str | None = None,
        line: int | None = None,
        index: int | None = None,
        threshold: float | None = None,
    ) -> ScoreRecord:
        """The record of ``score`` for ``trace``; ``passed`` is set when a threshold is given."""
        data = cls.data_of(score, trace, source=source, line=line, index=index, threshold=threshold)
        return cls.model_validate(data)

    OMIT_WHEN_NONE: ClassVar[tuple[str, ...]] = (
        "index",
        "threshold",
        "passed",
        "stored",
        "group",
        "copy_of",
        "novelty_by",
        "nearest_relation",
        "nearest_similarity",
    )

    @classmethod
    def data_of(
        cls,
        score: RecordedScore,
        trace: ReasoningTrace,
        *,
        source: str | None = None,
        line: int | None = None,
        index: int | None = None,
        threshold: float | None = None,
    ) -> dict[str, Any]:
        """``of(...).to_dict()``, built directly: what ``kp score`` writes for every trace.

        Both are built from the model's own fields, in its order (:data:`_LINE`). The values
        are already valid (a score is in [0, 1]), so the line is not validated again here;
        :meth:`of` validates it.
        """
        placed: dict[str, Any] = {"source": source, "line": line, "index": index}
        if threshold is not None:
            placed["threshold"] = float(threshold)
            placed["passed"] = score.value >= threshold
        data: dict[str, Any] = {}
        for name, key, how, read, omit_when_none in _LINE:
            if how == _ATTRIBUTE:
                value = getattr(score, name)
            elif how == _FLOAT:
                value = getattr(score, name)
                value = None if value is None else float(value)
            elif how == _PLACED:
                value = placed.get(name)
            else:
                value = read(score, trace)  # type: ignore[misc]
            if value is not None or not omit_when_none:
                data[key] = value
        return data


def _nearest_data(nearest: Nearest | None) -> dict[str, Any] | None:
    return None if nearest is None else {"id": nearest.id, "similarity": float(nearest.similarity)}


def _weights_data(weights: tuple[float, float, float, float]) -> dict[str, float]:
    return dict(zip(_WEIGHT_NAMES, map(float, weights)))


#: The dimensions in the order a profile's weights tuple holds them: the model's.
_WEIGHT_NAMES: Final = tuple(Weights.model_fields)


def _copy_data(copy_of: CopyMatch | None) -> dict[str, Any] | None:
    if copy_of is None:
        return None
    return {"id": copy_of.id, "similarity": float(copy_of.similarity), "relation": copy_of.relation}


#: How a field is read: from the score, its trace, or the place ``data_of`` was given.
_Read = Callable[[RecordedScore, ReasoningTrace], Any]

#: The fields of a score line a score's attribute of the same name does not give as it is
#: written; every other field is that attribute (a float field as a float), or the place
#: given to ``data_of`` (:data:`_PLACE`). ``group`` is added by the run.
_READ: Final[dict[str, _Read]] = {
    "schema_": lambda score, trace: SCORE_SCHEMA,
    "id": lambda score, trace: trace.id,
    "score": lambda score, trace: float(score.value),
    "weights": lambda score, trace: _weights_data(score.weights),
    "rules": lambda score, trace: list(score.rules),
    "nearest": lambda score, trace: _nearest_data(score.nearest),
    "copy_of": lambda score, trace: _copy_data(score.copy_of),
    "domain": lambda score, trace: trace.metadata.task_domain,
    "success": lambda score, trace: trace.metadata.success,
    "group": lambda score, trace: None,
}
_PLACE: Final = ("threshold", "passed", "source", "line", "index")
# How data_of reads a field (a branch, not a call: the line is built for every trace).
_PLACED, _ATTRIBUTE, _FLOAT, _OTHER = range(4)


def _how(name: str, annotation: Any) -> int:
    if name in _READ:
        return _OTHER
    if name in _PLACE:
        return _PLACED
    return _FLOAT if annotation in (float, float | None) else _ATTRIBUTE


#: A score line's fields from a score and its trace, read off the model once: in its field
#: order, each field's name and key on disk, how it is read, and whether it is left out when
#: None. :meth:`ScoreRecord.data_of` builds the line from it; :meth:`ValueScore.from_record
#: <knowledgepulse.ValueScore.from_record>` reads the line back.
_LINE: Final[tuple[tuple[str, str, int, _Read | None, bool], ...]] = tuple(
    (
        name,
        field.alias or name,
        _how(name, field.annotation),
        _READ.get(name),
        name in ScoreRecord.OMIT_WHEN_NONE,
    )
    for name, field in ScoreRecord.model_fields.items()
)


class EvalRecord(_Line, EvaluationResult):
    """One evaluated case: the :class:`~knowledgepulse.rubrics.EvaluationResult` and its place."""

    model_config = ConfigDict(frozen=True, extra="ignore")
    # Lines of rubrics without judged criteria read as they always did.
    OMIT_WHEN_NONE: ClassVar[tuple[str, ...]] = (
        "index",
        "undetermined",
        "verdicts",
        "group",
        "first_failing_step",
        "first_failing_criterion",
        "first_failing_agent",
        "first_failing_origin",
    )

    schema_: Literal["knowledgepulse.eval/1"] = Field(default=EVAL_SCHEMA, alias="schema")
    source: str | None = None
    line: int | None = None
    index: int | None = Field(default=None, description=_INDEX_HELP)
    group: dict[str, str | None] | None = Field(default=None, description=_GROUP_HELP)
    copy_of: CopyMatch | None = Field(
        default=None,
        description="The trace seen before that this one is a copy of: its id (null when the "
        "reader may not see it), the relation (exact: the same normalised text; near_copy: "
        "estimated Jaccard similarity of word shingles at least the copy threshold) and the "
        "similarity. Absent when it is a copy of none.",
    )

    @classmethod
    def of(
        cls,
        result: EvaluationResult,
        *,
        source: str | None = None,
        line: int | None = None,
        index: int | None = None,
    ) -> EvalRecord:
        """The record of ``result``, read from ``source`` at ``line`` (``index``: its place in a
        JSON list there)."""
        return cls(**dict(result), source=source, line=line, index=index)

    def to_result(self) -> EvaluationResult:
        """The plain result, without the record's schema and location."""
        return EvaluationResult(
            **{name: getattr(self, name) for name in EvaluationResult.model_fields}
        )


OutputRecord = ScoreRecord | EvalRecord


#: The relations a group line names (knowledgepulse.copies, --by task).
Relation = Literal["exact", "near_copy", "same_task"]


class GroupDuplicate(BaseModel):
    """A trace dropped as a near-duplicate of the kept one."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    similarity: float = Field(
        description="Similarity to the kept trace (6 decimals): for copies the estimated "
        "Jaccard similarity of word shingles (1.0 for an exact copy), for --by embedding the "
        "cosine of whole-trace vectors."
    )
    value: float | None = Field(description="Its value score (None: a stored trace's unknown).")
    relation: Relation | None = Field(
        default=None,
        description="What joined it to the kept trace: exact (the same normalised text), "
        "near_copy (estimated Jaccard ≥ the threshold), same_task; absent for --by embedding.",
    )


class GroupRecord(_Line, BaseModel):
    """One group of near-duplicates, a line of ``kp curate --groups``: the trace kept (or the
    stored trace they duplicate), the traces dropped in its place, and why."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    OMIT_WHEN_NONE: ClassVar[tuple[str, ...]] = ("relation", "also_kept")

    schema_: Literal["knowledgepulse.groups/1"] = Field(default=GROUPS_SCHEMA, alias="schema")
    kept: str = Field(description="The trace kept, or the stored trace of the knowledge base.")
    also_kept: list[str] | None = Field(
        default=None,
        description="kp curate --by task --keep-per-task K: the other attempts kept with it "
        "(best first); absent otherwise.",
    )
    relation: Relation | None = Field(
        default=None,
        description="exact when every member is an exact copy, else near_copy or same_task; "
        "absent for --by embedding.",
    )
    duplicates: list[GroupDuplicate] = Field(description="Most similar first, then by id.")
    reason: str


_SCHEMAS: dict[str, type[ScoreRecord] | type[EvalRecord]] = {
    SCORE_SCHEMA: ScoreRecord,
    EVAL_SCHEMA: EvalRecord,
}


def parse_output_record(data: Any) -> ScoreRecord | EvalRecord:
    """A score or eval record from a parsed JSON line.

    Lines written before records carried a ``schema`` field are recognised by their shape
    (an ``outcome_type`` and ``details`` make an eval line; ``complexity`` a score line).
    Raises ``ValueError`` naming the problem for anything else.
    """
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    kind = data.get("schema")
    if kind is None:
        if "outcome_type" in data and "details" in data:
            kind = EVAL_SCHEMA
        elif "complexity" in data and "id" in data:
            kind = SCORE_SCHEMA
        else:
            raise ValueError("neither a kp score nor a kp eval record")
        data = {**data, "schema": kind}
    model = _SCHEMAS.get(kind) if isinstance(kind, str) else None
    if model is None:
        known = ", ".join(_SCHEMAS)
        raise ValueError(f"schema: unknown record schema {kind!r} (known: {known})")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        from ._schema import format_path

        first = exc.errors(include_url=False)
        problems = "; ".join(f"{format_path(e['loc'])}: {e['msg']}" for e in first[:3])
        raise ValueError(problems) from None


def json_schema(kind: Literal["trace", "score", "eval", "groups"]) -> dict[str, Any]:
    """The JSON Schema of a ReasoningTrace, a score line, an eval line or a groups line."""
    model: Any = {
        "trace": ReasoningTrace,
        "score": ScoreRecord,
        "eval": EvalRecord,
        "groups": GroupRecord,
    }[kind]
    schema: dict[str, Any] = TypeAdapter(model).json_schema(by_alias=True)
    schema.setdefault("$schema", "https://json-schema.org/draft/2020-12/schema")
    return schema
