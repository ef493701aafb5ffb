"""One run is one record: the input records that hold the events of one run count once.

A JSON list whose elements are the events of one run (a conversation's messages, the spans of
one trace) is read element by element, each with its ``index``, so that a problem names the
element (``[7].attributes``) and ``--rejects`` keeps each element with its place. Once
converted, those elements are one run: the accounting line (``records in: N``) counts runs
(:attr:`~._stream.Conversion.counted`), not elements.

The API for importers and readers: :func:`is_one_run`.
"""

from __future__ import annotations

from collections.abc import Sequence

from knowledgepulse._io import InputRecord

__all__ = ["is_one_run"]


def is_one_run(records: Sequence[InputRecord]) -> bool:
    """Whether a unit's records, converted together, are the events of one run and count
    once: several records of one source that all read well. A broken record is never folded
    into a run (it counts on its own, so the reader sees it)."""
    if len(records) <= 1:
        return False
    first = records[0]
    return all(r.error is None and r.source == first.source for r in records)
