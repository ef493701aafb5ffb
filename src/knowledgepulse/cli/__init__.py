"""The ``kp`` command: a thin shell over the library, one module per command.

``main`` turns every outcome into an exit status: 0 when every record was processed, 1 when
any was rejected (or a gate failed), 2 for usage errors (one line on stderr), 128 + the
signal when stopped by one (130 for Ctrl-C, 143 for SIGTERM), whatever was rejected before. The commands only parse options and call library functions; what they share
(the tally, rejections, outputs, progress, signals) is the library's, in
:mod:`knowledgepulse.runs`; :mod:`._run` holds their usage errors.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import click

from ..runs import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_REJECTED,
    EXIT_USAGE,
    exit_status_for,
    keep_handlers,
    restore_signals,
)
from ._app import app

__all__ = ["app", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``kp`` with ``argv`` (default: the command line) and return its exit status."""
    keep_handlers()  # a run's signal handlers stay until the closing text is printed
    try:
        code = _run_command(argv)
    finally:
        # Without argv, kp is the process (its console script, python -m): it exits next.
        stop_signal = restore_signals(exiting=argv is None)
    # Stopped by a signal, during a run or in its shutdown: say so, whatever else happened.
    return exit_status_for(stop_signal) if stop_signal is not None else code


def _run_command(argv: Sequence[str] | None) -> int:
    import logging

    from .._errors import KnowledgePulseError
    from ..io._writers import OutputClosed

    # kp says itself which embedder it uses and why; the library's log line would repeat it.
    logging.getLogger("knowledgepulse").addHandler(logging.NullHandler())

    try:
        with _fewer_collections():
            result = app.main(
                args=list(argv) if argv is not None else None,
                prog_name="kp",
                standalone_mode=False,
            )
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.exceptions.NoArgsIsHelpError as exc:
        sys.stdout.write(exc.format_message() + "\n")
        return EXIT_OK
    except click.UsageError as exc:
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
        sys.stderr.write(f"kp: error: {exc.format_message()}{hint}\n")
        return EXIT_USAGE
    except click.ClickException as exc:
        sys.stderr.write(f"kp: error: {exc.format_message()}\n")
        return exc.exit_code
    except (click.exceptions.Abort, KeyboardInterrupt):
        try:
            sys.stderr.write("kp: interrupted\n")
        except BrokenPipeError:
            return _reader_went_away()
        return EXIT_INTERRUPTED
    except (BrokenPipeError, OutputClosed):
        return _reader_went_away()
    except KnowledgePulseError as exc:
        sys.stderr.write(f"kp: error: {exc}\n")
        return EXIT_USAGE
    except OSError as exc:
        sys.stderr.write(f"kp: error: {exc}\n")
        return EXIT_USAGE if isinstance(exc, FileNotFoundError) else EXIT_REJECTED
    except Exception as exc:
        if os.environ.get("KP_DEBUG"):
            raise
        sys.stderr.write(
            f"kp: internal error: {type(exc).__name__}: {exc} (set KP_DEBUG=1 for the traceback)\n"
        )
        return EXIT_REJECTED
    return result if isinstance(result, int) else EXIT_OK


#: Allocations between two collections of the youngest generation (Python's default: 700).
YOUNG_COLLECTION_THRESHOLD = 100_000


@contextmanager
def _fewer_collections() -> Iterator[None]:
    """Run a command with the cyclic garbage collector mostly out of the way.

    A batch command holds a few batches of validated records (hundreds of objects each) at a
    time; they hold no cycles and are freed by reference counting, yet at the default
    thresholds the collector keeps rescanning them, a large share of ``kp score --no-embed``'s
    time.
    What is loaded before the command runs (modules, the schemas) is frozen out of the scans.
    """
    previous = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, previous[1], previous[2])
    try:
        yield
    finally:
        gc.set_threshold(*previous)
        gc.unfreeze()


def _reader_went_away() -> int:
    """``kp score … | head`` (or ``2>&1 | head``): the reader closed stdout or stderr. Not an
    error: end quietly with 0.

    Python would flush both again at exit and fail once more, so point them at /dev/null.
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        for stream in (sys.stdout, sys.stderr):
            os.dup2(devnull, stream.fileno())
    except (OSError, ValueError):
        pass
    return EXIT_OK
