"""``kp score`` on worker processes: the records are read and the lines written here, in order.

Used for runs whose traces are scored independently (see :mod:`knowledgepulse.scoring._parallel`);
the accounting is the one-process path's: a record counts as read when its result is taken,
so a stop (Ctrl-C, SIGTERM, ``--max-errors``) leaves nothing taken but unaccounted for.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._run import Run, read_conversions, signals_held


def write_scores_from_workers(
    files: Sequence[str],
    options: Any,
    run: Run,
    *,
    workers: int,
    profiles: Any,
    threshold: float | None,
    out: Any,
    accepted_out: Any,
    summary: Any,
    table_rows: list[Any] | None,
    table_row: Any,
) -> int:
    """Score ``files`` on ``workers`` processes, writing as ``kp score`` does; the traces
    written. ``table_rows``: collect ``table_row(ScoreRecord)`` for each line (``--table``)."""
    from ..io._reader import iter_records
    from ..records import ScoreRecord
    from ..scoring._parallel import ScoringSettings, score_records_in_workers

    settings = ScoringSettings(
        options=options,
        profiles=tuple(profiles[name] for name in profiles),
        threshold=threshold,
        accepted_lines=accepted_out is not None,
    )

    def lost(why: str) -> None:
        run.console.print(
            f"a worker process ended ({why}): its records and the rest are scored in this process",
            markup=False,
            highlight=False,
        )

    def reader(files: Sequence[str], _format: str, _options: Any) -> Any:
        records = iter_records(files, parse=False)
        return score_records_in_workers(records, settings, workers, on_worker_lost=lost)

    tally = run.tally
    written = 0
    conversions = read_conversions(files, "trace", options, run, reader)
    try:
        for conversion in conversions:
            if not conversion.traces:
                tally.processed += conversion.counted
                continue
            last = conversion.traces[-1]
            for scored in conversion.traces:
                row = None
                if table_rows is not None:
                    row = table_row(ScoreRecord.model_validate_json(scored.line))
                # Written, counted and summed up together: a stop leaves them agreeing.
                with signals_held():
                    out.write_line(scored.line)
                    if scored.passed and accepted_out is not None:
                        accepted_out.write_line(scored.accepted)
                    written += 1
                    if scored is last and not conversion.problems:
                        tally.processed += conversion.counted
                    if table_rows is not None:
                        table_rows.append(row)
                    summary.add(scored.value, scored.domain, scored.passed)
                run.step()
    finally:
        conversions.close()  # stops the workers now, whatever ended the loop
    return written
