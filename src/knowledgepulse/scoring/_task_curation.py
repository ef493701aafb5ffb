"""Curation by task: group the attempts at one task, keep the best K of each.

Attempts at one task are a relation of their own (``same_task``), never a copy: each is a run
of its own. ``kp curate --by task`` groups them by their task facet
(:mod:`knowledgepulse.tasks`: the objective and the user's turns, embedded, centred on the
pile's mean) with the walk of :func:`~knowledgepulse.scoring._curation.walk`: successful runs
first, then the highest value (ties: the smallest id); each leader takes every unassigned
trace whose task vector is at cosine ≥ ``similarity`` to its own. Of each group the leader and
the next ``keep_per_task - 1`` members by the same order are kept. Order-free: the mean is the
pile's, the neighbours come from an index in id order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from .._schema import ReasoningTrace
from ..tasks import task_vectors
from ._curation import (
    CurationResult,
    Duplicate,
    DuplicateGroup,
    _neighbours,
    distinct_traces,
    trace_value,
    walk,
)
from ._profiles import ProfileRegistry, global_registry

__all__ = ["TASK_SIMILARITY", "curate_tasks"]

#: Cosine of centred task vectors from which two traces are attempts at one task, by default:
#: on the 200 tau-bench conversations (task ids as truth; MiniLM OpenVINO bf16) the grouped
#: pairs are of one task 83.5 % of the time, and 66.0 % of same-task pairs are grouped
#: (0.6: 77.8 % / 70.0 %; 0.7: 87.2 % / 57.0 %; docs/knowledge-base.md).
TASK_SIMILARITY = 0.65
RELATION = "same_task"


def curate_tasks(
    traces: Iterable[ReasoningTrace | Mapping[str, Any]],
    *,
    embedder: Any,
    similarity: float = TASK_SIMILARITY,
    keep_per_task: int = 1,
    profiles: ProfileRegistry | None = None,
    batch_size: int = 64,
) -> CurationResult:
    """Group the attempts at one task and keep the best ``keep_per_task`` of each.

    Args:
        traces: the pile (models or mappings). Repeated ids: the first one is used.
        embedder: the embedder of the task texts (MiniLM).
        similarity: the cosine of centred task vectors from which two traces are attempts at
            one task.
        keep_per_task: how many attempts of each group are kept (best first: successful,
            then by value).
        profiles: domain weights for the values (default: the registered profiles).
        batch_size: texts embedded per call.

    Raises:
        ValueError: ``similarity`` not in (-1, 1], or ``keep_per_task`` < 1.
    """
    if not -1.0 < similarity <= 1.0:
        raise ValueError(f"similarity must be in (-1, 1], got {similarity!r}")
    if keep_per_task < 1:
        raise ValueError(f"keep_per_task must be at least 1, got {keep_per_task!r}")
    registry = profiles if profiles is not None else global_registry().copy()
    pile = distinct_traces(traces)
    if not pile:
        return CurationResult(kept=[], groups=[], similarity=similarity)
    canonical = sorted(pile, key=lambda t: t.id)
    ids = [trace.id for trace in canonical]
    values = np.array([trace_value(t, None, registry) for t in canonical], dtype=np.float64)
    succeeded = np.array([int(t.metadata.success) for t in canonical], dtype=np.int64)
    vectors = task_vectors(canonical, embedder, batch_size)
    neighbours = _neighbours(vectors, similarity)

    def same_task(position: int) -> list[tuple[int, float, str]]:
        return [(other, sim, RELATION) for other, sim in neighbours[position]]

    assigned = np.zeros(len(ids), dtype=bool)
    position_of = {trace_id: p for p, trace_id in enumerate(ids)}
    kept_ids: set[str] = set()
    groups: list[DuplicateGroup] = []
    for position, group in walk(
        ids, values, assigned, same_task, similarity, "task cosine", first=succeeded
    ):
        kept_ids.add(ids[position])
        if group is None:
            continue
        if keep_per_task > 1:
            group = _keep_more(group, keep_per_task - 1, position_of, succeeded, values)
            kept_ids.update(group.also_kept)
        if group.duplicates or group.also_kept:
            groups.append(group)
    return CurationResult(
        kept=[trace for trace in pile if trace.id in kept_ids],
        groups=groups,
        values=dict(zip(ids, values.tolist())),
        similarity=similarity,
    )


def _keep_more(
    group: DuplicateGroup,
    more: int,
    position_of: dict[str, int],
    succeeded: np.ndarray[Any, Any],
    values: np.ndarray[Any, Any],
) -> DuplicateGroup:
    """``group`` with its best ``more`` members kept too (successful first, then by value,
    then by id)."""

    def best(member: Duplicate) -> tuple[int, float, str]:
        p = position_of[member.id]
        return (-int(succeeded[p]), -float(values[p]), member.id)

    ranked = sorted(group.duplicates, key=best)
    also = [member.id for member in ranked[:more]]
    dropped = [member for member in group.duplicates if member.id not in set(also)]
    reason = group.reason + f"; {len(also)} more kept (--keep-per-task {more + 1})"
    return replace(group, duplicates=dropped, also_kept=also, reason=reason)
