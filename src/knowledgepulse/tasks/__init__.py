"""The task facet: what a trace was asked to do, as one short text.

Whole-trace text answers "what is this task" badly: every conversation of one agent shares its
greetings, its policies and its tool results, so whole-trace vectors crowd together. The task
is what the user asked: the objective and the user's own turns (where the importer marked
them, ``"source": "user"`` on a step), which carry the task's entities (the user id, the
reservation, the file) across the conversation. On the 200 bundled tau-bench conversations
(50 tasks x 4 attempts; all-MiniLM-L6-v2) the nearest other conversation by this text is an
attempt at the same task for 94 % of them, against 20 % by whole-trace vectors
(docs/knowledge-base.md, ``kp curate --by task``).

- :func:`task_text` — the text, cut to :data:`TASK_CHARS` characters (one MiniLM window), and
  what it was made from.
- :func:`opening_text` — the first user message alone (recall compares a query with it).
- :func:`task_vectors` — unit vectors of many traces' task texts, centred on their own mean
  (order-free: the mean of a set), which is what separates tasks of one domain.
- :class:`RunFacet` — how a run did its task: the values its tool calls were given (the
  user id, the reservation, the file: the objects of the task) and its tools in order.
- :mod:`._novelty` — the task novelty: the similarity of two traces by these facets, and the
  calibrated novelty a Scorer reports from it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from .._schema import ReasoningTrace

__all__ = [
    "ENTITY_WEIGHT",
    "NOVELTY_SCALE",
    "REPEAT_SIMILARITY",
    "SAME_TASK_SIMILARITY",
    "TASK_CHARS",
    "TASK_NOVELTY",
    "RunFacet",
    "TaskText",
    "centred_rows",
    "entity_similarity",
    "novelty_of_similarity",
    "opening_text",
    "run_facet",
    "task_similarity",
    "task_text",
    "task_vectors",
]

#: Characters of the task text embedded: about one 256-token MiniLM window of English.
TASK_CHARS = 1_000


@dataclass(frozen=True)
class TaskText:
    """A trace's task text and what it was made from: ``objective+user`` (the objective and
    the user's turns), ``objective`` (no turn marked as the user's), ``user`` (no objective:
    the user's turns), ``first_step`` (neither: the first step with words) or ``none`` (no
    words at all: the empty text, which every such trace shares)."""

    text: str
    source: str


def task_text(trace: ReasoningTrace) -> TaskText:
    """The objective, then each turn the importer marked as the user's, cut to
    :data:`TASK_CHARS` characters (an objective of a megabyte is cut, not refused).

    Without an objective (blank), the user's turns stand alone; without those, the first
    step that has words."""
    turns = [
        step.content
        for step in trace.steps
        if step.content and getattr(step, "source", None) == "user"
    ]
    objective = trace.task.objective[: TASK_CHARS + 1]
    if objective.strip():
        text = "\n".join([objective, *turns])[:TASK_CHARS]
        return TaskText(text, "objective+user" if turns else "objective")
    if turns:
        return TaskText("\n".join(turns)[:TASK_CHARS], "user")
    for step in trace.steps:
        if step.content and step.content.strip():
            return TaskText(step.content[:TASK_CHARS], "first_step")
    return TaskText("", "none")


def opening_text(trace: ReasoningTrace) -> TaskText:
    """The trace's opening: what its user asked first, as an agent starting the task has it
    when it recalls (the first user message). The objective, cut to :data:`TASK_CHARS`
    characters; without one, the first turn the importer marked as the user's (``user``);
    without that, the first step that has words (``first_step``); else ``none``.

    Recall compares a query with it beside the task text: a first message (``Hi! I need to
    change my flight from Texas to Newark``) is nearer the other attempts' first messages
    than their whole task texts, which add every later turn (docs/mcp.md)."""
    objective = trace.task.objective
    if objective.strip():
        return TaskText(objective[:TASK_CHARS], "objective")
    for step in trace.steps:
        if step.content and step.content.strip() and getattr(step, "source", None) == "user":
            return TaskText(step.content[:TASK_CHARS], "user")
    for step in trace.steps:
        if step.content and step.content.strip():
            return TaskText(step.content[:TASK_CHARS], "first_step")
    return TaskText("", "none")


#: The most values a run facet keeps, and the longest value (characters): enough for the
#: objects of a task, bounded for a run of 10^4 tool calls.
MAX_ENTITIES = 256
MAX_ENTITY_CHARS = 100
#: A value of more words than this is free text, not an object of the task.
MAX_ENTITY_WORDS = 5


@dataclass(frozen=True, slots=True)
class RunFacet:
    """How a run did its task: ``entities``, the values its tool calls were given (case
    folded, each scalar of at most five words once: ``mia_li_3668``, ``hat136``), and ``tools``, the tools it
    called in order. Two attempts at one task name the same objects; the tools say whether
    it was done the same way."""

    entities: frozenset[str]
    tools: tuple[str, ...]


def _scalars(value: Any) -> Any:
    if isinstance(value, dict):
        for item in value.values():
            yield from _scalars(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _scalars(item)
    elif value is not None and not isinstance(value, bool):
        text = str(value).strip().casefold()
        # Free text (a thought passed to a "think" tool, a message) names no object.
        if text and len(text.split()) <= MAX_ENTITY_WORDS:
            yield text[:MAX_ENTITY_CHARS]


def run_facet(trace: ReasoningTrace) -> RunFacet:
    """The :class:`RunFacet` of ``trace`` (tool calls are the steps with a tool and input)."""
    entities: set[str] = set()
    tools: list[str] = []
    for step in trace.steps:
        if step.tool is None or step.type == "observation":
            continue
        tools.append(step.tool.name)
        if step.input and len(entities) < MAX_ENTITIES:
            for value in _scalars(step.input):
                entities.add(value)
                if len(entities) >= MAX_ENTITIES:
                    break
    return RunFacet(frozenset(entities), tuple(tools))


def centred_rows(vectors: npt.ArrayLike) -> npt.NDArray[np.float32]:
    """Unit rows less their mean, made unit again (a row equal to the mean stays zero)."""
    rows = np.asarray(vectors, dtype=np.float64)
    if rows.shape[0] == 0:
        return rows.astype(np.float32)
    rows = rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
    rows = rows - rows.mean(axis=0)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return np.where(norms > 1e-9, rows / np.maximum(norms, 1e-12), 0.0).astype(np.float32)


def task_vectors(
    traces: Sequence[ReasoningTrace], embedder: Any, batch_size: int = 64
) -> npt.NDArray[np.float32]:
    """The task texts of ``traces`` embedded by ``embedder``, centred on their mean."""
    texts = [task_text(trace).text for trace in traces]
    rows = [
        np.asarray(embedder.embed(texts[i : i + batch_size]), dtype=np.float32)
        for i in range(0, len(texts), batch_size)
    ]
    if not rows:
        return np.zeros((0, int(embedder.dimensions)), dtype=np.float32)
    return centred_rows(np.concatenate(rows))


from ._novelty import (  # noqa: E402  (below the facets it is computed from)
    ENTITY_WEIGHT,
    NOVELTY_SCALE,
    REPEAT_SIMILARITY,
    SAME_TASK_SIMILARITY,
    TASK_NOVELTY,
    entity_similarity,
    novelty_of_similarity,
    task_similarity,
)
