"""Reading files and directories as they are laid out: :func:`read_traces_from_paths`."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

from knowledgepulse.io._reader import expand_paths, iter_records

from ._harbor import convert_trial, harbor_layout
from ._options import ImportOptions
from ._registry import AUTO_FORMAT, TRACE_FORMAT
from ._stream import Conversion, read_traces

__all__ = ["read_traces_from_paths"]

# Formats for which a Harbor job directory is read as its trials.
_HARBOR_FORMATS = frozenset({"atif", AUTO_FORMAT})


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
            :func:`~knowledgepulse.io._reader.iter_records` does) and ``-`` for standard input.
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
    files = expand_paths(paths)
    return _read(files, fmt, options or ImportOptions(), stdin)


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
