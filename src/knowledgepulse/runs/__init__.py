"""Runs: a batch verb over files of records, and the report it returns.

A run counts every input record exactly once, as processed, rejected (with file, line, field
and reason) or, after a stop, not processed; it writes whole lines with Ctrl-C and SIGTERM
held; it shows its phase and progress; and it returns one :class:`RunReport` that renders
itself and round-trips to JSON. ``kp validate``, ``kp import``, ``kp redact``, ``kp eval``,
``kp score`` and ``kp curate`` are the verbs below with options and printing.

- :func:`validate_files`, :func:`convert_files`, :func:`redact_files`, :func:`evaluate_files`,
  :func:`score_files`, :func:`curate_files` — the verbs (:class:`RayCurator`: what
  ``curate_files`` runs on Ray with).
- :class:`RunReport` — counts, rejections (:class:`RejectedRecord`), summary, gates, timings
  and what stopped the run; :class:`RunCounts` and each verb's summary.
- :class:`Run`, :class:`Tally`, :class:`Rejection`, :func:`read_units`,
  :func:`read_conversions` — the accounting every run shares (the one read -> tally loop).
- :func:`signals_held`, :func:`stop_signals`, :func:`restore_signals` — stops by signal.

See ``docs/reading-and-accounting.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_attributes

if TYPE_CHECKING:
    from ._curate import RayCurator as RayCurator
    from ._curate import curate_files as curate_files
    from ._evaluate import GROUP_ALIASES as GROUP_ALIASES
    from ._evaluate import CaseSink as CaseSink
    from ._evaluate import CaseUnit as CaseUnit
    from ._evaluate import evaluate_files as evaluate_files
    from ._paths import OutputOverwritesInput as OutputOverwritesInput
    from ._paths import check_outputs as check_outputs
    from ._paths import input_files as input_files
    from ._progress import console_class as console_class
    from ._progress import phase_progress as phase_progress
    from ._progress import silent_console as silent_console
    from ._progress import stderr_console as stderr_console
    from ._report import ConvertSummary as ConvertSummary
    from ._report import CurateFirstPass as CurateFirstPass
    from ._report import CurateSummary as CurateSummary
    from ._report import EvaluateSummary as EvaluateSummary
    from ._report import RedactSummary as RedactSummary
    from ._report import RejectedRecord as RejectedRecord
    from ._report import RunCounts as RunCounts
    from ._report import RunReport as RunReport
    from ._report import ScoreDomain as ScoreDomain
    from ._report import ScoreRunSummary as ScoreRunSummary
    from ._report import ValidateSummary as ValidateSummary
    from ._run import Run as Run
    from ._run import format_hint as format_hint
    from ._run import open_writer as open_writer
    from ._run import read_conversions as read_conversions
    from ._run import read_units as read_units
    from ._score import ScoreSink as ScoreSink
    from ._score import WorkersRefused as WorkersRefused
    from ._score import score_files as score_files
    from ._signals import EXIT_INTERRUPTED as EXIT_INTERRUPTED
    from ._signals import EXIT_OK as EXIT_OK
    from ._signals import EXIT_REJECTED as EXIT_REJECTED
    from ._signals import EXIT_TERMINATED as EXIT_TERMINATED
    from ._signals import EXIT_USAGE as EXIT_USAGE
    from ._signals import exit_status_for as exit_status_for
    from ._signals import keep_handlers as keep_handlers
    from ._signals import received_signal as received_signal
    from ._signals import restore_signals as restore_signals
    from ._signals import signals_held as signals_held
    from ._signals import signals_restored as signals_restored
    from ._signals import stop_signals as stop_signals
    from ._tally import MAX_REJECTIONS_KEPT as MAX_REJECTIONS_KEPT
    from ._tally import MAX_REJECTIONS_SHOWN as MAX_REJECTIONS_SHOWN
    from ._tally import LocatedProblem as LocatedProblem
    from ._tally import Rejection as Rejection
    from ._tally import Tally as Tally
    from ._tally import accounting_line as accounting_line
    from ._verbs import check_format as check_format
    from ._verbs import convert_files as convert_files
    from ._verbs import redact_files as redact_files
    from ._verbs import validate_files as validate_files

_LAZY: dict[str, str] = {
    **dict.fromkeys(
        [
            "EXIT_INTERRUPTED",
            "EXIT_OK",
            "EXIT_REJECTED",
            "EXIT_TERMINATED",
            "EXIT_USAGE",
            "exit_status_for",
            "keep_handlers",
            "received_signal",
            "restore_signals",
            "signals_held",
            "signals_restored",
            "stop_signals",
        ],
        "._signals",
    ),
    **dict.fromkeys(
        [
            "MAX_REJECTIONS_KEPT",
            "MAX_REJECTIONS_SHOWN",
            "LocatedProblem",
            "Rejection",
            "Tally",
            "accounting_line",
        ],
        "._tally",
    ),
    **dict.fromkeys(
        ["Run", "format_hint", "open_writer", "read_conversions", "read_units"], "._run"
    ),
    **dict.fromkeys(
        ["console_class", "phase_progress", "silent_console", "stderr_console"], "._progress"
    ),
    **dict.fromkeys(["OutputOverwritesInput", "check_outputs", "input_files"], "._paths"),
    **dict.fromkeys(
        [
            "ConvertSummary",
            "CurateFirstPass",
            "CurateSummary",
            "EvaluateSummary",
            "RedactSummary",
            "RejectedRecord",
            "RunCounts",
            "RunReport",
            "ScoreDomain",
            "ScoreRunSummary",
            "ValidateSummary",
        ],
        "._report",
    ),
    **dict.fromkeys(["check_format", "convert_files", "redact_files", "validate_files"], "._verbs"),
    **dict.fromkeys(["GROUP_ALIASES", "CaseSink", "CaseUnit", "evaluate_files"], "._evaluate"),
    **dict.fromkeys(["ScoreSink", "WorkersRefused", "score_files"], "._score"),
    **dict.fromkeys(["RayCurator", "curate_files"], "._curate"),
}

__all__ = sorted(_LAZY)

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY, __all__)
