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
- :func:`task_vectors` — unit vectors of many traces' task texts, centred on their own mean
  (order-free: the mean of a set), which is what separates tasks of one domain.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from .._schema import ReasoningTrace

__all__ = ["TASK_CHARS", "TaskText", "centred_rows", "task_text", "task_vectors"]

#: Characters of the task text embedded: about one 256-token MiniLM window of English.
TASK_CHARS = 1_000


@dataclass(frozen=True)
class TaskText:
    """A trace's task text and its source: ``objective+user`` (the objective and the user's
    turns) or ``objective`` (no turn marked as the user's)."""

    text: str
    source: str


def task_text(trace: ReasoningTrace) -> TaskText:
    """The objective, then each turn the importer marked as the user's, cut to
    :data:`TASK_CHARS` characters."""
    turns = [
        step.content
        for step in trace.steps
        if step.content and getattr(step, "source", None) == "user"
    ]
    text = "\n".join([trace.task.objective, *turns])[:TASK_CHARS]
    return TaskText(text, "objective+user" if turns else "objective")


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
