"""tau2-bench results (``{timestamp, info, tasks, simulations}``) → ReasoningTrace: one trace per
simulation.

- messages: ``assistant`` ``raw_data.thinking_blocks`` and ``content`` → thought,
  ``tool_calls[]{id, name, arguments}`` → tool_call; ``tool`` messages → observation
  matched by ``id``, ``error: true`` → failed; ``user`` text → the objective (the first; as
  for tau-bench, what the simulated customer asked: ``kp_import.objective_from``), later
  ones → observations marked ``"source": "user"``; the user simulator's stop tokens
  (``###STOP###``, ...) are dropped, and so are the user's own tool calls and their results
  (``requestor: "user"``, the telecom domain's device actions: not the agent's work);
- ``reward_info.reward`` ≥ 1.0 → success (``kp_import.reward``); ``termination_reason``,
  ``task_id``, ``trial`` → ``kp_import`` (``reason``, ``task``, ``trial``); id
  ``kp:trace:tau2:<domain>:task-<task_id>:trial-<trial>``; ``start_time`` → ``created_at``;
  the run's ``info.agent_info.llm`` → ``kp_import.model``, ``info.user_info.llm`` →
  ``kp_import.user_model``;
- ground truth, as for tau-bench's ``info``: ``{"task": <the task: its user scenario and
  evaluation criteria with the expected actions>, "reward_info": <the simulation's
  reward_info>}`` → ``metadata.ground_truth``;
- dropped: costs, usage, ``raw_data`` other than thinking, the rest of the run's ``info``
  (policy, guidelines), the tasks without simulations.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from knowledgepulse._schema import ReasoningTrace
from knowledgepulse.io._reader import json_type_name

from ._builder import TraceBuilder
from ._entries import default_objective
from ._harness_text import list_of, mapping
from ._objective import FROM_TASK_DEFINITION
from ._options import ImportOptions, resolve_options
from ._values import (
    ConversionError,
    at,
    content_text,
    expect_dict,
    expect_list,
    expect_str,
    parse_arguments,
    parse_timestamp,
)

__all__ = ["from_tau2", "is_tau2_results", "tau2_runs"]

FORMAT = "tau2"
SUCCESS_THRESHOLD = 1.0
_STOP_TOKENS = ("###STOP###", "###TRANSFER###", "###OUT-OF-SCOPE###")


def is_tau2_results(record: Any) -> bool:
    """Whether a record is a tau2-bench results file."""
    return (
        isinstance(record, Mapping)
        and isinstance(record.get("simulations"), list)
        and ("tasks" in record or "info" in record)
    )


def from_tau2(
    record: Any, options: ImportOptions | None = None, **overrides: Any
) -> list[ReasoningTrace]:
    """The traces of a tau2-bench results object: one per simulation. Raises
    :class:`ConversionError` listing every broken simulation."""
    options = resolve_options(options, overrides)
    traces: list[ReasoningTrace] = []
    errors: list[ConversionError] = []
    for _, convert_run in tau2_runs(record, options):
        try:
            traces.append(convert_run())
        except ConversionError as exc:
            errors.append(exc)
    if errors:
        raise ConversionError.merged(errors)
    return traces


def tau2_runs(
    record: Any, options: ImportOptions
) -> list[tuple[Any, Callable[[], ReasoningTrace]]]:
    """Each simulation of a results object with its converter (each run converts, or fails,
    on its own). Raises :class:`ConversionError` when the object holds no simulations."""
    results = expect_dict(record, "")
    if "simulations" not in results:
        raise ConversionError("", "not tau2-bench results: no 'simulations'")
    simulations = expect_list(results.get("simulations"), "simulations")
    if not simulations:
        raise ConversionError("simulations", "the results hold no simulations")
    tasks = {
        str(task.get("id")): task
        for task in list_of(results.get("tasks"))
        if isinstance(task, Mapping)
    }
    run_info = mapping(results.get("info"))
    domain = mapping(run_info.get("environment_info")).get("domain_name")
    models = _models(run_info)
    return [
        (raw, partial(_simulation, raw, at("simulations", index), tasks, domain, models, options))
        for index, raw in enumerate(simulations)
    ]


def _models(run_info: Mapping[str, Any]) -> dict[str, str]:
    """The run's models: the agent's (``agent_info.llm`` → ``model``) and the user
    simulator's (``user_info.llm`` → ``user_model``)."""
    models = {}
    for key, name in (("agent_info", "model"), ("user_info", "user_model")):
        llm = mapping(run_info.get(key)).get("llm")
        if isinstance(llm, str) and llm:
            models[name] = llm
    return models


def _simulation(
    raw: Any,
    path: str,
    tasks: Mapping[str, Any],
    domain: Any,
    models: Mapping[str, str],
    options: ImportOptions,
) -> ReasoningTrace:
    simulation = expect_dict(raw, path)
    builder = TraceBuilder(FORMAT)
    builder.info.update(models)
    task_id, trial = simulation.get("task_id"), simulation.get("trial")
    prefix = f"{domain}:" if isinstance(domain, str) and domain else ""
    builder.source_id = f"{prefix}task-{task_id}:trial-{trial}"
    builder.info["task"] = task_id
    if trial is not None:
        builder.info["trial"] = trial
    if isinstance(simulation.get("termination_reason"), str):
        builder.info["termination_reason"] = simulation["termination_reason"]
    builder.note_time(parse_timestamp(simulation.get("start_time")))
    messages = expect_list(simulation.get("messages") or [], at(path, "messages"))
    _read_messages(builder, messages, at(path, "messages"))
    reward_info = simulation.get("reward_info")
    reward = mapping(reward_info).get("reward")
    if reward is not None:
        if isinstance(reward, bool) or not isinstance(reward, (int, float)):
            raise ConversionError(
                at(at(path, "reward_info"), "reward"),
                f"expected a number, got {json_type_name(reward)}",
            )
        builder.info["reward"] = reward
        builder.success = reward >= SUCCESS_THRESHOLD
    task = tasks.get(str(task_id))
    if task is not None or reward_info is not None:
        truth: dict[str, Any] = {}
        if task is not None:
            truth["task"] = dict(task)
        if isinstance(reward_info, Mapping):
            truth["reward_info"] = dict(reward_info)
        builder.ground_truth = truth
    scenario = mapping(mapping(mapping(task).get("user_scenario")).get("instructions"))
    default_objective(builder, scenario.get("reason_for_call"), FROM_TASK_DEFINITION)
    try:
        return builder.build(simulation, options)
    except ConversionError as exc:
        raise exc.under(path) from None


def _read_messages(builder: TraceBuilder, messages: list[Any], path: str) -> None:
    for index, raw in enumerate(messages):
        builder.at_origin(message=index)
        where = at(path, index)
        message = expect_dict(raw, where)
        role = expect_str(message.get("role"), at(where, "role"))
        text = content_text(message.get("content"))
        if role == "assistant":
            for block in list_of(mapping(message.get("raw_data")).get("thinking_blocks")):
                if isinstance(block, Mapping) and isinstance(block.get("thinking"), str):
                    builder.thought(block["thinking"])
            builder.thought(text)
            _read_calls(builder, message.get("tool_calls"), at(where, "tool_calls"))
        elif role == "tool":
            if message.get("requestor") == "user":
                continue
            call_id = message.get("id")
            builder.observation(
                text,
                call_id=call_id if isinstance(call_id, str) else None,
                failed=message.get("error") is True,
            )
        elif role == "user":
            for token in _STOP_TOKENS:
                text = text.replace(token, "")
            builder.user_message(text.strip())
        elif role != "system":
            raise ConversionError(
                at(where, "role"),
                f"expected one of 'assistant', 'user', 'tool', 'system' (got {role!r})",
            )


def _read_calls(builder: TraceBuilder, calls: Any, path: str) -> None:
    if not calls:
        return
    for index, raw in enumerate(expect_list(calls, path)):
        where = at(path, index)
        call = expect_dict(raw, where)
        call_id = call.get("id")
        builder.tool_call(
            expect_str(call.get("name"), at(where, "name")),
            parse_arguments(call.get("arguments"), at(where, "arguments")),
            call_id=call_id if isinstance(call_id, str) else None,
        )
