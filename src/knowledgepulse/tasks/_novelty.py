"""The task novelty: how near two traces are by their facets, and what novelty that makes.

The seed's rule stays, N = 1 − (the largest similarity to what was seen), over a similarity
made of the facets:

- the **task**: the cosine of the two task texts' MiniLM vectors (one window each);
- **how it was done**: the Jaccard similarity of the values the two runs' tool calls were given
  (the user, the reservation, the file: the objects of the task), weighted
  :data:`ENTITY_WEIGHT`, where both runs called tools with values;
- a **copy** (the copies facet) is novelty 0, whatever the rest says.

Raw, that similarity crowds: any two tasks of one domain sit at cosine 0.5–0.8, and a repeat
at 0.85–1. The novelty is therefore calibrated by a fixed scale (:data:`REPEAT_SIMILARITY`,
:data:`NOVELTY_SCALE`), the same for every memory and recorded in :data:`TASK_NOVELTY`: a
similarity of 0.9 or more is a repeat (novelty 0), 0.45 or less a new task (novelty 1).

Chosen on the 200 bundled tau-bench airline conversations (50 tasks × 4 attempts; the first
attempt at a task against the repeats, in file order and 5 shuffled orders;
``python -m benchmarks novelty``, docs/scoring.md): the task text alone separates them with
AUC 0.943 in the worst order; the values of the tool calls (free text of more than five words
left out) at weight 0.1 lift it to 0.954 (mean 0.963; at 0.15 it falls again; the tool names
and argument keys alone lower it, so they only name *how* a near trace was done), and the
scale puts the median first attempt at 0.54–0.60 and the median repeat at 0.07.
"""

from __future__ import annotations

from collections.abc import Collection

__all__ = [
    "ENTITY_WEIGHT",
    "NOVELTY_SCALE",
    "REPEAT_SIMILARITY",
    "SAME_TASK_SIMILARITY",
    "TASK_NOVELTY",
    "entity_similarity",
    "novelty_of_similarity",
    "task_similarity",
]

#: The weight of the tool-call values in the similarity (the task text has the rest).
ENTITY_WEIGHT = 0.1
#: A similarity at or above this is a repeat of a task seen: novelty 0.
REPEAT_SIMILARITY = 0.9
#: Novelty per unit of similarity below :data:`REPEAT_SIMILARITY` (novelty 1 at 0.45).
NOVELTY_SCALE = 2.2
#: From this similarity on, the nearest trace is called an attempt at the same task.
SAME_TASK_SIMILARITY = 0.8
#: The name of this novelty, with every parameter: what a score line's ``novelty_by`` means.
TASK_NOVELTY = (
    "task/1: task text (objective and user turns, 1000 chars, one window) cosine, "
    f"tool-call values Jaccard x{ENTITY_WEIGHT}; novelty = clip({NOVELTY_SCALE} x "
    f"({REPEAT_SIMILARITY} - similarity))"
)


def entity_similarity(a: Collection[str], b: Collection[str]) -> float | None:
    """The Jaccard similarity of two runs' tool-call values; None when either has none (a run
    without tool calls says nothing about how it was done)."""
    if not a or not b:
        return None
    union = len(set(a) | set(b))
    return len(set(a) & set(b)) / union


def task_similarity(cosine: float, entities: float | None) -> float:
    """The similarity of two traces from their task cosine and, when both ran tools with
    values, their :func:`entity_similarity`."""
    if entities is None:
        return float(cosine)
    return (1.0 - ENTITY_WEIGHT) * float(cosine) + ENTITY_WEIGHT * entities


def novelty_of_similarity(similarity: float) -> float:
    """The calibrated novelty: 0 at :data:`REPEAT_SIMILARITY` and above, 1 at 0.45 and below,
    linear between."""
    value = NOVELTY_SCALE * (REPEAT_SIMILARITY - float(similarity))
    return min(1.0, max(0.0, value))
