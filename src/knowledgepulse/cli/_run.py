"""What the batch commands add to a library run (:mod:`knowledgepulse.runs`): usage errors.

A missing input path, an output naming an input and an unknown ``--from`` format are usage
errors (exit 2) said before anything is opened; a directory scan says which files it left
out for their extension, so that no file is missed silently.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from ..runs import Run, RunReport


def check_paths(paths: Sequence[str]) -> list[str]:
    """The input files, directories expanded; a missing path is a usage error."""
    from ..runs import input_files

    try:
        files = input_files(paths)
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
    from ..runs import OutputOverwritesInput, check_outputs

    try:
        check_outputs(inputs, **outputs)
    except OutputOverwritesInput as exc:
        if exc.other is None:
            raise click.UsageError(
                f"{_flag(exc.output)} {exc.path} is also an input file: refusing to overwrite it"
            ) from None
        raise click.UsageError(
            f"{_flag(exc.output)} and {_flag(exc.other)} name the same file"
        ) from None


def _flag(option: str) -> str:
    return "-o" if option == "output" else f"--{option.replace('_', '-')}"


def check_format(source_format: str) -> None:
    """An unknown ``--from`` format is a usage error, before anything is read."""
    from ..importers import ConversionError
    from ..runs import check_format as check

    try:
        check(source_format)
    except ConversionError as exc:
        raise click.BadParameter(str(exc), param_hint="--from") from None


def read_conversions(
    files: Sequence[str], source_format: str, options: Any, run: Run, reader: Any = None
) -> Generator[Any, None, None]:
    """:func:`knowledgepulse.runs.read_conversions`, an unknown ``--from`` a usage error."""
    from ..importers import ConversionError
    from ..runs import read_conversions as read

    check_format(source_format)
    try:
        return read(files, source_format, options, run, reader)
    except ConversionError as exc:  # a reader of its own refusing the format
        raise click.BadParameter(str(exc), param_hint="--from") from None


def print_report(console: Any, report: RunReport, quiet: bool) -> None:
    """A batch command's closing text: the folded rejections and the report's summary with
    its accounting line (said even with ``--quiet`` when the run was stopped by a signal),
    then every failed gate (always)."""
    if not quiet or report.interrupted:
        for note in report.notes:
            console.print(note, markup=False, highlight=False, soft_wrap=True)
        for part in report.closing():
            console.print(part, markup=False, highlight=False)
    for line in report.gate_lines():
        console.print(line, markup=False, highlight=False)
