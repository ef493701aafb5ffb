"""Ctrl-C and SIGTERM during a run: held while a record's lines are written, noted after a stop.

Signals are held off while one record's output lines are written, so an interruption never
leaves a record half-written or written but uncounted. Once a run has stopped, further
signals are noted and the shutdown goes on: a second Ctrl-C or a repeated SIGTERM never cuts
the summary and the accounting line short. The exit status is then 128 + the first signal:
130 for SIGINT, 143 for SIGTERM, as shells report a process stopped by that signal.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

EXIT_OK, EXIT_REJECTED, EXIT_USAGE, EXIT_INTERRUPTED, EXIT_TERMINATED = 0, 1, 2, 130, 143

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
#: Set by a command (``kp``) that keeps the handlers until it exits (:func:`keep_handlers`).
_kept = False


def exit_status_for(stop_signal: int | None) -> int:
    """128 + the signal that stopped a run: 130 for Ctrl-C (also when raised in-process), 143
    for SIGTERM."""
    return EXIT_TERMINATED if stop_signal == signal.SIGTERM else EXIT_INTERRUPTED


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
    global _kept
    _kept = False
    return received


def keep_handlers() -> None:
    """The command that runs now (``kp``) keeps the handlers a run installs until it calls
    :func:`restore_signals`, so that a signal during its closing text is only noted."""
    global _kept
    _kept = True


@contextmanager
def signals_restored() -> Iterator[None]:
    """Around a library verb: the handlers its run installs are put back when it ends (the
    report says whether a signal stopped it), unless a command keeps them
    (:func:`keep_handlers`)."""
    try:
        yield
    finally:
        if not _kept:
            restore_signals()
