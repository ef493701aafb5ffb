"""The value formulas (SPEC §2): four dimensions, the weighted sum, three rule overrides.

Pure functions of a trace's counts (:class:`TraceFacts`) and a domain profile; the
:class:`~knowledgepulse.Scorer` supplies novelty from its memory and calls :func:`compose`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._schema import ReasoningTrace
from ..copies import CopyMatch
from ..records import NearestRelation, NoveltyBy, NoveltySource, ScoreRecord, StoredStatus
from ._profiles import DomainProfile

if TYPE_CHECKING:
    from ..memory._cache import Nearest

__all__ = [
    "NEAR_DUPLICATE",
    "NOVELTY_FALLBACK",
    "RULE_ERROR_RECOVERY_BONUS",
    "RULE_SINGLE_THOUGHT",
    "RULE_SINGLE_TOOL_PENALTY",
    "STEP_CAP",
    "NearestRelation",
    "NoveltyBy",
    "NoveltySource",
    "StoredStatus",
    "TraceFacts",
    "ValueScore",
    "complexity",
    "compose",
    "is_near_duplicate",
    "outcome",
    "tool_diversity",
]

NOVELTY_FALLBACK = 0.5
#: From this cosine similarity up, two traces are near-duplicates: the explanation says so,
#: kp curate groups them (its default --similarity), the service and the MCP tools list them.
#: One value everywhere, measured on the 200 tau-bench airline conversations (50 tasks,
#: whole-trace MiniLM vectors, task ids as truth; docs/knowledge-base.md): at 0.95 the pairs
#: grouped together are of the same task 93.0% of the time (recall 0.267 of same-task pairs);
#: at 0.9 only 9.6% (one group held 45 conversations of different tasks).
NEAR_DUPLICATE = 0.95


def is_near_duplicate(similarity: float) -> bool:
    """Whether a trace at this cosine similarity to another is its near-duplicate.

    The one test of :data:`NEAR_DUPLICATE` (from it up), so the explanation, the service, the
    MCP tools and kp curate cannot draw the line in different places.
    """
    return similarity >= NEAR_DUPLICATE


STEP_CAP = 20
RULE_SINGLE_THOUGHT = "single_thought"
RULE_ERROR_RECOVERY_BONUS = "error_recovery_bonus"
RULE_SINGLE_TOOL_PENALTY = "single_tool_penalty"

_RELATION_WORDS: dict[str, str] = {
    "copy": "a copy",
    "same_task_same_way": "same task, done the same way",
    "same_task_other_tools": "same task, other tools",
    "same_task": "same task",
    "other_task": "another task",
}


@dataclass(frozen=True, slots=True)
class TraceFacts:
    """The counts every dimension and rule is computed from."""

    step_count: int
    unique_types: int
    error_recoveries: int
    unique_tools: int
    uses_tools: bool
    single_thought: bool
    success: bool
    confidence: float

    @classmethod
    def of(cls, trace: ReasoningTrace) -> TraceFacts:
        steps = trace.steps
        types = set()
        tools = set()
        uses_tools = False
        recoveries = 0
        for step in steps:
            types.add(step.type)
            if step.type == "error_recovery":
                recoveries += 1
            if step.tool is not None:
                uses_tools = True
                tools.add(step.tool.name)
        return cls(
            step_count=len(steps),
            unique_types=len(types),
            error_recoveries=recoveries,
            unique_tools=len(tools),
            uses_tools=uses_tools,
            single_thought=len(steps) == 1 and steps[0].type == "thought",
            success=trace.metadata.success,
            confidence=trace.outcome.confidence,
        )


def complexity(facts: TraceFacts) -> float:
    """C = min(1, types/4·0.5 + (0.3 if any error_recovery) + min(steps, 20)/20·0.2)."""
    value = (
        (facts.unique_types / 4) * 0.5
        + (0.3 if facts.error_recoveries > 0 else 0.0)
        + (min(facts.step_count, STEP_CAP) / STEP_CAP) * 0.2
    )
    return min(1.0, value)


def tool_diversity(facts: TraceFacts) -> float:
    """D = min(1, uniqueTools / max(1, steps) · 3)."""
    return min(1.0, (facts.unique_tools / max(1, facts.step_count)) * 3)


def outcome(facts: TraceFacts) -> float:
    """O = confidence · (1.0 if success else 0.3)."""
    return facts.confidence * (1.0 if facts.success else 0.3)


def _clamp_unit(value: float) -> float:
    if math.isnan(value):
        return 0.0
    return min(1.0, max(0.0, value))


@dataclass(frozen=True, slots=True)
class ValueScore:
    """A trace's value with its breakdown: each dimension, the weights, the rules that fired."""

    value: float
    complexity: float
    novelty: float
    tool_diversity: float
    outcome: float
    profile: str
    weights: tuple[float, float, float, float]
    # Not part of the hash (a list cannot be hashed); equality still compares it.
    rules: list[str] = field(default_factory=list, hash=False)
    novelty_source: NoveltySource = "no_embedder"
    trace_id: str | None = None
    weighted_sum: float = field(default=0.0)
    #: The most similar trace in memory when this one was scored (None without one).
    nearest: Nearest | None = None
    #: With a knowledge base: whether this trace was ``added`` to it, was ``already_stored``
    #: (this is then its stored score) or was ``not_added`` (it did not pass the gate).
    stored: StoredStatus | None = None
    #: The trace seen before that this one is a copy of (exact, or near: estimated Jaccard of
    #: word shingles ≥ the copy threshold), the one copy decision of every surface.
    copy_of: CopyMatch | None = None
    #: Which novelty made ``novelty`` (None: no embedder, the 0.5 fallback).
    novelty_by: NoveltyBy | None = None
    #: By the task novelty: what the nearest trace is to this one, and their similarity by
    #: the facets (before calibration).
    nearest_relation: NearestRelation | None = None
    nearest_similarity: float | None = None

    def __float__(self) -> float:
        return self.value

    @classmethod
    def from_record(cls, record: ScoreRecord | Mapping[str, Any]) -> ValueScore:
        """The score a score line describes (a knowledge base's answer for a trace it holds).

        The inverse of :meth:`ScoreRecord.of <knowledgepulse.records.ScoreRecord.of>`: a
        mapping is validated as a :class:`~knowledgepulse.records.ScoreRecord` first, so a
        broken line raises :class:`pydantic.ValidationError` naming the field. The weighted
        sum, which the line does not hold, is recomputed from the dimensions and weights.
        """
        if not isinstance(record, ScoreRecord):
            record = ScoreRecord.model_validate(record)
        w = record.weights
        weights = (w.complexity, w.novelty, w.tool_diversity, w.outcome)
        dims = (record.complexity, record.novelty, record.tool_diversity, record.outcome)
        return cls(
            value=record.score,
            complexity=dims[0],
            novelty=dims[1],
            tool_diversity=dims[2],
            outcome=dims[3],
            profile=record.profile,
            weights=weights,
            rules=list(record.rules),
            novelty_source=record.novelty_source,
            trace_id=record.id,
            weighted_sum=sum(d * wt for d, wt in zip(dims, weights)),
            nearest=record.nearest,
            stored=record.stored,
            copy_of=record.copy_of,
            novelty_by=record.novelty_by,
            nearest_relation=record.nearest_relation,
            nearest_similarity=record.nearest_similarity,
        )

    @property
    def explanation(self) -> str:
        """One plain sentence on how the value was reached."""
        w_c, w_n, w_d, w_o = self.weights
        novelty_note = {
            "embedding": "vs. traces seen before",
            "empty_cache": "first trace seen: 0.5",
            "no_embedder": "no embedder: 0.5",
        }[self.novelty_source]
        nearest = self.nearest
        if self.copy_of is not None:
            novelty_note = self.copy_of.describe()
        elif nearest is not None and nearest.id is not None:
            if self.nearest_relation is not None and self.nearest_similarity is not None:
                novelty_note = (
                    f"nearest {nearest.id}: {_RELATION_WORDS[self.nearest_relation]} "
                    f"(similarity {self.nearest_similarity:.2f})"
                )
            else:
                novelty_note = f"nearest {nearest.id} (cos {nearest.similarity:.2f})"
        text = (
            f"value {self.value:.6g} with profile {self.profile!r}: "
            f"complexity {self.complexity:.3f}×{w_c:g} + novelty {self.novelty:.3f}×{w_n:g} "
            f"({novelty_note}) + tool diversity {self.tool_diversity:.3f}×{w_d:g} + "
            f"outcome {self.outcome:.3f}×{w_o:g} = {self.weighted_sum:.4f}"
        )
        if self.rules:
            text += "; rules fired: " + ", ".join(self.rules)
        return text


def compose(
    facts: TraceFacts,
    novelty: float,
    novelty_source: NoveltySource,
    profile: DomainProfile,
    trace_id: str | None = None,
    nearest: Nearest | None = None,
    copy_of: CopyMatch | None = None,
) -> ValueScore:
    """Weighted sum, then the rule overrides in SPEC order, then clamping."""
    c, d, o = complexity(facts), tool_diversity(facts), outcome(facts)
    n = _clamp_unit(novelty)
    w_c, w_n, w_d, w_o = profile.weights
    weighted = c * w_c + n * w_n + d * w_d + o * w_o
    value = weighted
    rules: list[str] = []
    if facts.single_thought:
        value = 0.1
        rules.append(RULE_SINGLE_THOUGHT)
    if facts.error_recoveries > 2 and facts.success:
        value = min(1.0, value + 0.1)
        rules.append(RULE_ERROR_RECOVERY_BONUS)
    if facts.unique_tools <= 1 and facts.uses_tools:
        value = max(0.0, value - 0.1)
        rules.append(RULE_SINGLE_TOOL_PENALTY)
    # Rounding to 12 places drops float summation noise (0.66875, not 0.6687500000000001).
    value = round(_clamp_unit(value), 12)
    return ValueScore(
        value=value,
        complexity=c,
        novelty=n,
        tool_diversity=d,
        outcome=o,
        profile=profile.name,
        weights=profile.weights,
        rules=rules,
        novelty_source=novelty_source,
        trace_id=trace_id,
        weighted_sum=weighted,
        nearest=nearest,
        copy_of=copy_of,
    )
