"""What every ``kp curate`` driver shares (:mod:`._curate_cmd`, :mod:`._curate_copies`): the
reading of the input into a curation, and what is said when a run stops before writing.

Below both drivers, so that neither imports the other's helpers back.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

from ..runs import Run
from ._run import read_conversions


def read_into(
    job: Any,
    stack: ExitStack,
    add: Callable[[Any], None],
    finish: Callable[[], None] | None = None,
    *,
    phase: str = "reading",
) -> Run:
    """Read every input record of ``job``, handing each trace to ``add`` (and ``finish()`` at
    the end, still under the run's signal handling): the one reading loop of every ``kp
    curate`` run, which counts each record processed once its unit converted whole. ``phase``
    is what the progress bar says: what ``add`` does to each trace while it is read."""
    run: Run = job.run(stack, phase)
    with run:
        for conversion in read_conversions(job.files, job.source_format, job.options, run):
            for trace in conversion.traces:
                add(trace)
            if not conversion.problems:
                run.tally.processed += conversion.counted
            run.step()
        if finish is not None:
            finish()
    return run


def stopped(job: Any, tally: Any, message: str) -> int:
    """A run stopped before its outputs were written: the folded rejections, the accounting
    line and ``message`` (what was written, what is kept); its exit status."""
    tally.print_folded()
    job.console.print(tally.accounting(), highlight=False)
    job.console.print(message, markup=False, highlight=False)
    return int(tally.exit_code())
