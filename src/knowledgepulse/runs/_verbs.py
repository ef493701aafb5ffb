"""The batch verbs over files of traces: ``validate_files``, ``convert_files`` and
``redact_files``. Each reads through :func:`~._run.read_conversions` (the one read -> tally
loop), writes whole lines with Ctrl-C and SIGTERM held, and returns a :class:`~._report.RunReport`.

``kp validate``, ``kp import`` and ``kp redact`` are these verbs with options and printing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

from ._paths import check_outputs, input_files
from ._report import ConvertSummary, RedactSummary, RunReport, ValidateSummary
from ._run import Run, open_writer, read_conversions
from ._signals import signals_held, signals_restored

if TYPE_CHECKING:
    from ..importers import ImportOptions
    from ._tally import Lines


def check_format(source_format: str) -> None:
    """Raise :class:`~knowledgepulse.importers.ConversionError` for a format no importer
    reads (``trace``, ``auto`` and every key of ``FORMATS`` are read), before anything is."""
    from ..importers import read_traces

    read_traces([], source_format)


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
    files = input_files(paths)
    check_format(source_format)
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
    files = input_files(paths)
    check_format(source_format)
    check_outputs(files, output=output, rejects=rejects)
    traces_out = 0
    with ExitStack() as stack:
        stack.enter_context(signals_restored())
        out = open_writer(stack, output)
        run = Run(
            stack,
            label="importing",
            quiet=not progress,
            rejects=rejects,
            max_errors=max_errors,
            console=console,
        )
        with run:
            for conversion in read_conversions(files, source_format, options, run):
                with signals_held():
                    for trace in conversion.traces:
                        out.write_line(trace.to_json())
                    traces_out += len(conversion.traces)
                    run.tally.outputs = traces_out
                    if not conversion.problems:
                        run.tally.processed += conversion.counted
                run.step()
    summary = ConvertSummary(traces_written=traces_out)
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

    files = input_files(paths)
    check_format(source_format)
    if policy is not None:
        resolve_policy(policy)  # an unknown level is refused before anything is read
    check_outputs(files, output=output, rejects=rejects)
    found: Counter[str] = Counter()
    traces_out = 0
    with ExitStack() as stack:
        stack.enter_context(signals_restored())
        out = open_writer(stack, output)
        run = Run(
            stack,
            label="redacting",
            quiet=not progress,
            rejects=rejects,
            max_errors=max_errors,
            console=console,
        )
        with run:
            for conversion in read_conversions(files, source_format, None, run):
                redacted = [redact_trace(trace, policy=policy) for trace in conversion.traces]
                with signals_held():
                    for trace, report in redacted:
                        out.write_line(trace.to_json())
                        found.update(report.counts)
                    traces_out += len(redacted)
                    run.tally.outputs = traces_out
                    if not conversion.problems:
                        run.tally.processed += conversion.counted
                run.step()
    summary = RedactSummary(traces_written=traces_out, redacted=dict(found))
    return RunReport.of_tally("redact", files, run.tally, summary)
