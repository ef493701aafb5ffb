"""A run's inputs and outputs, checked before anything is opened: the files a run reads
(directories expanded) and outputs that would overwrite an input or each other."""

from __future__ import annotations

from collections.abc import Sequence

from .._errors import KnowledgePulseError


class OutputOverwritesInput(KnowledgePulseError, ValueError):
    """An output names an input file (``other`` None) or the same file as another output.

    ``output`` and ``other`` are the outputs' parameter names (``output``, ``rejects``…).
    """

    def __init__(self, output: str, path: str, other: str | None = None) -> None:
        self.output, self.path, self.other = output, path, other
        if other is None:
            message = f"{output} {path} is also an input file: refusing to overwrite it"
        else:
            message = f"{output} and {other} name the same file"
        super().__init__(message)


def input_files(paths: Sequence[str]) -> list[str]:
    """The files a run reads: ``paths`` with directories expanded (record and log files
    below them); ``-`` is standard input. Raises FileNotFoundError for a missing path."""
    from ..io._reader import LOG_SUFFIXES, RECORD_SUFFIXES, expand_paths

    return expand_paths(paths, suffixes=RECORD_SUFFIXES + LOG_SUFFIXES)


def check_outputs(inputs: Sequence[str], **outputs: str | None) -> None:
    """Raise :class:`OutputOverwritesInput` when an output names an input file or another
    output (by parameter name; None and ``-``, standard output, are never files)."""
    from ..io._writers import same_file

    named = [(option, path) for option, path in outputs.items() if path not in (None, "-")]
    for option, path in named:
        for name in inputs:
            if same_file(name, str(path)):
                raise OutputOverwritesInput(option, str(path))
    for i, (option_a, path_a) in enumerate(named):
        for option_b, path_b in named[i + 1 :]:
            if same_file(str(path_a), str(path_b)):
                raise OutputOverwritesInput(option_a, str(path_a), option_b)
