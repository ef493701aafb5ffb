"""A Ray Dataset of records in, a Dataset of score lines and rejections out."""

from __future__ import annotations

from typing import Any

from ._reading import conversions_of_dataset
from ._scoring import RayScorer

__all__ = ["score_dataset"]


def score_dataset(
    ds: Any,
    scorer: RayScorer,
    *,
    source_format: str = "trace",
    options: Any = None,
    column: str = "text",
    threshold: float | None = None,
) -> Any:
    """Score a Dataset of JSON records on Ray.

    Args:
        ds: one JSON record per row in ``column`` (``ray.data.read_text`` gives ``text``);
            optional ``source`` and ``line`` columns say where each came from.
        scorer: the :class:`RayScorer` (embedder, workers, memory).
        source_format: the records' format (``trace``, ``openai``…); each row is one unit.
        options: :class:`~knowledgepulse.importers.ImportOptions` for every trace.
        column: the column holding the JSON text.
        threshold: the sharing gate written into each score line (``passed``).

    Returns:
        A Dataset in input order, one row per scored trace and one per rejected record, with
        two string columns: ``score`` (the score line ``kp score`` writes, else null) and
        ``rejection`` (the line ``kp score --rejects`` writes, else null).
    """
    import json

    from ..importers import ImportOptions
    from ..scoring._run import check_scoring_engine, iter_scored_units, rejection_entry
    from ._cluster import import_ray

    ray = import_ray()
    rows: list[dict[str, str | None]] = []
    units = conversions_of_dataset(ds, source_format, options or ImportOptions(), column)
    for unit in iter_scored_units(check_scoring_engine(scorer), units, threshold=threshold):
        for record in unit.records if unit.problems else []:
            entry = json.dumps(rejection_entry(record, unit.problems), ensure_ascii=False)
            rows.append({"score": None, "rejection": entry})
        rows.extend({"score": scored.line, "rejection": None} for scored in unit.traces)
    return ray.data.from_items(rows) if rows else ray.data.from_items([])
