"""SWE-agent trajectories (``.traj``) and mini-SWE-agent trajectories (``.traj.json``) →
ReasoningTrace.

In both, the harness speaks as the ``user``: command output comes back as user messages. Those
are observations of the command before them, never user turns.

**SWE-agent** ``{"trajectory": [...], "history": [...], "info": {...}}``, one trace:

- ``trajectory[]``: ``thought`` → thought; ``action`` → tool_call: the model's function call
  for that action in ``history`` (its name and arguments), else the command's first word for
  SWE-agent's own tools (``open``, ``edit``, ``str_replace_editor``, ``submit``, ...) or
  ``bash``, with ``input = {"command": action}``; ``observation`` → observation;
  ``execution_time`` → latency;
- objective: the issue inside the first non-demo user message of ``history``: taken out of
  ``replay_config.agent.templates.instance_template`` (around ``{problem_statement}``),
  else a ``<pr_description>``/``<issue>`` block or the text after ``ISSUE:``; else that whole
  message;
- failure: an observation reporting a non-zero exit code, or that looks like an error;
- ``info.exit_status``, ``info.submission``, ``info.model_stats``, the model's name and
  ``environment`` (the Docker image, ``swe_main`` in every 0.x run: no id) → ``kp_import``;
  ``replay_config.problem_statement.id`` → source id, else a hash of the record;
  success is left to the caller (a trajectory does not say whether the patch passed).

A demonstration file (``{"history": [...]}`` only, its messages carrying SWE-agent's
``agent`` and ``message_type``): the task from the first non-demo user message as above;
assistant ``thought`` (else text) → thought, its function calls (else ``action``) →
tool_calls; ``tool`` messages (``tool_call_ids``) and later user messages → observations.

**mini-SWE-agent** ``{"info": {...}, "messages": [...], "trajectory_format":
"mini-swe-agent-1.1"}``, or (older versions) the bare list of messages, one trace:

- ``assistant`` text before the fenced command → thought, the fenced command
  (```` ```bash ```` / ```` ```mswea_bash_command ````) → tool_call ``bash``; ``tool_calls``
  (tool-calling models) → tool_calls;
- the first ``user`` message is the task: the task is taken out of the instance template
  (``info.config.agent.instance_template``, else the stock ``Please solve this issue: …`` and
  ``<pr_description>`` templates; ``kp_import.objective_from``);
- later ``user`` (and ``tool``) messages: ``<returncode>N</returncode>`` output → observation
  of the command before it, failed when N ≠ 0; other harness messages (format errors,
  timeouts) → failed observations marked ``"source": "harness"``; the submission after
  ``COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`` → observation;
- ``info.exit_status`` → ``kp_import.exit_status`` (``Submitted`` when a run without one,
  a bare message list, ran the submit command); a run that ended other than
  ``Submitted`` (``LimitsExceeded``, an error) failed; ``info.submission`` →
  ``kp_import.submission``; ``info.model_stats`` → ``kp_import.model_stats``;
  ``info.config.model.model_name`` → ``kp_import.model``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from knowledgepulse._schema import ReasoningTrace

from ._builder import TraceBuilder
from ._entries import default_objective
from ._harness_text import exit_code_of, mapping, task_from_template
from ._objective import (
    FROM_FORMAT,
    FROM_SOURCE_ID,
    FROM_USER_MESSAGE,
    TEMPLATE_INSTANCE,
    TEMPLATE_MINI_SWE_AGENT,
    TEMPLATE_PREFIX,
    TEMPLATE_SWE_AGENT,
)
from ._options import ImportOptions, resolve_options
from ._values import (
    ConversionError,
    at,
    content_text,
    expect_dict,
    expect_list,
    expect_str,
    parse_arguments,
)

__all__ = [
    "from_mini_swe_agent",
    "from_swe_agent",
    "is_mini_swe_agent",
    "is_swe_agent",
]

SUBMIT_MARKER = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
_FENCE = re.compile(r"```(?:bash|mswea_bash_command|sh)?\s*\n(.*?)```", re.DOTALL)
# The stock instance templates of mini-SWE-agent: text before and after the task.
_STOCK_TEMPLATES = (
    ("Please solve this issue: ", "\n\nYou can execute bash commands"),
    ("<pr_description>\nConsider the following PR description:\n", "\n</pr_description>"),
    ("<pr_description>\n", "\n</pr_description>"),
)
_ISSUE_BLOCKS = ("pr_description", "issue", "problem_statement")
_SWE_TOOLS = frozenset(
    {
        "open",
        "goto",
        "scroll_up",
        "scroll_down",
        "create",
        "edit",
        "insert",
        "search_dir",
        "search_file",
        "find_file",
        "submit",
        "str_replace_editor",
        "filemap",
    }
)


def is_swe_agent(record: Any) -> bool:
    """Whether a record is a SWE-agent ``.traj`` trajectory (or a demonstration file, its
    ``history`` only)."""
    if not isinstance(record, Mapping):
        return False
    steps = record.get("trajectory")
    return (
        isinstance(steps, list)
        and ("history" in record or "info" in record)
        and all(isinstance(s, Mapping) and "action" in s for s in steps[:3])
    ) or _is_history_only(record)


def _is_history_only(record: Mapping[str, Any]) -> bool:
    """A demonstration file: ``{"history": [...]}`` whose messages carry SWE-agent's own
    ``agent`` and ``message_type`` fields."""
    history = record.get("history")
    if "trajectory" in record or not isinstance(history, list) or not history:
        return False
    return all(
        isinstance(m, Mapping) and "role" in m and "message_type" in m and "agent" in m
        for m in history[:3]
    )


def is_mini_swe_agent(record: Any) -> bool:
    """Whether a record is a mini-SWE-agent trajectory: the object, or (older versions) the
    list of messages whose first command output is ``<returncode>``-tagged."""
    if isinstance(record, Mapping):
        fmt = record.get("trajectory_format")
        if isinstance(fmt, str) and fmt.startswith("mini-swe-agent"):
            return True
        info = mapping(record.get("info"))
        return isinstance(record.get("messages"), list) and "mini_version" in info
    if isinstance(record, (list, tuple)):
        users = [m for m in record if isinstance(m, Mapping) and m.get("role") in ("user", "tool")]
        return any(
            isinstance(m.get("content"), str) and m["content"].lstrip().startswith("<returncode>")
            for m in users[1:3]
        )
    return False


# ---------------------------------------------------------------------------------------------
# SWE-agent


def from_swe_agent(
    record: Any, options: ImportOptions | None = None, **overrides: Any
) -> list[ReasoningTrace]:
    """The trace of a SWE-agent ``.traj`` trajectory."""
    options = resolve_options(options, overrides)
    traj = expect_dict(record, "")
    if "trajectory" not in traj and _is_history_only(traj):
        return [_from_history(traj, options)]
    if "trajectory" not in traj:
        raise ConversionError("", "not a SWE-agent trajectory: no 'trajectory'")
    builder = TraceBuilder("swe-agent")
    info = mapping(traj.get("info"))
    for key in ("exit_status", "submission", "swe_agent_version", "model_stats"):
        if info.get(key) is not None:
            builder.info[key] = info[key]
    replay = _replay_config(traj.get("replay_config"))
    problem = mapping(replay.get("problem_statement"))
    if isinstance(problem.get("id"), str) and problem["id"]:
        builder.source_id = problem["id"]
    # ``environment`` names the Docker image (``swe_main`` in every SWE-agent 0.x run), not
    # the run: kept, but no id; without a problem statement id the id is the record's hash.
    if isinstance(traj.get("environment"), str) and traj["environment"]:
        builder.info["environment"] = traj["environment"]
    model = mapping(mapping(replay.get("agent")).get("model")).get("name")
    if isinstance(model, str) and model:
        builder.info["model"] = model
    prompt = _first_task_prompt(traj.get("history"))
    if prompt is not None:
        template = mapping(mapping(replay.get("agent")).get("templates")).get("instance_template")
        task = task_from_template(prompt, template, "{problem_statement}")
        origin = TEMPLATE_PREFIX + TEMPLATE_INSTANCE
        if task is None:
            task, origin = _issue_of(prompt)
        builder.objective, builder.objective_from = task, origin
        # The template around the task is kept, not lost (build drops it if it is the task).
        builder.objective_context.append(prompt)
    calls = _history_calls(traj.get("history"))
    steps = expect_list(traj.get("trajectory"), "trajectory")
    for index, raw in enumerate(steps):
        builder.at_origin(trajectory=index)
        where = at("trajectory", index)
        step = expect_dict(raw, where)
        thought = step.get("thought")
        if isinstance(thought, str):
            builder.thought(thought)
        action = step.get("action")
        latency = _seconds_ms(step.get("execution_time"))
        name: str | None = None
        if isinstance(action, str) and action.strip():
            name, arguments = calls.get(action.strip()) or _command_call(action.strip())
            builder.tool_call(name, arguments, latency_ms=latency)
        observation = step.get("observation")
        if isinstance(observation, str) and name is not None:
            code = exit_code_of(observation)
            builder.observation(observation, tool=name, failed=isinstance(code, int) and code != 0)
    default_objective(builder, builder.source_id, FROM_SOURCE_ID)
    return [builder.build(traj, options)]


def _from_history(traj: Mapping[str, Any], options: ImportOptions) -> ReasoningTrace:
    """A demonstration file's trace, from its ``history``: the first non-demo user message is
    the task; an assistant message's ``thought`` (else its text) → thought, its function calls
    (else its ``action``) → tool_calls; ``tool`` messages (by ``tool_call_ids``) and later
    ``user`` messages (command output) → observations of the call before them."""
    builder = TraceBuilder("swe-agent")
    history = expect_list(traj.get("history"), "history")
    prompt = _first_task_prompt(history)
    if prompt is not None:
        builder.objective, builder.objective_from = _issue_of(prompt)
        builder.objective_context.append(prompt)
    for index, raw in enumerate(history):
        builder.at_origin(history=index)
        message = expect_dict(raw, at("history", index))
        role = message.get("role")
        text = content_text(message.get("content"))
        if message.get("is_demo") or role == "system" or (role == "user" and text == prompt):
            continue
        if role == "assistant":
            thought = message.get("thought")
            builder.thought(thought if isinstance(thought, str) else text)
            _history_message_calls(builder, message)
        elif role in ("tool", "user"):
            ids = message.get("tool_call_ids")
            call_id = ids[0] if isinstance(ids, list) and ids and isinstance(ids[0], str) else None
            tool = None if call_id else _last_tool(builder)
            code = exit_code_of(text)
            builder.observation(
                text, call_id=call_id, tool=tool, failed=isinstance(code, int) and code != 0
            )
    default_objective(builder, "SWE-agent demonstration", FROM_FORMAT)
    return builder.build(traj, options)


def _history_message_calls(builder: TraceBuilder, message: Mapping[str, Any]) -> None:
    calls = message.get("tool_calls")
    if isinstance(calls, list) and calls:
        for raw in calls:
            call = mapping(raw)
            function = mapping(call.get("function"))
            name = function.get("name")
            call_id = call.get("id")
            builder.tool_call(
                name if isinstance(name, str) and name else "bash",
                parse_arguments(function.get("arguments"), "", lenient=True),
                call_id=call_id if isinstance(call_id, str) else None,
            )
        return
    action = message.get("action")
    if isinstance(action, str) and action.strip():
        builder.tool_call(*_command_call(action.strip()))


def _replay_config(value: Any) -> Mapping[str, Any]:
    """The run's configuration (an object, or JSON text in older versions)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return {}
    return mapping(value)


def _history_calls(history: Any) -> dict[str, tuple[str, dict[str, Any]]]:
    """Each action's tool call as the model made it (function calling): action text → (the
    tool's name, its arguments)."""
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    if not isinstance(history, list):
        return calls
    for message in history:
        message = mapping(message)
        action = message.get("action")
        tool_calls = message.get("tool_calls")
        if not isinstance(action, str) or not isinstance(tool_calls, list) or len(tool_calls) != 1:
            continue
        function = mapping(mapping(tool_calls[0]).get("function"))
        if isinstance(function.get("name"), str):
            arguments = parse_arguments(function.get("arguments"), "", lenient=True)
            calls.setdefault(action.strip(), (function["name"], arguments))
    return calls


def _command_call(action: str) -> tuple[str, dict[str, Any]]:
    """A command line as a tool call: SWE-agent's own commands by name, the rest ``bash``."""
    first = action.split()[0]
    return (first if first in _SWE_TOOLS else "bash"), {"command": action}


def _first_task_prompt(history: Any) -> str | None:
    if not isinstance(history, list):
        return None
    for message in history:
        if (
            isinstance(message, Mapping)
            and message.get("role") == "user"
            and not message.get("is_demo")
        ):
            text = content_text(message.get("content"))
            if text.strip():
                return text
    return None


def _issue_of(prompt: str) -> tuple[str, str]:
    """The issue inside a SWE-agent prompt, and where it came from (``objective_from``)."""
    for tag in _ISSUE_BLOCKS:
        match = re.search(rf"<{tag}>\s*(.*?)\s*</{tag}>", prompt, re.DOTALL)
        if match and match.group(1).strip():
            text = match.group(1).strip()
            text = text.removeprefix("Consider the following PR description:").strip()
            return text, TEMPLATE_PREFIX + TEMPLATE_SWE_AGENT
    match = re.search(r"ISSUE:\s*\n(.*?)\n\s*INSTRUCTIONS:", prompt, re.DOTALL)
    if match and match.group(1).strip():
        return match.group(1).strip(), TEMPLATE_PREFIX + TEMPLATE_SWE_AGENT
    return prompt, FROM_USER_MESSAGE


def _seconds_ms(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return float(value) * 1000
    return None


# ---------------------------------------------------------------------------------------------
# mini-SWE-agent


def from_mini_swe_agent(
    record: Any, options: ImportOptions | None = None, **overrides: Any
) -> list[ReasoningTrace]:
    """The trace of a mini-SWE-agent trajectory (the object, or the bare message list)."""
    options = resolve_options(options, overrides)
    builder = TraceBuilder("mini-swe-agent")
    info: Mapping[str, Any] = {}
    if isinstance(record, (list, tuple)):
        messages, path = list(record), ""
    else:
        traj = expect_dict(record, "")
        if "messages" not in traj or not is_mini_swe_agent(traj):
            raise ConversionError(
                "",
                "expected a mini-SWE-agent trajectory ('messages' with 'trajectory_format' "
                "or 'info.mini_version')",
            )
        messages = expect_list(traj["messages"], "messages")
        path, info = "messages", mapping(traj.get("info"))
        if isinstance(traj.get("instance_id"), str):
            builder.source_id = traj["instance_id"]
    template = mapping(mapping(mapping(info.get("config")).get("agent"))).get("instance_template")
    submitted = _read_mini_messages(builder, messages, path, template)
    exit_status = info.get("exit_status")
    if not (isinstance(exit_status, str) and exit_status) and submitted:
        # Older runs (a bare message list) record no exit status; running the submit command
        # is what makes mini-SWE-agent record Submitted.
        exit_status = "Submitted"
    if isinstance(exit_status, str) and exit_status:
        builder.info["exit_status"] = exit_status
        builder.success = False if exit_status != "Submitted" else None
    for key in ("submission", "model_stats", "mini_version"):
        if info.get(key) not in (None, ""):
            builder.info[key] = info[key]
    model = mapping(mapping(info.get("config")).get("model")).get("model_name")
    if isinstance(model, str) and model:
        builder.info["model"] = model
    return [builder.build(record, options)]


def _read_mini_messages(
    builder: TraceBuilder, messages: list[Any], path: str, template: Any
) -> bool:
    """Read the messages into ``builder``; whether a command submitted the run."""
    submitted = False
    for index, raw in enumerate(messages):
        builder.at_origin(message=index)
        where = at(path, index)
        message = expect_dict(raw, where)
        role = expect_str(message.get("role"), at(where, "role"))
        text = content_text(message.get("content"))
        if role in ("system", "exit"):
            continue
        if role == "assistant":
            submitted = _read_action(builder, message, text, where) or submitted
        elif role in ("user", "tool"):
            if builder.objective is None and role == "user":
                builder.objective, builder.objective_from = _mini_task(text, template)
                builder.objective_context.append(text)
                continue
            call_id = message.get("tool_call_id")
            code = exit_code_of(text)
            call = call_id if isinstance(call_id, str) else None
            tool = None if call else _last_tool(builder)
            if code is not None:
                builder.observation(text, call_id=call, tool=tool, failed=code != 0)
            elif submitted:
                builder.observation(text, call_id=call, tool=tool)
            elif text.strip():
                # A harness message that is not command output: a format error or a timeout.
                builder.observation(text, failed=True, source="harness")
        else:
            raise ConversionError(
                at(where, "role"),
                f"expected one of 'system', 'user', 'assistant', 'tool' (got {role!r})",
            )
    return submitted


def _last_tool(builder: TraceBuilder) -> str | None:
    """The tool of the last unanswered call: command output answers the command before it."""
    for step in reversed(builder.steps):
        if step.type == "tool_call":
            return None if step.answered else step.tool
    return None


def _read_action(builder: TraceBuilder, message: Mapping[str, Any], text: str, where: str) -> bool:
    """The assistant's thought and command(s); whether a command submits the run."""
    calls = message.get("tool_calls")
    submitted = False
    if isinstance(calls, list) and calls:
        builder.thought(text)
        for index, raw in enumerate(calls):
            call_where = at(at(where, "tool_calls"), index)
            call = expect_dict(raw, call_where)
            function = mapping(call.get("function"))
            name = function["name"] if isinstance(function.get("name"), str) else "bash"
            arguments = parse_arguments(
                function.get("arguments"), at(call_where, "function.arguments"), lenient=True
            )
            call_id = call.get("id")
            builder.tool_call(
                name, arguments, call_id=call_id if isinstance(call_id, str) else None
            )
            submitted = submitted or SUBMIT_MARKER in str(arguments)
        return submitted
    match = _FENCE.search(text)
    if match is None:
        builder.thought(text)
        return False
    thought = text[: match.start()].strip()
    thought = re.sub(r"^THOUGHT:\s*", "", thought)
    builder.thought(thought)
    command = match.group(1).strip()
    builder.tool_call("bash", {"command": command})
    return SUBMIT_MARKER in command


def _mini_task(text: str, template: Any) -> tuple[str, str]:
    task = task_from_template(text, template)
    if task is not None:
        return task, TEMPLATE_PREFIX + TEMPLATE_INSTANCE
    for head, tail in _STOCK_TEMPLATES:
        if text.startswith(head):
            rest = text[len(head) :]
            end = rest.find(tail)
            if end > 0:
                return rest[:end].strip(), TEMPLATE_PREFIX + TEMPLATE_MINI_SWE_AGENT
    return text, FROM_USER_MESSAGE
