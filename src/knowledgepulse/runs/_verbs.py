"""The batch verbs over files of traces: ``validate_files``, ``convert_files`` and
``redact_files``. Each reads through :func:`~._run.read_conversions` (the one read -> tally
loop), writes whole lines with Ctrl-C and SIGTERM held, and returns a :class:`~._report.RunReport`.

``kp validate``, ``kp import`` and ``kp redact`` are these verbs with options and printing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

from ._paths import check_outputs, input_files
from ._report import ConvertSummary, RedactSummary, RunReport, ValidateSummary
from ._run import Run, open_writer, read_conversions
from ._signals import signals_held, signals_restored

if TYPE_CHECKING:
    from .._schema import ReasoningTrace
    from ..importers import ImportOptions
    from ._tally import Lines


def check_format(source_format: str) -> None:
    """Raise :class:`~knowledgepulse.importers.ConversionError` for a format no importer
    reads (``trace``, ``auto`` and every key of ``FORMATS`` are read), before anything is."""
    from ..importers import read_traces

    read_traces([], source_format)


def checked_inputs(paths: Sequence[str], source_format: str, **outputs: str | None) -> list[str]:
    """The files a verb reads (directories expanded), once its format and its outputs (by
    parameter name) are checked: what every verb does before it opens anything.

    Raises FileNotFoundError for a missing path,
    :class:`~knowledgepulse.importers.ConversionError` for an unknown format and
    :class:`~._paths.OutputOverwritesInput` for an output naming an input or another output.
    """
    files = input_files(paths)
    check_format(source_format)
    check_outputs(files, **outputs)
    return files


def validate_files(
    paths: Sequence[str],
    *,
    source_format: str = "trace",
    max_errors: int | None = None,
    console: Any = None,
    problems_to: Lines | None = None,
    progress: bool = False,
) -> RunReport:
    """Check every record of ``paths`` against the schema (with ``source_format`` a log format,
    that its runs convert to valid traces).

    Args:
        paths: files, directories (their record and log files) and ``-`` for standard input.
        source_format: ``trace``, ``auto`` or a log format (``kp import --help`` lists them).
        max_errors: stop reading after this many refused records.
        console: a rich Console for hints and the progress bar (None: nothing is shown).
        problems_to: where each problem is listed as ``file:line: field.path: problem`` as it
            is found (default ``console``); the report keeps them too.
        progress: draw a progress bar on ``console`` when it is a terminal.

    The report's summary is a :class:`~._report.ValidateSummary`: the valid records are the
    processed ones, the invalid the rejected. Raises FileNotFoundError for a missing path and
    :class:`~knowledgepulse.importers.ConversionError` for an unknown format.
    """
    files = checked_inputs(paths, source_format)
    with ExitStack() as stack:
        stack.enter_context(signals_restored())
        run = Run(
            stack,
            label="validating",
            quiet=not progress,
            max_errors=max_errors,
            console=console,
            show_all=True,
            lines=problems_to,
        )
        with run:
            for conversion in read_conversions(files, source_format, None, run):
                # A record rejected for some of its traces was counted once, as rejected.
                if not conversion.problems:
                    run.tally.processed += conversion.counted
                run.step()
    return RunReport.of_tally("validate", files, run.tally, ValidateSummary())


def convert_files(
    paths: Sequence[str],
    *,
    source_format: str,
    output: str = "-",
    options: ImportOptions | None = None,
    rejects: str | None = None,
    max_errors: int | None = None,
    console: Any = None,
    progress: bool = False,
) -> RunReport:
    """Convert agent logs to ReasoningTraces, one JSON line each in ``output``.

    Args:
        paths: files, directories and ``-`` for standard input.
        source_format: ``auto``, ``trace`` or a log format (``kp import --help`` lists them).
        output: a file (``.gz``: compressed), or ``-`` for standard output.
        options: values set on every trace (domain, success, confidence).
        rejects: a file for the refused records (source, line, index, errors, record).
        max_errors: stop reading after this many refused records.
        console: a rich Console for rejections, hints and progress (None: nothing is shown).
        progress: draw a progress bar on ``console`` when it is a terminal.

    The summary (:class:`~._report.ConvertSummary`) counts the traces written. Raises
    FileNotFoundError, :class:`~knowledgepulse.importers.ConversionError` (unknown format)
    and :class:`~._paths.OutputOverwritesInput` before anything is written.
    """
    files = checked_inputs(paths, source_format, output=output, rejects=rejects)
    run = _rewrite_traces(
        files,
        label="importing",
        source_format=source_format,
        options=options,
        output=output,
        rejects=rejects,
        max_errors=max_errors,
        console=console,
        progress=progress,
    )
    summary = ConvertSummary(traces_written=run.tally.outputs)
    return RunReport.of_tally("convert", files, run.tally, summary)


def redact_files(
    paths: Sequence[str],
    *,
    output: str = "-",
    policy: str | None = None,
    source_format: str = "trace",
    rejects: str | None = None,
    max_errors: int | None = None,
    console: Any = None,
    progress: bool = False,
) -> RunReport:
    """Replace secrets and personal data in the traces of ``paths`` by typed placeholders,
    writing the redacted traces to ``output`` (one JSON line each).

    Args:
        paths: files, directories and ``-`` for standard input.
        output: a file (``.gz``: compressed), or ``-`` for standard output.
        policy: a privacy level (``federated``, ``aggregated``, ``private``) applied to every
            trace; None: each trace's ``metadata.privacy_level``.
        source_format: ``trace``, ``auto`` or a log format.
        rejects: a file for the refused records (source, line, index, errors, record).
        max_errors: stop reading after this many refused records.
        console: a rich Console for rejections, hints and progress (None: nothing is shown).
        progress: draw a progress bar on ``console`` when it is a terminal.

    The summary (:class:`~._report.RedactSummary`) counts the traces written and the values
    replaced by kind.
    """
    from ..redaction import redact_trace, resolve_policy

    files = checked_inputs(paths, source_format, output=output, rejects=rejects)
    if policy is not None:
        resolve_policy(policy)  # an unknown level is refused before anything is read
    found: Counter[str] = Counter()

    def redacted(trace: ReasoningTrace) -> tuple[ReasoningTrace, Mapping[str, int]]:
        clean, report = redact_trace(trace, policy=policy)
        return clean, report.counts

    run = _rewrite_traces(
        files,
        label="redacting",
        source_format=source_format,
        options=None,
        output=output,
        rejects=rejects,
        max_errors=max_errors,
        console=console,
        progress=progress,
        rewrite=redacted,
        found=found,
    )
    summary = RedactSummary(traces_written=run.tally.outputs, redacted=dict(found))
    return RunReport.of_tally("redact", files, run.tally, summary)


def _unchanged(trace: ReasoningTrace) -> tuple[ReasoningTrace, Mapping[str, int]]:
    return trace, {}


def _rewrite_traces(
    files: list[str],
    *,
    label: str,
    source_format: str,
    options: ImportOptions | None,
    output: str,
    rejects: str | None,
    max_errors: int | None,
    console: Any,
    progress: bool,
    rewrite: Callable[[ReasoningTrace], tuple[ReasoningTrace, Mapping[str, int]]] = _unchanged,
    found: Counter[str] | None = None,
) -> Run:
    """The loop of ``convert_files`` and ``redact_files``: each record's traces rewritten
    (with the counts of what was changed, by kind, added to ``found``) and written, one JSON
    line each, with Ctrl-C and SIGTERM held, so that the lines, ``outputs``, ``found`` and the
    processed records agree however the run ends."""
    with ExitStack() as stack:
        stack.enter_context(signals_restored())
        out = open_writer(stack, output)
        run = Run(
            stack,
            label=label,
            quiet=not progress,
            rejects=rejects,
            max_errors=max_errors,
            console=console,
        )
        with run:
            for conversion in read_conversions(files, source_format, options, run):
                rewritten = [rewrite(trace) for trace in conversion.traces]
                with signals_held():
                    for trace, counts in rewritten:
                        out.write_line(trace.to_json())
                        if found is not None:
                            found.update(counts)
                    run.tally.outputs += len(rewritten)
                    if not conversion.problems:
                        run.tally.processed += conversion.counted
                run.step()
    return run
