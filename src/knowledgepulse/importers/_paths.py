"""Reading files and directories as they are laid out: :func:`read_traces_from_paths`."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

from knowledgepulse._binary_files import zip_archive
from knowledgepulse._io import (
    LOG_SUFFIXES,
    RECORD_SUFFIXES,
    InputRecord,
    expand_paths,
    iter_records,
)

from ._harbor import convert_trial, harbor_layout
from ._options import ImportOptions
from ._registry import AUTO_FORMAT, TRACE_FORMAT
from ._stream import Conversion, read_traces
from ._values import ConversionError
from .inspect_ai import inspect_sample_trace, read_eval_archive

__all__ = ["read_traces_from_paths"]

# Formats for which a Harbor job directory is read as its trials.
_HARBOR_FORMATS = frozenset({"atif", AUTO_FORMAT})
# Formats for which an .eval zip archive is read as an Inspect AI log.
_EVAL_FORMATS = frozenset({"inspect", AUTO_FORMAT})


def read_traces_from_paths(
    paths: Iterable[str],
    fmt: str = "trace",
    options: ImportOptions | None = None,
    *,
    stdin: IO[bytes] | IO[str] | None = None,
) -> Iterator[Conversion]:
    """Convert the records of files and directories, unit by unit, as :func:`read_traces`
    does, reading a Harbor job directory as what it is.

    Args:
        paths: files, directories (searched recursively, as
            :func:`~knowledgepulse._io.iter_records` does) and ``-`` for standard input.
        fmt: ``"trace"``, ``"auto"`` or a key of :data:`FORMATS`.
        options: values that replace the source's in every trace.
        stdin: the stream read for ``-`` (default: ``sys.stdin``'s bytes).

    With ``fmt`` ``"atif"`` or ``"auto"``, each Harbor trial among the files (a directory with
    ``agent/trajectory.json``; see :mod:`._harbor`) is one unit: its trajectory's trace, with
    success from the trial's reward. The trial's other files and its job's ``config.json`` and
    ``result.json`` are not records. Every other file is read by :func:`read_traces`, in path
    order. Raises :class:`ConversionError` for an unknown format (before reading anything) and
    FileNotFoundError for a path that does not exist.
    """
    read_traces([], fmt, options)  # refuses an unknown format before anything is read
    files = expand_paths(paths, suffixes=RECORD_SUFFIXES + LOG_SUFFIXES)
    return _read_archives(files, fmt, options or ImportOptions(), stdin)


def _read_archives(
    files: list[str], fmt: str, options: ImportOptions, stdin: IO[bytes] | IO[str] | None
) -> Iterator[Conversion]:
    """Inspect AI ``.eval`` archives as their samples; every other file as :func:`_read` does."""
    pending: list[str] = []
    for name in files:
        if fmt in _EVAL_FORMATS and _is_eval_archive(name, fmt):
            yield from _read(pending, fmt, options, stdin)
            pending = []
            yield from _eval_units(name, options)
        else:
            pending.append(name)
    yield from _read(pending, fmt, options, stdin)


def _is_eval_archive(name: str, fmt: str) -> bool:
    if name == "-" or (fmt == AUTO_FORMAT and not name.lower().endswith(".eval")):
        return False
    try:
        with open(name, "rb") as handle:
            return zip_archive(handle.read(4))
    except OSError:
        return False


def _eval_units(name: str, options: ImportOptions) -> Iterator[Conversion]:
    """One unit per sample (and epoch) of an ``.eval`` archive; its records are located at the
    archive, the sample's position as their index, and problems name the sample's file."""
    try:
        header, samples = read_eval_archive(name)
    except ConversionError as exc:
        yield Conversion([InputRecord(name, 1)], [], [str(p) for p in exc.problems], "inspect")
        return
    for index, sample in enumerate(samples):
        record = InputRecord(name, 1, data=sample.data, index=index)
        if sample.error is not None:
            yield Conversion([record], [], [f"{sample.name}: {sample.error}"], "inspect")
            continue
        try:
            trace = inspect_sample_trace(header, sample.data, "", options)
        except ConversionError as exc:
            problems = [f"{sample.name}: {problem}" for problem in exc.problems]
            yield Conversion([record], [], problems, "inspect")
            continue
        yield Conversion([record], [trace], [], "inspect")


def _read(
    files: list[str], fmt: str, options: ImportOptions, stdin: IO[bytes] | IO[str] | None
) -> Iterator[Conversion]:
    if fmt not in _HARBOR_FORMATS:
        # ReasoningTrace records are validated from their bytes, in one step (see read_traces).
        records = iter_records(files, stdin=stdin, parse=fmt != TRACE_FORMAT)
        yield from read_traces(records, fmt, options)
        return
    layout = harbor_layout(files)
    record_files = {str(record): trial for trial, record in layout.trials.items()}
    pending: list[str] = []
    for name in files:
        trial = record_files.get(str(Path(name)))
        if trial is None and name in layout.consumed:
            continue
        if trial is None:
            pending.append(name)
            continue
        yield from read_traces(iter_records(pending, stdin=stdin), fmt, options)
        pending = []
        yield convert_trial(trial, Path(name), options)
    yield from read_traces(iter_records(pending, stdin=stdin), fmt, options)
