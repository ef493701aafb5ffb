"""Agent behaviours checked on any :class:`~knowledgepulse.ReasoningTrace`, no model needed.

Library functions read one trace: :func:`find_loops`, :func:`unrecovered_errors`,
:func:`unconfirmed_writes`, :func:`tool_calls`, :func:`expected_actions`, ... Each check
(:func:`expected_actions_match`, :func:`no_loops`, :func:`errors_recovered`,
:func:`known_tools`, :func:`valid_arguments`, :func:`confirmed_before_write`,
:func:`answered`, :func:`within_budget`, :func:`task_completed`, which reads the
trace's own :func:`failure_signs`, and, to locate where a run went wrong without a tool-level
ground truth, :func:`no_failed_calls`, :func:`made_progress` and
:func:`expected_answer_given`) returns a :class:`Finding`: yes, no, or undetermined
when the trace lacks what it needs, with a one-line reason naming the steps.

:func:`behaviour_criterion` turns a check into a rubric
:class:`~knowledgepulse.rubrics.Criterion`, so a rubric can be composed from them;
:data:`AGENT_RUBRIC` (``kp eval --rubric agent``) has them all, and :func:`agent_rubric` /
:func:`load_agent_rubric` change its weights and parameters. See ``docs/rubrics.md``.
"""

from ._agent_rubric import (
    AGENT_RUBRIC,
    BehaviourCheck,
    agent_rubric,
    behaviour_criterion,
    load_agent_rubric,
)
from ._checks import (
    DEFAULT_CONSENT_PATTERN,
    DEFAULT_HANDOFF_TOOLS,
    DEFAULT_MAX_STEPS,
    DEFAULT_SCRATCH_TOOLS,
    DEFAULT_WRITE_TOOLS,
    Finding,
    Loop,
    UnrecoveredError,
    answered,
    confirmed_before_write,
    errors_recovered,
    find_loops,
    known_tools,
    no_loops,
    state_changing_calls,
    unconfirmed_writes,
    unrecovered_errors,
    valid_arguments,
    within_budget,
)
from ._criteria import BEHAVIOURS, Behaviour, Parameter, RubricSettingsError
from ._expected_actions import expected_actions_match
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
from ._grounding import (
    DEFAULT_IDENTIFY_TOOLS,
    UngroundedValue,
    grounded_answer,
    grounded_arguments,
    grounded_statements,
    identified_before_write,
    ungrounded_answer_values,
    ungrounded_arguments,
    ungrounded_statements,
    unidentified_writes,
)
from ._outcome import (
    DEFAULT_BUDGET_PATTERN,
    DEFAULT_CLOSING_PATTERN,
    DEFAULT_FAILURE_PATTERN,
    DEFAULT_HANDOFF_PATTERN,
    FailureSign,
    failure_signs,
    final_answer,
    task_completed,
    unfinished,
)
from ._progress import (
    DEFAULT_STALL_PATTERN,
    DEFAULT_TERMINATION_PATTERN,
    Stall,
    answer_matches,
    expected_answer_given,
    failed_calls,
    given_answer,
    made_progress,
    no_failed_calls,
    stalls,
)
from ._schema_check import schema_problems
from ._tools_file import ToolsFileError, read_tool_definitions, tool_definitions_of, with_tools

__all__ = [
    "AGENT_RUBRIC",
    "BEHAVIOURS",
    "DEFAULT_BUDGET_PATTERN",
    "DEFAULT_CLOSING_PATTERN",
    "DEFAULT_CONSENT_PATTERN",
    "DEFAULT_FAILURE_PATTERN",
    "DEFAULT_HANDOFF_PATTERN",
    "DEFAULT_HANDOFF_TOOLS",
    "DEFAULT_IDENTIFY_TOOLS",
    "DEFAULT_MAX_STEPS",
    "DEFAULT_READ_ONLY_TOOLS",
    "DEFAULT_SCRATCH_TOOLS",
    "DEFAULT_STALL_PATTERN",
    "DEFAULT_TERMINATION_PATTERN",
    "DEFAULT_WRITE_TOOLS",
    "Behaviour",
    "BehaviourCheck",
    "ExpectedAction",
    "FailureSign",
    "Finding",
    "Loop",
    "Parameter",
    "RubricSettingsError",
    "Stall",
    "ToolCall",
    "ToolsFileError",
    "UngroundedValue",
    "UnrecoveredError",
    "agent_rubric",
    "answer_matches",
    "answered",
    "behaviour_criterion",
    "confirmed_before_write",
    "errors_recovered",
    "expected_actions",
    "expected_actions_match",
    "expected_answer_given",
    "expected_outputs",
    "failed_calls",
    "failed_observations",
    "failure_signs",
    "final_answer",
    "find_loops",
    "given_answer",
    "grounded_answer",
    "grounded_arguments",
    "grounded_statements",
    "identified_before_write",
    "is_read_only",
    "known_tools",
    "load_agent_rubric",
    "made_progress",
    "no_failed_calls",
    "no_loops",
    "read_tool_definitions",
    "schema_problems",
    "stalls",
    "state_changing_calls",
    "task_completed",
    "tool_calls",
    "tool_definitions",
    "tool_definitions_of",
    "unconfirmed_writes",
    "unfinished",
    "ungrounded_answer_values",
    "ungrounded_arguments",
    "ungrounded_statements",
    "unidentified_writes",
    "unrecovered_errors",
    "user_turns",
    "valid_arguments",
    "with_tools",
    "within_budget",
]
