"""What every batch command shares: the tally, rejections, outputs, progress and stops.

A run counts every input record exactly once: processed (its results written), rejected
(reported with file, line and field) or, after Ctrl-C, SIGTERM or ``--max-errors``, not
processed. The accounting line printed at the end is true however the run ends:
``records in: N = processed P + rejected R [+ not processed K (interrupted)]``.

Signals are held off while one record's output lines are written, so an interruption never
leaves a record half-written or written but uncounted. Once a run has stopped, further
signals are noted and the shutdown goes on: a second Ctrl-C or a repeated SIGTERM never cuts
the summary and the accounting line short. The exit status is then 128 + the first signal:
130 for SIGINT, 143 for SIGTERM, as shells report a process stopped by that signal.
"""

from __future__ import annotations

import functools
import re
import signal
import time
from collections.abc import Generator, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from types import FrameType
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:  # imported where used: every command, and kp --help, starts without them
    from ..io._reader import InputRecord
    from ..io._writers import LineWriter

EXIT_OK, EXIT_REJECTED, EXIT_USAGE, EXIT_INTERRUPTED, EXIT_TERMINATED = 0, 1, 2, 130, 143
MAX_REJECTIONS_SHOWN = 20
#: The same problem is shown this many times, then folded into one "… and N more" line.
SAME_PROBLEM_SHOWN = 3
# Traces named "not a run" (embedding calls beside the runs of a span file) shown one by one.
NOT_RUNS_SHOWN = 10


# A problem whose path starts at an element of a list: ``[17].run_type: ...``.
_ELEMENT_PATH = re.compile(r"^\[(\d+)\]")


@dataclass
class Rejection:
    """Records refused together (usually one), with every problem found."""

    records: Sequence[InputRecord]
    problems: list[str]
    # How many records it counts for: one for the events of one run (each is still in
    # --rejects, with its place); None: each record.
    count: int | None = None

    def lines(self) -> list[str]:
        """Each problem at its record: in a unit of several elements of a list, a problem
        whose path starts at an element (``[17].run_type``) is located where that element
        starts, not at the unit's first element."""
        first = self.records[0].where
        by_index = {r.index: r.where for r in self.records if r.index is not None}
        lines = []
        for problem in self.problems:
            match = _ELEMENT_PATH.match(problem)
            where = by_index.get(int(match.group(1)), first) if match else first
            lines.append(f"{where}: {problem}")
        return lines

    def to_json(self, record: InputRecord) -> dict[str, Any]:
        from ..scoring._run import rejection_entry

        return rejection_entry(record, self.problems)


@dataclass
class Tally:
    """Counts every input record as processed or rejected, and reports rejections."""

    console: Any
    rejects: LineWriter | None = None
    max_errors: int | None = None
    show_all: bool = False  # kp validate lists every problem of every record: no folding
    records_in: int = 0
    processed: int = 0
    rejected: int = 0
    outputs: int = 0  # results written (score lines, traces, eval lines)
    interrupted: bool = False
    stop_signal: int | None = None  # the signal that stopped the run (None: Ctrl-C in-process)
    stopped_early: bool = False
    # Things read that are not runs (processed, no trace made): named, never silently nothing.
    not_runs: int = 0
    started: float = field(default_factory=time.perf_counter)
    _shown: int = 0
    _same: dict[str, int] = field(default_factory=dict)

    def read(self, count: int = 1) -> None:
        self.records_in += count

    def reject(self, rejection: Rejection) -> None:
        """Count and report ``rejection``; past ``--max-errors``, mark the run to stop.

        Readers check :attr:`stopped_early` and stop reading; what was read is still finished
        (scored and written), so a deliberate stop loses nothing already read.
        """
        with signals_held():
            count = rejection.count
            self.rejected += len(rejection.records) if count is None else count
            for record in rejection.records:
                if self.rejects is not None:
                    self.rejects.write_json(rejection.to_json(record))
        self._show(rejection)
        if self.max_errors is not None and self.rejected >= self.max_errors:
            self.stopped_early = True

    def note_not_runs(self, where: str, notes: Sequence[str]) -> None:
        """Name what a processed record held that is not a run (``where: note``); past
        :data:`NOT_RUNS_SHOWN`, only counted (:meth:`print_folded` says how many more)."""
        for note in notes:
            if self.not_runs < NOT_RUNS_SHOWN:
                self._print(f"{where}: {note}")
            self.not_runs += 1

    def _show(self, rejection: Rejection) -> None:
        if self.show_all:  # kp validate: its listing is the result, so nothing is folded
            for line in rejection.lines():
                self._print(line)
            return
        # Records rejected for the very same problems are shown a few times, then folded.
        signature = "\n".join(rejection.problems)
        seen = self._same.get(signature, 0)
        self._same[signature] = seen + 1
        if seen >= SAME_PROBLEM_SHOWN:
            return
        for line in rejection.lines():
            if self._shown < MAX_REJECTIONS_SHOWN:
                self._print(line)
            self._shown += 1

    def _print(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def print_folded(self) -> None:
        """Say how many rejections were not shown, and where they all are."""
        where = "; all are in --rejects" if self.rejects is not None else ""
        for signature, count in self._same.items():
            if count > SAME_PROBLEM_SHOWN:
                more = count - SAME_PROBLEM_SHOWN
                problems = signature.split("\n")
                like = _short(problems[0]) + (
                    f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
                )
                self._print(f"… and {more:,} more records like these ({like}){where}")
        if self.not_runs > NOT_RUNS_SHOWN:
            self._print(f"… and {self.not_runs - NOT_RUNS_SHOWN:,} more that are not runs")
        if self._shown > MAX_REJECTIONS_SHOWN:
            hidden = self._shown - MAX_REJECTIONS_SHOWN
            noun = "problem" if hidden == 1 else "problems"
            self._print(f"… {hidden:,} further {noun} not shown{where}")

    @property
    def not_processed(self) -> int:
        return self.records_in - self.processed - self.rejected

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def accounting(self) -> str:
        line = (
            f"records in: {self.records_in} = processed {self.processed} + rejected {self.rejected}"
        )
        why = "interrupted" if self.interrupted else "stopped by --max-errors"
        missing = self.not_processed
        if missing:
            line += f" + not processed {missing} ({why})"
        elif self.interrupted or self.stopped_early:
            line += f" ({why}: the rest of the input was not read)"
        return line

    def exit_code(self) -> int:
        if self.interrupted:
            return exit_status_for(self.stop_signal)
        return EXIT_REJECTED if self.rejected else EXIT_OK


def exit_status_for(stop_signal: int | None) -> int:
    """128 + the signal that stopped a run: 130 for Ctrl-C (also when raised in-process), 143
    for SIGTERM."""
    return EXIT_TERMINATED if stop_signal == signal.SIGTERM else EXIT_INTERRUPTED


def _short(text: str, limit: int = 70) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -- signals ------------------------------------------------------------------------------

_held = 0
_pending_signal: int | None = None
#: The first SIGINT or SIGTERM since a run installed the handlers (until the command ends).
_received: int | None = None
#: Set once a run has ended: later signals are noted, and the shutdown goes on.
_stopping = False
_signals_after_stop = 0
#: Signals arriving after a stop beyond this many interrupt the shutdown itself.
SIGNALS_IGNORED_AFTER_STOP = 2
_previous_handlers: dict[int, Any] | None = None


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    global _pending_signal, _received, _signals_after_stop
    if _received is None:
        _received = signum
    if _held:
        _pending_signal = signum
        return
    if _stopping:
        _signals_after_stop += 1
        if _signals_after_stop <= SIGNALS_IGNORED_AFTER_STOP:
            return
    raise KeyboardInterrupt


@contextmanager
def signals_held() -> Iterator[None]:
    """Hold Ctrl-C and SIGTERM while a record's lines are written; deliver them after."""
    global _held, _pending_signal
    _held += 1
    try:
        yield
    finally:
        _held -= 1
        if not _held and _pending_signal is not None:
            _pending_signal = None
            if not _stopping:
                raise KeyboardInterrupt


@contextmanager
def stop_signals() -> Iterator[None]:
    """SIGINT and SIGTERM stop the run (in the main thread only): the block ends with
    KeyboardInterrupt. After it, until :func:`restore_signals`, they are only noted."""
    global _previous_handlers, _stopping, _signals_after_stop
    if _previous_handlers is None:
        try:
            _previous_handlers = {
                sig: signal.signal(sig, _on_signal) for sig in (signal.SIGINT, signal.SIGTERM)
            }
        except ValueError:  # not the main thread: leave signals alone
            yield
            return
    _stopping, _signals_after_stop = False, 0
    try:
        yield
    finally:
        _stopping = True


def received_signal() -> int | None:
    """The first SIGINT or SIGTERM received since a run started in this command."""
    return _received


def restore_signals(*, exiting: bool = False) -> int | None:
    """End of the command: the first signal received since a run started (None: none).

    The handlers in place before the run are put back, except when the process is
    ``exiting`` (``kp`` itself) after a signal: with 128 + it, and further SIGINT and SIGTERM
    ignored, since Python puts the default handlers back while it shuts down and a repeated
    SIGTERM arriving then would kill it with no exit status.
    """
    global _previous_handlers, _received, _stopping, _pending_signal, _signals_after_stop
    received = _received
    ignore = exiting and received is not None
    if _previous_handlers is not None:
        for sig, handler in _previous_handlers.items():
            signal.signal(sig, signal.SIG_IGN if ignore else handler)
    _previous_handlers, _received, _pending_signal = None, None, None
    _stopping, _signals_after_stop = False, 0
    return received


# -- outputs and paths --------------------------------------------------------------------


def check_paths(paths: Sequence[str]) -> list[str]:
    """The input files, directories expanded; a missing path is a usage error."""
    try:
        from ..io._reader import LOG_SUFFIXES, RECORD_SUFFIXES, expand_paths

        files = expand_paths(paths, suffixes=RECORD_SUFFIXES + LOG_SUFFIXES)
    except FileNotFoundError as exc:
        raise click.UsageError(str(exc)) from None
    note = skipped_note(paths)
    if note is not None:
        click.echo(note, err=True)
    return files


def skipped_note(paths: Sequence[str]) -> str | None:
    """What a directory scan left out for its extension, so that no file is missed silently:
    ``skipped 3 files in the directories given, not read as records: .traj (2), .txt (1)``."""
    from ..io._reader import LOG_SUFFIXES, RECORD_SUFFIXES, skipped_files

    suffixes = RECORD_SUFFIXES + LOG_SUFFIXES
    skipped = skipped_files(paths, suffixes=suffixes)
    if not skipped:
        return None
    total = sum(skipped.values())
    kinds = ", ".join(
        f"{suffix or '(no extension)'} ({count})" for suffix, count in skipped.items()
    )
    noun = "file" if total == 1 else "files"
    read = ", ".join(suffixes)
    return (
        f"skipped {total} {noun} in the directories given, not read as records: {kinds} "
        f"(read: {read}; name a file to read it whatever its extension)"
    )


def refuse_overwriting_inputs(inputs: Sequence[str], **outputs: str | None) -> None:
    """Refuse (exit 2) an output that names an input file, before anything is opened."""
    from ..io._writers import same_file

    for option, path in outputs.items():
        if path is None or path == "-":
            continue
        for name in inputs:
            if same_file(name, path):
                raise click.UsageError(
                    f"{_flag(option)} {path} is also an input file: refusing to overwrite it"
                )
    named = [(option, path) for option, path in outputs.items() if path not in (None, "-")]
    for i, (option_a, path_a) in enumerate(named):
        for option_b, path_b in named[i + 1 :]:
            if same_file(str(path_a), str(path_b)):
                raise click.UsageError(
                    f"{_flag(option_a)} and {_flag(option_b)} name the same file"
                )


def _flag(option: str) -> str:
    return "-o" if option == "output" else f"--{option.replace('_', '-')}"


def open_writer(stack: ExitStack, path: str | None) -> LineWriter:
    """An output closed (whole lines, readable .gz) when ``stack`` closes."""
    from ..io._writers import LineWriter

    writer = LineWriter(path)
    stack.callback(writer.close)
    return writer


def stderr_console() -> Any:
    # emoji=False: "file:100: ..." must not become "file💯 ...".
    return console_class()(stderr=True, highlight=False, soft_wrap=True, emoji=False)


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
    """A live counter on stderr when it is a terminal; a no-op otherwise.

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
        TimeRemainingColumn,
    )
    from rich.text import Text

    class DoneOfTotal(ProgressColumn):
        def render(self, task: Any) -> Text:
            total = "" if task.total is None else f"/{task.total:,.0f}"
            return Text(f"{task.completed:,.0f}{total}", style="progress.download")

    class TimeLeft(TimeRemainingColumn):
        def render(self, task: Any) -> Text:
            return Text("") if task.total is None else Text("left ") + super().render(task)

    return Progress(
        SpinnerColumn(),
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        DoneOfTotal(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TimeLeft(),
        console=console,
        transient=True,
        disable=not (enabled and console.is_terminal),
    )


class Run:
    """One batch command's run: its tally, its progress, its stop handling.

    Use as ``with Run(...) as run:``; inside, ``run.step()`` after each processed record.
    Ctrl-C and SIGTERM end the ``with`` block quietly, marking the tally.
    """

    def __init__(
        self,
        stack: ExitStack,
        *,
        label: str,
        quiet: bool,
        rejects: str | None = None,
        max_errors: int | None = None,
        console: Any = None,
        show_all: bool = False,
    ) -> None:
        self.console = console if console is not None else stderr_console()
        rejects_writer = open_writer(stack, rejects) if rejects else None
        self.tally = Tally(self.console, rejects_writer, max_errors=max_errors, show_all=show_all)
        self._progress = stack.enter_context(progress_display(self.console, not quiet, label))
        self._task = self._progress.add_task(label, total=None, rate="")
        self._stack = stack

    def step(self) -> None:
        if self._progress.disable:  # quiet, or not a terminal: nothing to show, nothing to do
            return
        tally = self.tally
        rate = tally.processed / tally.elapsed if tally.elapsed > 0 else 0.0
        self._progress.update(self._task, completed=tally.processed, rate=f"{rate:,.0f} records/s")

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


def read_conversions(
    files: Sequence[str], source_format: str, options: Any, run: Run, reader: Any = None
) -> Generator[Any, None, None]:
    """Conversions that produced traces (0..n each); rejected ones go to the tally.

    When records fail as ReasoningTraces but look like a log format knowledgepulse imports,
    say once which ``--from`` reads them. ``reader`` replaces
    :func:`~knowledgepulse.importers.read_traces_from_paths` (same arguments and result).
    """
    from ..importers import ConversionError, read_traces_from_paths

    hinted = False
    tally = run.tally
    try:
        conversions = (reader or read_traces_from_paths)(files, source_format, options)
    except ConversionError as exc:  # an unknown format, refused before reading
        raise click.BadParameter(str(exc), param_hint="--from") from None
    for conversion in conversions:
        tally.read(conversion.counted)
        # A reader's units other than Conversions (kp score's workers) may not name them.
        not_runs = getattr(conversion, "not_runs", ())
        if not_runs:
            tally.note_not_runs(conversion.records[0].where, not_runs)
        if not conversion.problems:
            yield conversion
            continue
        if not hinted and source_format == "trace":
            hint = format_hint(conversion.records[0].data)
            if hint is not None:
                hinted = True
                run.console.print(hint, markup=False, highlight=False, soft_wrap=True)
        tally.reject(Rejection(conversion.records, conversion.problems, conversion.counted))
        if tally.stopped_early:
            return
        if conversion.traces:
            # A record holding several traces, some broken (one OTLP export): it is rejected
            # for the broken ones, and the good ones still go on (they are not counted again).
            yield conversion


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
