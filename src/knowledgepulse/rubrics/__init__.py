"""Binary weighted evaluation (SPEC §3): grade how well an agent completed a task.

A :class:`Rubric` is a set of named yes/no criteria with weights that sum to 1.0. Each
criterion's check receives one :class:`Case` (final state, ground truth, conversation, trace);
the score is the sum of the weights of the criteria that passed, and the score and the
rubric's success gate give the :class:`OutcomeType`. :func:`evaluate_many` reports on many
cases. Ready checks over reasoning traces are in :mod:`knowledgepulse.rubrics.checks`; the
built-in scheduling rubric is in :mod:`knowledgepulse.rubrics.scheduling`, the built-in agent
rubric in :mod:`knowledgepulse.behaviours`. :class:`OutcomeAgreement` sets outcomes against
the success the source recorded (a benchmark's reward). :func:`judge` makes a
check that puts a yes/no question to a language model (:class:`JudgeModel`); a check that cannot
tell leaves its criterion undetermined (:class:`UndeterminedError`, :class:`Verdict`).
"""

from . import checks
from ._agreement import OutcomeAgreement, source_success
from ._case import CASE_FIELDS, Case, CaseError, CaseTraceError
from ._criterion import (
    LOCATES,
    TOLERANCE,
    Check,
    Criterion,
    EvaluationResult,
    OutcomeType,
    Thresholds,
    UndeterminedError,
    Verdict,
)
from ._judge import CASE_PARTS, JudgedCheck, Rule, judge, judged_checks, prefetching
from ._judge_model import (
    JudgeModel,
    JudgeNotConfiguredError,
    JudgeUsage,
    default_judge,
    set_default_judge,
)
from ._loading import CaseOrRejection, iter_cases, load_cases
from ._report import (
    CriterionStats,
    EvaluationReport,
    ReportBuilder,
    build_report,
    build_reports,
    evaluate_many,
)
from ._resolve import BUILTIN_RUBRICS, RubricLoadError, register_rubric, resolve_rubric
from ._rubric import FrozenRubricError, Rubric
from .scheduling import SCHEDULING_RUBRIC, evaluate_task_completion

__all__ = [
    "BUILTIN_RUBRICS",
    "CASE_FIELDS",
    "CASE_PARTS",
    "LOCATES",
    "SCHEDULING_RUBRIC",
    "TOLERANCE",
    "Case",
    "CaseError",
    "CaseOrRejection",
    "CaseTraceError",
    "Check",
    "Criterion",
    "CriterionStats",
    "EvaluationReport",
    "EvaluationResult",
    "FrozenRubricError",
    "JudgeModel",
    "JudgeNotConfiguredError",
    "JudgeUsage",
    "JudgedCheck",
    "OutcomeAgreement",
    "OutcomeType",
    "ReportBuilder",
    "Rubric",
    "RubricLoadError",
    "Rule",
    "Thresholds",
    "UndeterminedError",
    "Verdict",
    "build_report",
    "build_reports",
    "checks",
    "default_judge",
    "evaluate_many",
    "evaluate_task_completion",
    "iter_cases",
    "judge",
    "judged_checks",
    "load_cases",
    "prefetching",
    "register_rubric",
    "resolve_rubric",
    "set_default_judge",
    "source_success",
]
