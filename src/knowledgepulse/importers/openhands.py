"""OpenHands trajectories (the event list ``save_trajectory_path`` writes, or an evaluation
output line ``{instance_id, instruction, history: [...]}``) → ReasoningTrace.

A trajectory (its list of events) is one run: one trace. So is each line of an evaluation
output and of the resolver's output (``{issue, instruction, history, success, ...}``: the
issue's title and body → objective, ``owner/repo#number`` → id, ``success`` → success,
``result_explanation`` and ``git_patch`` → ``kp_import``; its events, in OpenHands' older
serialisation without ``id`` and ``source``, are read as today's: an observation answers the
action before it).

- ``action: "message"`` from the ``user`` → user message (the first is the objective, unless
  an evaluation line's ``instruction`` gives it: ``kp_import.objective_from``); from the
  ``agent`` → thought;
- other agent actions (``run``, ``edit``, ``read``, ``write``, ``browse``, ``run_ipython``,
  ``call_tool_mcp``, ...): ``args.thought`` → thought, then tool_call named
  ``tool_call_metadata.function_name`` (else the action) whose input is the model's call
  arguments (from ``tool_call_metadata.model_response``), else the action's ``args`` (its
  ``thought`` and bookkeeping fields left out); ``think`` → thought; ``finish`` → thought
  (``args.final_thought`` or ``message``; also the result summary), ``task_completed`` →
  ``kp_import.task_completed`` (``false`` and ``partial`` → success false);
- the model: an evaluation line's ``metadata.llm_config.model``, else the first
  ``tool_call_metadata.model_response.model`` → ``kp_import.model``; an evaluation line's
  ``metrics.accumulated_token_usage`` → ``kp_import.token_usage``, ``accumulated_cost`` →
  ``kp_import.cost``;
- observations → observation matched by ``tool_call_metadata.tool_call_id`` (else to the
  action named by ``cause``), content from ``content`` (else ``message``);
  ``observation: "error"``, ``user_rejected``, and a non-zero ``extras.exit_code`` /
  ``extras.metadata.exit_code`` → failed; an ``agent_state_changed`` to ``error`` → failure;
- dropped: ``system`` and ``recall`` actions and their observations (the system prompt and
  retrieved microagent knowledge), ``agent_state_changed``, ``null`` observations,
  ``model_response`` copies and ``translated_ipython_code``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from knowledgepulse._schema import ReasoningTrace

from ._builder import TraceBuilder
from ._entries import Entry, default_objective, entries_of, label_origin
from ._harness_text import list_of, mapping
from ._objective import FROM_FORMAT, FROM_SOURCE_ID, FROM_TASK_FIELD
from ._options import ImportOptions, resolve_options
from ._values import (
    ConversionError,
    at,
    expect_dict,
    expect_list,
    parse_arguments,
    parse_timestamp,
    stringify,
)

__all__ = ["from_openhands", "is_openhands_event", "is_openhands_output", "openhands_traces"]

FORMAT = "openhands"
_SOURCES = frozenset({"user", "agent", "environment"})
_SKIPPED_ACTIONS = frozenset({"system", "recall", "change_agent_state", "null"})
_SKIPPED_OBSERVATIONS = frozenset({"recall", "agent_state_changed", "null", "think", "system"})
_FAILED_OBSERVATIONS = frozenset({"error", "user_rejected"})
# Bookkeeping fields of an action's args: not the tool's input.
_NOT_INPUT = frozenset(
    {
        "thought",
        "translated_ipython_code",
        "impl_source",
        "security_risk",
        "confirmation_state",
        "hidden",
        "is_input",
        "blocking",
        "wait_for_response",
        "image_urls",
        "file_urls",
        # older serialisations (the resolver's output)
        "keep_prompt",
        "is_confirmed",
        "action_risk",
        "images_urls",
        "kernel_init_code",
    }
)


def is_openhands_event(record: Any) -> bool:
    """Whether a record is an OpenHands event (an element of a trajectory list)."""
    return (
        isinstance(record, Mapping)
        and isinstance(record.get("source"), str)
        and record["source"] in _SOURCES
        and ("action" in record or "observation" in record)
        and "id" in record
    )


def is_openhands_output(record: Any) -> bool:
    """Whether a record is an OpenHands evaluation output line (``history`` of events) or a
    resolver output line (``{issue, instruction, history, success, ...}``, its events in the
    older serialisation without ``id`` and ``source``)."""
    if not isinstance(record, Mapping) or not isinstance(record.get("history"), list):
        return False
    events = [e for e in record["history"][:3] if isinstance(e, Mapping)]
    legacy_ok = "instruction" in record or isinstance(record.get("issue"), Mapping)
    return bool(events) and all(
        is_openhands_event(e) or (legacy_ok and _is_legacy_event(e)) for e in events
    )


def _is_legacy_event(event: Mapping[str, Any]) -> bool:
    """An event of OpenHands' older serialisation (the resolver's output): ``action`` or
    ``observation`` with its fields beside it, no ``id`` or ``source``."""
    return "source" not in event and (
        isinstance(event.get("action"), str) or isinstance(event.get("observation"), str)
    )


def _modern(events: list[Any], instruction: Any) -> list[Any]:
    """Older events in today's shape: an action's fields become its ``args``, an observation
    answers the action before it (``cause``); the message that is the instruction is the
    user's, other messages the agent's."""
    out: list[Any] = []
    last_action: str | None = None
    for index, event in enumerate(events):
        if not isinstance(event, Mapping) or not _is_legacy_event(event):
            out.append(event)
            continue
        ident = f"legacy-{index}"
        if isinstance(event.get("action"), str):
            args = {k: v for k, v in event.items() if k != "action"}
            user = event["action"] == "message" and event.get("content") == instruction
            out.append(
                {"id": ident, "source": "user" if user else "agent", "action": event["action"]}
                | {"args": args}
            )
            last_action = ident
        else:
            extras = {k: v for k, v in event.items() if k not in ("observation", "content")}
            out.append(
                {
                    "id": ident,
                    "source": "environment",
                    "observation": event["observation"],
                    "content": event.get("content"),
                    "cause": last_action,
                    "extras": extras,
                }
            )
    return out


def from_openhands(
    record: Any, options: ImportOptions | None = None, **overrides: Any
) -> list[ReasoningTrace]:
    """The traces of OpenHands events: a trajectory (list of events), one event, or an
    evaluation output line (or a list of those)."""
    options = resolve_options(options, overrides)
    if is_openhands_output(record):
        return [_output_trace(record, "", options)]
    if isinstance(record, list) and record and all(is_openhands_output(r) for r in record):
        return [_output_trace(r, at("", i), options) for i, r in enumerate(record)]
    return openhands_traces(entries_of(record), options)


def openhands_traces(entries: list[Entry], options: ImportOptions) -> list[ReasoningTrace]:
    """The trace of one trajectory's events, or one trace per evaluation output line."""
    outputs = [(data, label) for data, label in entries if is_openhands_output(data)]
    if outputs:
        return [_output_trace(data, label, options) for data, label in outputs]
    if not any(is_openhands_event(data) for data, _ in entries):
        raise ConversionError(
            "",
            "not an OpenHands trajectory: no element is an event {id, source, action|observation}",
        )
    builder = TraceBuilder(FORMAT)
    _read_events(builder, entries)
    default_objective(builder, "OpenHands trajectory", FROM_FORMAT)
    return [builder.build([data for data, _ in entries], options)]


def _output_trace(record: Mapping[str, Any], label: str, options: ImportOptions) -> ReasoningTrace:
    builder = TraceBuilder(FORMAT)
    instruction = record.get("instruction")
    if isinstance(instruction, str) and instruction.strip():
        builder.objective, builder.objective_from = instruction, FROM_TASK_FIELD
    if isinstance(record.get("instance_id"), (str, int)):
        builder.source_id = str(record["instance_id"])
    _read_issue(builder, record)
    if record.get("error"):
        builder.info["error"] = stringify(record["error"])
        builder.success = False
    _read_run_metadata(builder, record)
    history = _modern(expect_list(record.get("history"), at(label, "history")), instruction)
    _read_events(builder, [(event, at(at(label, "history"), i)) for i, event in enumerate(history)])
    if record.get("test_result") is not None:
        builder.info["test_result"] = record["test_result"]
    default_objective(builder, builder.source_id, FROM_SOURCE_ID)
    try:
        return builder.build(record, options)
    except ConversionError as exc:
        raise exc.under(label.removesuffix(": ")) from None


def _read_issue(builder: TraceBuilder, record: Mapping[str, Any]) -> None:
    """A resolver line's issue: its title and body are the task (the instruction, a template
    around the body, is kept beside it), ``owner/repo#number`` its id; ``success`` → success,
    ``result_explanation`` and ``git_patch`` → ``kp_import``."""
    issue = record.get("issue")
    if not isinstance(issue, Mapping):
        return
    title, body = issue.get("title"), issue.get("body")
    text = "\n\n".join(t for t in (title, body) if isinstance(t, str) and t.strip())
    if text:
        if builder.objective is not None:
            builder.objective_context.append(builder.objective)
        builder.objective, builder.objective_from = text, FROM_TASK_FIELD
    owner, repo, number = issue.get("owner"), issue.get("repo"), issue.get("number")
    if isinstance(owner, str) and isinstance(repo, str) and number is not None:
        builder.source_id = f"{owner}/{repo}#{number}"
    if isinstance(record.get("success"), bool):
        builder.success = record["success"]
    for key in ("result_explanation", "git_patch"):
        if isinstance(record.get(key), str) and record[key]:
            builder.info[key] = record[key]


def _read_run_metadata(builder: TraceBuilder, record: Mapping[str, Any]) -> None:
    """An evaluation line's model (``metadata.llm_config.model``), its token usage and cost
    (``metrics.accumulated_token_usage``, ``metrics.accumulated_cost``)."""
    model = mapping(mapping(record.get("metadata")).get("llm_config")).get("model")
    if isinstance(model, str) and model:
        builder.info["model"] = model
    metrics = mapping(record.get("metrics"))
    usage = {
        key: value
        for key, value in mapping(metrics.get("accumulated_token_usage")).items()
        # ``model`` ("default") and an empty ``response_id`` name no run.
        if key not in ("model", "response_id") and isinstance(value, (int, float))
    }
    if usage:
        builder.info["token_usage"] = usage
    cost = metrics.get("accumulated_cost")
    if isinstance(cost, (int, float)) and not isinstance(cost, bool):
        builder.info["cost"] = cost


def _read_events(builder: TraceBuilder, entries: list[Entry]) -> None:
    actions: dict[Any, str] = {}
    for data, label in entries:
        event = expect_dict(data, label)
        # The event's own id (ids made up for the older serialisation are no source's).
        ident = event.get("id")
        made_up = isinstance(ident, str) and ident.startswith("legacy-")
        builder.at_origin(**label_origin(label), event_id=None if made_up else ident)
        builder.note_time(parse_timestamp(event.get("timestamp")))
        args = mapping(event.get("args"))
        metadata = mapping(event.get("tool_call_metadata"))
        call_id = (
            metadata.get("tool_call_id") if isinstance(metadata.get("tool_call_id"), str) else None
        )
        model = mapping(metadata.get("model_response")).get("model")
        if isinstance(model, str) and model:
            builder.info.setdefault("model", model)
        if "action" in event:
            _read_action(builder, event, args, metadata, call_id, actions)
        elif "observation" in event:
            _read_observation(builder, event, call_id, actions)


def _read_action(
    builder: TraceBuilder,
    event: Mapping[str, Any],
    args: Mapping[str, Any],
    metadata: Mapping[str, Any],
    call_id: str | None,
    actions: dict[Any, str],
) -> None:
    action = event.get("action")
    if not isinstance(action, str) or action in _SKIPPED_ACTIONS:
        return
    source = event.get("source")
    text = args.get("content") if isinstance(args.get("content"), str) else event.get("message")
    if action == "message":
        if source == "user":
            if (
                builder.objective_from == FROM_TASK_FIELD
                and not builder.steps
                and (text == builder.objective or text in builder.objective_context)
            ):
                return  # the instruction again, as the first message
            builder.user_message(text if isinstance(text, str) else None)
        else:
            builder.thought(text if isinstance(text, str) else None)
        return
    thought = args.get("thought")
    if isinstance(thought, str):
        builder.thought(thought)
    if action == "think":
        return
    if action == "finish":
        final = args.get("final_thought") or event.get("message")
        if isinstance(final, str) and final.strip():
            if final != thought:
                builder.thought(final)
            builder.result_summary = final
        completed = args.get("task_completed")
        if completed is not None:
            builder.info["task_completed"] = completed
        # OpenHands' TaskCompletionStatus: "true", "false" or "partial"; partial is no success.
        if completed is False or completed in ("false", "partial"):
            builder.success = False
        return
    function = metadata.get("function_name")
    name = function if isinstance(function, str) and function else action
    arguments = _call_arguments(metadata, call_id)
    if arguments is None:
        arguments = {k: v for k, v in args.items() if k not in _NOT_INPUT}
    builder.tool_call(name, arguments, call_id=call_id)
    event_id = event.get("id")
    if isinstance(event_id, (int, str)) and not isinstance(event_id, bool):
        # an id of another type (a list, an object) names nothing an observation can point at
        actions[event_id] = name


def _call_arguments(metadata: Mapping[str, Any], call_id: str | None) -> dict[str, Any] | None:
    """The arguments the model gave the call (``model_response``), when the event keeps them:
    the tool's real input, where ``args`` holds the action OpenHands made of it."""
    response = mapping(metadata.get("model_response"))
    for choice in list_of(response.get("choices")):
        for call in list_of(mapping(mapping(choice).get("message")).get("tool_calls")):
            call = mapping(call)
            if call_id is not None and call.get("id") != call_id:
                continue
            raw = mapping(call.get("function")).get("arguments")
            return parse_arguments(raw, "", lenient=True)
    return None


def _read_observation(
    builder: TraceBuilder, event: Mapping[str, Any], call_id: str | None, actions: dict[Any, str]
) -> None:
    kind = event.get("observation")
    extras = mapping(event.get("extras"))
    if kind == "agent_state_changed" and extras.get("agent_state") == "error":
        builder.success = False
        return
    if not isinstance(kind, str) or kind in _SKIPPED_OBSERVATIONS:
        return
    content = event.get("content")
    text = content if isinstance(content, str) and content.strip() else event.get("message")
    code = extras.get("exit_code")
    if not isinstance(code, int):
        code = mapping(extras.get("metadata")).get("exit_code")
    failed = kind in _FAILED_OBSERVATIONS or (
        isinstance(code, int) and not isinstance(code, bool) and code not in (0, -1)
    )
    tool = None if call_id else actions.get(event.get("cause"))
    builder.observation(stringify(text), call_id=call_id, tool=tool, failed=failed)
