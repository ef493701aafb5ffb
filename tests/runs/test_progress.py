"""A run's progress bar names its phase and, where the phase's total is known, shows it and
the time left; without a total it shows neither."""

from __future__ import annotations

import io
from contextlib import ExitStack

from rich.console import Console

from knowledgepulse.runs import Run


def _shown(run: Run) -> str:
    """The bar as drawn now (on a console of its own: the run's redraws its live display)."""
    out = io.StringIO()
    Console(file=out, width=120, color_system=None).print(run._progress.get_renderable())
    return out.getvalue()


def _terminal() -> Console:
    return Console(file=io.StringIO(), force_terminal=True, width=120, color_system=None)


def test_a_phase_with_a_total_shows_it_and_the_time_left() -> None:
    console = _terminal()
    with ExitStack() as stack:
        run = Run(stack, label="reading", quiet=False, console=console)
        run.tally.processed = 7
        run.phase("embedding", total=40)
        run.step(completed=10)
        shown = _shown(run)
    assert "embedding" in shown and "reading" not in shown
    assert "10/40" in shown
    # The time taken, then the time left (a placeholder until the rate is known).
    assert shown.split("10/40")[1].split()[-3:] in (
        ["0:00:00", "left", "-:--:--"],
        ["0:00:00", "left", "0:00:00"],
    )


def test_a_phase_without_a_total_counts_records_and_shows_no_time_left() -> None:
    console = _terminal()
    with ExitStack() as stack:
        run = Run(stack, label="validating", quiet=False, console=console)
        run.tally.processed = 3
        run.step()
        shown = _shown(run)
    assert "validating" in shown
    counted = shown.split("━")[-1].split()
    assert counted[0] == "3" and counted[2] == "records/s"  # the count alone: no total
    assert shown.split()[-1] == "0:00:00"  # the time taken, no time left


def test_quiet_or_no_terminal_draws_nothing() -> None:
    with ExitStack() as stack:
        run = Run(stack, label="scoring", quiet=True, console=_terminal())
        assert run._progress.disable
        run = Run(stack, label="scoring", quiet=False, console=None)
        assert run._progress.disable
