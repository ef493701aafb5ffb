"""Agent behaviours checked on any :class:`~knowledgepulse.ReasoningTrace`, no model needed.

Library functions read one trace: :func:`find_loops`, :func:`unrecovered_errors`,
:func:`unconfirmed_writes`, :func:`tool_calls`, :func:`expected_actions`, ... Each check
(:func:`expected_actions_match`, :func:`no_loops`, :func:`errors_recovered`,
:func:`known_tools`, :func:`valid_arguments`, :func:`confirmed_before_write`,
:func:`answered`, :func:`within_budget`, and :func:`task_completed`, which reads the
trace's own :func:`failure_signs`) returns a :class:`Finding`: yes, no, or undetermined
when the trace lacks what it needs, with a one-line reason naming the steps.

:func:`behaviour_criterion` turns a check into a rubric
:class:`~knowledgepulse.rubrics.Criterion`, so a rubric can be composed from them;
:data:`AGENT_RUBRIC` (``kp eval --rubric agent``) has them all, and :func:`agent_rubric` /
:func:`load_agent_rubric` change its weights and parameters. See ``docs/rubrics.md``.
"""

from ._checks import (
    DEFAULT_BUDGET_PATTERN,
    DEFAULT_CONSENT_PATTERN,
    DEFAULT_FAILURE_PATTERN,
    DEFAULT_HANDOFF_PATTERN,
    DEFAULT_HANDOFF_TOOLS,
    DEFAULT_MAX_STEPS,
    DEFAULT_SCRATCH_TOOLS,
    DEFAULT_WRITE_TOOLS,
    FailureSign,
    Finding,
    Loop,
    UnrecoveredError,
    answered,
    confirmed_before_write,
    errors_recovered,
    expected_actions_match,
    failure_signs,
    final_answer,
    find_loops,
    known_tools,
    no_loops,
    state_changing_calls,
    task_completed,
    unconfirmed_writes,
    unrecovered_errors,
    valid_arguments,
    within_budget,
)
from ._criteria import (
    AGENT_RUBRIC,
    BEHAVIOURS,
    Behaviour,
    BehaviourCheck,
    Parameter,
    RubricSettingsError,
    agent_rubric,
    behaviour_criterion,
    load_agent_rubric,
)
from ._facts import (
    DEFAULT_READ_ONLY_TOOLS,
    ExpectedAction,
    ToolCall,
    expected_actions,
    expected_outputs,
    failed_observations,
    is_read_only,
    tool_calls,
    tool_definitions,
    user_turns,
)
from ._schema_check import schema_problems

__all__ = [
    "AGENT_RUBRIC",
    "BEHAVIOURS",
    "DEFAULT_BUDGET_PATTERN",
    "DEFAULT_CONSENT_PATTERN",
    "DEFAULT_FAILURE_PATTERN",
    "DEFAULT_HANDOFF_PATTERN",
    "DEFAULT_HANDOFF_TOOLS",
    "DEFAULT_MAX_STEPS",
    "DEFAULT_READ_ONLY_TOOLS",
    "DEFAULT_SCRATCH_TOOLS",
    "DEFAULT_WRITE_TOOLS",
    "Behaviour",
    "BehaviourCheck",
    "ExpectedAction",
    "FailureSign",
    "Finding",
    "Loop",
    "Parameter",
    "RubricSettingsError",
    "ToolCall",
    "UnrecoveredError",
    "agent_rubric",
    "answered",
    "behaviour_criterion",
    "confirmed_before_write",
    "errors_recovered",
    "expected_actions",
    "expected_actions_match",
    "expected_outputs",
    "failed_observations",
    "failure_signs",
    "final_answer",
    "find_loops",
    "is_read_only",
    "known_tools",
    "load_agent_rubric",
    "no_loops",
    "schema_problems",
    "state_changing_calls",
    "task_completed",
    "tool_calls",
    "tool_definitions",
    "unconfirmed_writes",
    "unrecovered_errors",
    "user_turns",
    "valid_arguments",
    "within_budget",
]
