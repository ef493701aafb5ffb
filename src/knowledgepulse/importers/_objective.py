"""Choosing a trace's task objective: the task, not whatever a harness sent first.

Real harnesses put something other than the task in the first user message: LangChain
integrations log a "Be helpful!" instruction ahead of it, Terminus-2 wraps it in a 3 KB
instruction template, Codex sends ``AGENTS.md`` and an ``<environment_context>`` block first.
Every importer feeds user text to :class:`~._builder.TraceBuilder`, which applies these rules
through this module:

1. **An explicit task field** (a trace's ``input``, a task's ``instruction``) is the objective
   when the source has one: the importer passes it with its :data:`ObjectiveFrom` name.
2. **A known template's task is extracted** (:func:`task_from_template`): the text between
   Terminus-2's ``Task Description:`` and ``Current terminal state:``.
3. **Harness preambles are skipped** (:func:`preamble_kind`): a user message that is a known
   preamble is not the objective while a later user message can be; it is kept in
   ``metadata.kp_import.objective_context``. A preamble that is the only user message is still
   the objective (it is the best there is).
4. **No user message at all** (a crashed run, OTel with content capture off): the best available
   text (trace input, agent name, span name) is the objective, marked ``objective`` in
   ``kp_import.defaulted``.

Where the objective came from is kept as ``metadata.kp_import.objective_from``: one of
:data:`OBJECTIVE_FROM_NAMES`, or ``template:<name>`` (a :data:`TEMPLATES` name) for an
extracted task. Every importer uses these names and no wording of its own; docs/importers.md
documents each.

The API for importers: :func:`task_from_template`, :func:`preamble_kind` and the origin names.
"""

from __future__ import annotations

import re

__all__ = [
    "FROM_AGENT_NAME",
    "FROM_FORMAT",
    "FROM_OPTION",
    "FROM_SOURCE_ID",
    "FROM_SPAN_NAME",
    "FROM_TASK_DEFINITION",
    "FROM_TASK_FIELD",
    "FROM_TOOL_NAMES",
    "FROM_TRACE_INPUT",
    "FROM_TRACE_NAME",
    "FROM_USER_MESSAGE",
    "OBJECTIVE_FROM_NAMES",
    "TEMPLATES",
    "TEMPLATE_INSTANCE",
    "TEMPLATE_MINI_SWE_AGENT",
    "TEMPLATE_OPENHANDS",
    "TEMPLATE_PREFIX",
    "TEMPLATE_SWE_AGENT",
    "TEMPLATE_TERMINUS_2",
    "ObjectiveFrom",
    "preamble_kind",
    "task_from_template",
]

# Where an objective came from (``metadata.kp_import.objective_from``); docs/importers.md
# documents each in its table, and a test holds the two together.
FROM_OPTION = "option"  # the caller's ImportOptions.objective / --objective
# An explicit task field of the source (OpenAI Agents metadata, an OpenHands evaluation line's
# or a Harbor row's ``instruction``, an Inspect sample's ``input``).
FROM_TASK_FIELD = "task_field"
FROM_TRACE_INPUT = "trace_input"  # a trace's or root run's/span's input value
FROM_USER_MESSAGE = "user_message"  # the first user message that is not a preamble
# Defaulted: the source holds no user message.
FROM_TRACE_NAME = "trace_name"
FROM_AGENT_NAME = "agent_name"
FROM_SPAN_NAME = "span_name"
FROM_TOOL_NAMES = "tool_names"
FROM_FORMAT = "format"
# The run's own id (a session, sample or instance id, an environment name).
FROM_SOURCE_ID = "source_id"
# The benchmark task's own description (tau2's ``reason_for_call``), the user never spoke.
FROM_TASK_DEFINITION = "task_definition"

ObjectiveFrom = str
#: Every name but ``template:<name>`` (whose names are :data:`TEMPLATES`).
OBJECTIVE_FROM_NAMES: tuple[ObjectiveFrom, ...] = (
    FROM_OPTION,
    FROM_TASK_FIELD,
    FROM_TRACE_INPUT,
    FROM_USER_MESSAGE,
    FROM_TRACE_NAME,
    FROM_AGENT_NAME,
    FROM_SPAN_NAME,
    FROM_TOOL_NAMES,
    FROM_FORMAT,
    FROM_SOURCE_ID,
    FROM_TASK_DEFINITION,
)

TEMPLATE_PREFIX = "template:"
# Known templates a task is extracted from (``template:<name>``).
TEMPLATE_TERMINUS_2 = "terminus-2"  # Terminus-2's instruction template
# The run's own configured ``instance_template`` (SWE-agent, mini-SWE-agent).
TEMPLATE_INSTANCE = "instance_template"
# SWE-agent's stock prompts: a ``<pr_description>``/``<issue>`` block, an ``ISSUE:`` section.
TEMPLATE_SWE_AGENT = "swe-agent"
TEMPLATE_MINI_SWE_AGENT = "mini-swe-agent"  # mini-SWE-agent's stock instance templates
# OpenHands without function calling: an in-context example, then the task between markers.
TEMPLATE_OPENHANDS = "openhands"
TEMPLATES: tuple[str, ...] = (
    TEMPLATE_TERMINUS_2,
    TEMPLATE_INSTANCE,
    TEMPLATE_SWE_AGENT,
    TEMPLATE_MINI_SWE_AGENT,
    TEMPLATE_OPENHANDS,
)

# -- templates ------------------------------------------------------------------------------

_TERMINUS_2_START = "You are an AI assistant tasked with solving command-line tasks"
_TERMINUS_2_TASK = re.compile(
    r"\nTask Description:\n(?P<task>.*?)\n+Current terminal state:", re.DOTALL
)


# OpenHands' in-context example (its agent without function calling): the task follows it.
_OPENHANDS_EXAMPLE_START = "Here's a running example of how to perform a task with the provided"
_OPENHANDS_TASK = re.compile(
    r"-{5,} NEW TASK DESCRIPTION -{5,}\n(?P<task>.*?)\n+-{5,} END OF NEW TASK DESCRIPTION -{5,}",
    re.DOTALL,
)


def task_from_template(text: str) -> tuple[str, str] | None:
    """The task inside a known harness's instruction template, and the template's name.

    - Terminus-2 (Harbor, Terminal-Bench): a message starting with "You are an AI assistant
      tasked with solving command-line tasks" holds the task between ``Task Description:``
      and ``Current terminal state:``; the name is ``terminus-2``;
    - OpenHands without function calling: a message starting with "Here's a running example
      of how to perform a task with the provided tools." (an in-context example, some 6,000
      characters) holds the task between its ``NEW TASK DESCRIPTION`` and ``END OF NEW TASK
      DESCRIPTION`` marker lines; the name is ``openhands``.

    ``None`` for any other text.
    """
    stripped = text.lstrip()
    for start, pattern, name in (
        (_TERMINUS_2_START, _TERMINUS_2_TASK, TEMPLATE_TERMINUS_2),
        (_OPENHANDS_EXAMPLE_START, _OPENHANDS_TASK, TEMPLATE_OPENHANDS),
    ):
        if stripped.startswith(start):
            match = pattern.search(stripped)
            if match is not None and match.group("task").strip():
                return match.group("task").strip(), name
    return None


# -- preambles ------------------------------------------------------------------------------

# Short instructions about how to behave, sent as a user message ahead of the task (LangChain
# examples send "Be helpful!"). Only short, one-line text is a candidate: a task is not.
_ADJECTIVE = (
    r"(?:helpful|concise|brief|polite|friendly|nice|precise|accurate|honest|harmless|careful)"
)
_BEHAVIOUR = re.compile(
    rf"^\s*(?:please\s+)?(?:"
    rf"be\s+{_ADJECTIVE}(?:\s*(?:,|and|,\s*and)\s*{_ADJECTIVE})*"
    r"|you\s+are\s+(?:a|an)\s+[\w\s-]{0,40}?(?:assistant|agent|bot|ai)"
    r"|act\s+as\s+(?:a|an)\s+[\w\s-]{0,40}?(?:assistant|agent)"
    r")[\s.!]*$",
    re.IGNORECASE,
)
_BEHAVIOUR_MAX = 200
# Codex CLI: the project's AGENTS.md and the sandbox description come before the task.
_CODEX_PREFIXES = (
    "# AGENTS.md instructions for",
    "<user_instructions>",
    "<environment_context>",
    "<permissions instructions>",
)

# OpenHands' system prompt, which some exports (Harbor's traces) write as a user message.
_OPENHANDS_SYSTEM = "You are OpenHands agent, a helpful AI assistant"


def preamble_kind(text: str) -> str | None:
    """What kind of harness preamble ``text`` is, or ``None`` when it may be the task.

    - ``codex``: ``AGENTS.md`` instructions (``# AGENTS.md instructions for ...``,
      ``<user_instructions>``) or an ``<environment_context>`` block, as Codex sends them;
    - ``openhands``: OpenHands' system prompt ("You are OpenHands agent, a helpful AI
      assistant ..."), sent as a user message in Harbor's traces export;
    - ``instruction``: an instruction about behaviour and nothing else, not a task ("Be
      helpful!", "Be concise and accurate.", "You are a helpful assistant.", "Act as a travel
      agent"): the whole text is one such phrase (at most 200 characters).
    """
    stripped = text.strip()
    if stripped.startswith(_CODEX_PREFIXES):
        return "codex"
    if stripped.startswith(_OPENHANDS_SYSTEM):
        return "openhands"
    if len(stripped) <= _BEHAVIOUR_MAX and _BEHAVIOUR.match(stripped):
        return "instruction"
    return None
