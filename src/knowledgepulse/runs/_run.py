"""One batch run: its tally, its progress, its stop handling, and the one loop that reads
units of records into the tally.

A run counts every input record exactly once: processed (its results written), rejected
(reported with file, line and field) or, after Ctrl-C, SIGTERM or ``max_errors``, not
processed. See :mod:`._signals` for how a stop is taken, :mod:`._tally` for the counting.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Sequence
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any, Protocol

from ._progress import progress_display, silent_console
from ._signals import received_signal, stop_signals
from ._tally import Lines, Rejection, Tally

if TYPE_CHECKING:
    from ..io._input_record import InputRecord
    from ..io._writers import LineWriter


def open_writer(stack: ExitStack, path: str | None) -> LineWriter:
    """An output closed (whole lines, readable .gz) when ``stack`` closes."""
    from ..io._writers import LineWriter

    writer = LineWriter(path)
    stack.callback(writer.close)
    return writer


class Run:
    """One batch run: its tally, its progress, its stop handling.

    Use as ``with Run(...) as run:``; inside, ``run.step()`` after each processed record.
    Ctrl-C and SIGTERM end the ``with`` block quietly, marking the tally. ``console`` shows
    the progress bar (when it is a terminal and ``quiet`` is false), hints and, unless
    ``lines`` is given, the rejections; None shows nothing (a library run).
    """

    def __init__(
        self,
        stack: ExitStack,
        *,
        label: str,
        quiet: bool,
        console: Any,
        rejects: str | None = None,
        max_errors: int | None = None,
        show_all: bool = False,
        lines: Lines | None = None,
    ) -> None:
        self.console = console if console is not None else silent_console()
        if lines is None:
            lines = console
        rejects_writer = open_writer(stack, rejects) if rejects else None
        self.tally = Tally(
            lines,
            rejects_writer,
            max_errors=max_errors,
            show_all=show_all,
        )
        self._progress = stack.enter_context(progress_display(self.console, not quiet, label))
        self._task = self._progress.add_task(label, total=None, rate="")
        self._base = 0  # records processed before the current phase
        self._stack = stack

    def phase(self, label: str, total: int | None = None) -> None:
        """Name the phase the run is now in (``embedding``), with its total when known: the
        bar then counts from zero to it and shows the time left."""
        self._base = self.tally.processed
        self._progress.reset(self._task, total=total, description=label, rate="")

    def step(self, completed: int | None = None) -> None:
        """Show progress: ``completed`` in the current phase (default: records processed)."""
        if self._progress.disable:  # quiet, or not a terminal: nothing to show, nothing to do
            return
        tally = self.tally
        done = tally.processed - self._base if completed is None else completed
        rate = tally.processed / tally.elapsed if tally.elapsed > 0 else 0.0
        self._progress.update(self._task, completed=done, rate=f"{rate:,.0f} records/s")

    def stop_display(self) -> None:
        """End the live counter, so that a later phase can show its own."""
        self._progress.stop()

    def __enter__(self) -> Run:
        self._signals = stop_signals()
        self._signals.__enter__()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, _tb: Any
    ) -> bool:
        self._signals.__exit__(None, None, None)
        if kind is not None and issubclass(kind, KeyboardInterrupt):
            self.tally.interrupted = True
            self.tally.stop_signal = received_signal()
            return True
        return False


class Unit(Protocol):
    """A unit of input records and what became of them: an importer's ``Conversion``, or
    kp score's workers' units, or kp eval's cases. The records count once, together."""

    @property
    def records(self) -> Sequence[InputRecord]: ...

    @property
    def problems(self) -> Sequence[str]: ...

    @property
    def counted(self) -> int: ...


def read_units(
    units: Iterable[Any],
    run: Run,
    *,
    source_format: str = "trace",
    hint: bool = True,
    on_reject: Callable[[Any], None] | None = None,
) -> Generator[Any, None, None]:
    """The one read -> tally loop: each unit's records are counted as read, a unit with
    problems is rejected (file, line, field), and the units to process are yielded.

    A unit with problems that still made traces (one OTLP document with spans of several
    traces, some broken) is rejected and yielded: its good traces go on, not counted again.
    What a unit names as not a run is said. When records fail as ReasoningTraces but look
    like a log format knowledgepulse imports, which ``--from`` reads them is said once
    (unless ``hint`` is false). ``on_reject`` is told of each rejected unit once it is
    counted. Reading stops once the tally is past ``max_errors``.
    """
    hinted = not hint
    tally = run.tally
    for unit in units:
        tally.read(unit.counted)
        # A reader's units other than Conversions (kp score's workers) may not name them.
        not_runs = getattr(unit, "not_runs", ())
        if not_runs:
            tally.note_not_runs(unit.records[0].where, not_runs)
        if not unit.problems:
            yield unit
            continue
        if not hinted and source_format == "trace":
            said = format_hint(unit.records[0].data)
            if said is not None:
                hinted = True
                run.console.print(said, markup=False, highlight=False, soft_wrap=True)
        tally.reject(Rejection(unit.records, list(unit.problems), unit.counted))
        if on_reject is not None:
            on_reject(unit)
        if tally.stopped_early:
            return
        if getattr(unit, "traces", None):
            yield unit


def read_conversions(
    files: Sequence[str], source_format: str, options: Any, run: Run, reader: Any = None
) -> Generator[Any, None, None]:
    """Conversions that produced traces (0..n each); rejected ones go to the tally
    (:func:`read_units`).

    ``reader`` replaces :func:`~knowledgepulse.importers.read_traces_from_paths` (same
    arguments and result). An unknown format raises
    :class:`~knowledgepulse.importers.ConversionError` before anything is read.
    """
    from ..importers import read_traces_from_paths

    conversions = (reader or read_traces_from_paths)(files, source_format, options)
    return read_units(conversions, run, source_format=source_format)


def format_hint(data: Any) -> str | None:
    """``these look like openai logs: use --from openai``, for a record of a known format."""
    if data is None:
        return None
    from ..importers import detect_format

    try:
        detected = detect_format(data)
    except Exception:  # a guess must never fail a run
        return None
    if detected is None or detected == "trace":
        return None
    return f"hint: these records look like {detected} logs: use --from {detected}"
