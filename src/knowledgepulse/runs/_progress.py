"""What a run shows on a terminal: the consoles it writes to and its live progress bar, which
names the phase the run is in and, where the total is known, shows it and the time left."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


def stderr_console() -> Any:
    # emoji=False: "file:100: ..." must not become "file💯 ...".
    return console_class()(stderr=True, highlight=False, soft_wrap=True, emoji=False)


def silent_console() -> Any:
    """A console that shows nothing (a library run with no console given): not a terminal,
    so no progress bar is drawn."""
    import io

    return console_class()(file=io.StringIO(), highlight=False, soft_wrap=True, emoji=False)


@functools.cache
def console_class() -> Any:
    """rich's Console, except that a closed pipe ends ``kp`` quietly (exit 0), as for stdout.

    rich's own answer to a closed pipe is ``SystemExit(1)``: ``kp score … 2>&1 | head`` failed
    whenever the summary or a rejection was written after ``head`` had left.
    """
    from rich.console import Console

    from ..io._writers import OutputClosed

    class QuietConsole(Console):
        def on_broken_pipe(self) -> None:
            raise OutputClosed

    return QuietConsole


def progress_display(console: Any, enabled: bool, label: str) -> Any:
    """A live bar on stderr when it is a terminal (a no-op otherwise).

    Each task shows its phase (its description; ``label`` names the first), what is done, its
    rate, the time taken, and where its total is known, the total and the time left
    (``embedding ━━━━╸━━ 1,200/5,000 812 records/s 0:00:01 left 0:00:05``).
    """
    from rich.progress import (
        BarColumn,
        Progress,
        ProgressColumn,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )
    from rich.text import Text

    class DoneOfTotal(ProgressColumn):
        def render(self, task: Any) -> Text:
            total = "" if task.total is None else f"/{task.total:,.0f}"
            return Text(f"{task.completed:,.0f}{total}", style="progress.download")

    return Progress(
        SpinnerColumn(),
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        DoneOfTotal(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        _time_left_column(),
        console=console,
        transient=True,
        disable=not (enabled and console.is_terminal),
    )


def _time_left_column() -> Any:
    """rich's time remaining, shown only where the phase's total is known (no ``-:--:--``
    standing for "unknown")."""
    from rich.progress import TimeRemainingColumn
    from rich.text import Text

    class TimeLeft(TimeRemainingColumn):
        def render(self, task: Any) -> Text:
            return Text("") if task.total is None else Text("left ") + super().render(task)

    return TimeLeft()


@contextmanager
def phase_progress(
    console: Any, enabled: bool, labels: dict[str, str]
) -> Iterator[Callable[[int, int, str], None]]:
    """A bar with the time left on stderr when it is a terminal; yields
    ``shown(done, total, phase)``, the bar labelled ``labels[phase]`` (a new phase restarts
    the bar, so its time left is the phase's own)."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("left"),
        TimeRemainingColumn(),
        console=console,
        transient=True,
        disable=not (enabled and console.is_terminal),
    )
    with progress:
        tasks: dict[str, Any] = {}

        def shown(done: int, total: int, phase: str) -> None:
            if phase not in tasks:
                for earlier in tasks.values():
                    progress.update(earlier, visible=False)
                tasks[phase] = progress.add_task(labels.get(phase, phase), total=total)
            progress.update(tasks[phase], completed=done, total=total)

        yield shown
