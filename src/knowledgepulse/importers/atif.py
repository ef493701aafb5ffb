"""Harbor ATIF trajectories (Agent Trajectory Interchange Format, up to v1.7) → ReasoningTrace.

Per step, in list order:

- ``source: user`` — the first one's ``message`` → ``task.objective``; later ones → observation
  steps marked ``"source": "user"``;
- ``source: system`` — the system prompt is not a step; its ``observation`` results (system
  operations, ATIF ≥ 1.2) → observation;
- ``source: agent`` — ``reasoning_content`` → thought, then ``message`` → thought (blank skipped),
  then each ``tool_calls[]{tool_call_id, function_name, arguments}`` → tool_call; a step
  without ``tool_calls`` whose message writes calls as text (OpenHands' ``<function=...>`` and
  ``<tool_call>`` blocks, Terminus-2's JSON replies; :mod:`._text_calls`, as
  ``harbor-traces`` reads them) → those thoughts and tool_calls, a result without
  ``source_call_id`` answering the call before it (a reply the harness answered with a parse
  error ran nothing and stays a thought); then each
  ``observation.results[]{source_call_id, content}`` → observation (tool from the call whose
  ``tool_call_id`` matches; a result with ``subagent_trajectory_ref`` and no content reads
  ``subagent <id>``; a non-standard ``is_error: true`` marks it failed). Content parts (ATIF
  ≥ 1.6) keep their text; an image part reads as a placeholder naming it
  (``[image/png: images/step_3.png]``).

Subagents (ATIF 1.7 ``subagent_trajectories``, each with a ``trajectory_id``): an embedded
subagent's steps come right after the observation whose ``subagent_trajectory_ref`` names its
``trajectory_id`` (embedded subagents no result names come at the end), each marked
``"source": "subagent:<trajectory_id>"``; the subagent's user messages (its task, given by the
parent) are observations so marked.

Root: ``session_id`` (else ``trajectory_id``) → id; ``agent.name`` → ``metadata.agent_id``;
``agent.model_name`` → ``kp_import.model``; ``agent.tool_definitions`` (ATIF ≥ 1.5) →
``kp_import.tool_definitions``; the earliest step ``timestamp`` → ``created_at``. ATIF has no
success field: pass ``success=``, read a Harbor job directory (a trial's reward, see
:mod:`._harbor`), or it is defaulted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from knowledgepulse._schema import ReasoningTrace

from ._binary import scrub_value
from ._builder import TraceBuilder
from ._detect import detect_format
from ._failures import failure_marker
from ._options import ImportOptions, resolve_options
from ._text_calls import calls_in_text, emit_text_reply
from ._values import (
    ConversionError,
    at,
    content_text,
    expect_dict,
    expect_list,
    expect_str,
    parse_arguments,
    parse_timestamp,
    stringify,
)

__all__ = ["atif_trace", "from_atif"]

_SUBAGENT_PREFIX = "subagent:"


def from_atif(
    record: Any, options: ImportOptions | None = None, **overrides: Any
) -> list[ReasoningTrace]:
    """The traces of an ATIF record: a trajectory (``trajectory.json``) or a list of them.

    ``options`` (and keyword ``overrides`` of its fields) replace source values in every trace.
    Raises :class:`ConversionError` naming the offending field's path.
    """
    options = resolve_options(options, overrides)
    if isinstance(record, (list, tuple)):
        return [_trajectory(item, at("", index), options) for index, item in enumerate(record)]
    return [_trajectory(record, "", options)]


def _trajectory(trajectory: Any, path: str, options: ImportOptions) -> ReasoningTrace:
    if not is_atif(trajectory):
        raise ConversionError(path, not_atif(trajectory))
    return atif_trace(expect_dict(trajectory, path), path, options, TraceBuilder("atif"))


def is_atif(record: Any) -> bool:
    """Whether ``record`` is an ATIF trajectory: an object with an ATIF ``schema_version``,
    or with the ``steps``, ``agent`` and ``session_id`` every trajectory has."""
    if not isinstance(record, Mapping):
        return False
    version = record.get("schema_version")
    if isinstance(version, str) and version.upper().startswith("ATIF"):
        return True  # an ATIF record, broken or not: its own problems are named
    return (
        isinstance(record.get("steps"), list)
        and "agent" in record
        and ("session_id" in record or "trajectory_id" in record)
    )


def not_atif(record: Any) -> str:
    """Why ``record`` is refused as ATIF, naming the format it looks like when one fits."""
    message = (
        "not an ATIF trajectory (expected an object with 'schema_version' \"ATIF-v1.x\", "
        "'agent' and 'steps')"
    )
    detected = detect_format(record)
    if detected is not None and detected != "atif":
        message += f"; it looks like {detected}: use --from {detected}"
    return message


def atif_trace(
    record: dict[str, Any], path: str, options: ImportOptions, builder: TraceBuilder
) -> ReasoningTrace:
    """The trace of one trajectory object at ``path``, built with ``builder`` (which may hold
    facts from around the trajectory, such as a Harbor trial's reward)."""
    for key in ("session_id", "trajectory_id"):
        if isinstance(record.get(key), str) and record[key]:
            builder.source_id = record[key]
            break
    agent = record.get("agent")
    if agent is not None:
        agent = expect_dict(agent, at(path, "agent"))
        if isinstance(agent.get("name"), str) and agent["name"]:
            builder.agent_id = agent["name"]
        if isinstance(agent.get("model_name"), str):
            builder.info["model"] = agent["model_name"]
        definitions = agent.get("tool_definitions")
        if definitions:
            builder.info["tool_definitions"] = scrub_value(
                expect_list(definitions, at(at(path, "agent"), "tool_definitions"))
            )
    _Reader(builder, _subagents(record, path)).steps(record, path, None)
    try:
        return builder.build(record, options)
    except ConversionError as exc:
        raise exc.under(path) from None


def _subagents(record: Mapping[str, Any], path: str) -> dict[str, tuple[dict[str, Any], str]]:
    """The embedded subagent trajectories by ``trajectory_id``, nested ones included."""
    found: dict[str, tuple[dict[str, Any], str]] = {}
    raw = record.get("subagent_trajectories")
    where = at(path, "subagent_trajectories")
    for index, item in enumerate(expect_list(raw, where) if raw else []):
        sub_path = at(where, index)
        sub = expect_dict(item, sub_path)
        ident = expect_str(sub.get("trajectory_id"), at(sub_path, "trajectory_id"))
        found[ident] = (sub, sub_path)
        found.update(_subagents(sub, sub_path))
    return found


class _Reader:
    """Reads the steps of a trajectory, inlining embedded subagents where they are named."""

    def __init__(
        self, builder: TraceBuilder, subagents: dict[str, tuple[dict[str, Any], str]]
    ) -> None:
        self.builder = builder
        self.subagents = subagents
        self.read: set[str] = set()

    def steps(self, record: Mapping[str, Any], path: str, source: str | None) -> None:
        steps_path = at(path, "steps")
        subagent = source.removeprefix(_SUBAGENT_PREFIX) if source else None
        for index, raw in enumerate(expect_list(record.get("steps"), steps_path)):
            step = expect_dict(raw, at(steps_path, index))
            # The step's own step_id where it has one (ATIF numbers its steps from 1).
            ident = step.get("step_id")
            if isinstance(ident, (int, str)) and not isinstance(ident, bool):
                self.builder.at_origin(subagent=subagent, step_id=ident)
            else:
                self.builder.at_origin(subagent=subagent, steps=index)
            self._step(step, at(steps_path, index), source)
        if source is None:
            for ident, (sub, sub_path) in self.subagents.items():
                if ident not in self.read:
                    self._subagent(ident, sub, sub_path)

    def _subagent(self, ident: str, sub: Mapping[str, Any], path: str) -> None:
        self.read.add(ident)
        resumed = self.builder.origin  # the parent's step, for what follows the subagent's
        self.steps(sub, path, _SUBAGENT_PREFIX + ident)
        self.builder.origin = resumed

    def _step(self, step: Mapping[str, Any], where: str, source: str | None) -> None:
        builder = self.builder
        origin = step.get("source")
        if origin not in ("system", "user", "agent"):
            raise ConversionError(
                at(where, "source"), f"expected one of 'system', 'user', 'agent' (got {origin!r})"
            )
        builder.note_time(parse_timestamp(step.get("timestamp")))
        message = _message_text(step.get("message"), at(where, "message"))
        if origin == "user":
            if source is None:
                builder.user_message(message)
            elif message.strip():
                # A subagent's task, given by its parent: what it was told, not the user.
                builder.observation(message, source=source)
            return
        if origin == "agent":
            reasoning = step.get("reasoning_content")
            if reasoning is not None:
                builder.thought(
                    expect_str(reasoning, at(where, "reasoning_content"), allow_empty=True),
                    source=source,
                )
            calls = step.get("tool_calls")
            # A reply the harness could not parse ran nothing: its text stays a thought.
            refused = _parse_error_answers(step.get("observation"))
            written = None if calls or refused else calls_in_text(message)
            if written is not None:
                # Calls the agent wrote as text (OpenHands without function calling,
                # Terminus-2's JSON replies): read as harbor-traces reads them.
                emit_text_reply(builder, written, source=source)
            else:
                builder.thought(message, source=source)
            calls_path = at(where, "tool_calls")
            for index, raw in enumerate(expect_list(calls, calls_path) if calls else []):
                call_path = at(calls_path, index)
                call = expect_dict(raw, call_path)
                call_id = call.get("tool_call_id")
                builder.tool_call(
                    expect_str(call.get("function_name"), at(call_path, "function_name")),
                    parse_arguments(call.get("arguments"), at(call_path, "arguments")),
                    call_id=call_id if isinstance(call_id, str) else None,
                    source=source,
                )
        observation = step.get("observation")
        if observation is not None:
            self._observation(observation, at(where, "observation"), source)

    def _open_call(self) -> str | None:
        """The tool of the last call if no result answered it yet: a result without a
        ``source_call_id`` answers the call written as text before it."""
        for step in reversed(self.builder.steps):
            if step.type == "tool_call":
                return None if step.answered or step.call_id else step.tool
        return None

    def _observation(self, observation: Any, obs_path: str, source: str | None) -> None:
        results = expect_dict(observation, obs_path).get("results")
        for index, raw in enumerate(expect_list(results, at(obs_path, "results"))):
            result_path = at(at(obs_path, "results"), index)
            result = expect_dict(raw, result_path)
            content = result.get("content")
            refs: list[Any] = []
            if result.get("subagent_trajectory_ref"):
                refs = expect_list(
                    result["subagent_trajectory_ref"], at(result_path, "subagent_trajectory_ref")
                )
            if content is None and refs:
                names = [_ref_name(r) for r in refs if isinstance(r, Mapping)]
                text = "subagent " + ", ".join(names)
            else:
                text = _message_text(content, at(result_path, "content"), result=True)
            call_id = result.get("source_call_id")
            call_id = call_id if isinstance(call_id, str) else None
            self.builder.observation(
                text,
                call_id=call_id,
                tool=None if call_id or refs else self._open_call(),
                failed=result.get("is_error") is True,
                source=source,
            )
            for ref in refs:
                ident = ref.get("trajectory_id") if isinstance(ref, Mapping) else None
                if isinstance(ident, str) and ident in self.subagents and ident not in self.read:
                    self._subagent(ident, *self.subagents[ident])


def _parse_error_answers(observation: Any) -> bool:
    """Whether a step's observation is the harness saying it could not parse the reply."""
    results = observation.get("results") if isinstance(observation, Mapping) else None
    return any(
        isinstance(result, Mapping)
        and isinstance(result.get("content"), str)
        and failure_marker(result["content"]) == "parse_error"
        for result in (results if isinstance(results, list) else [])
    )


def _ref_name(ref: Mapping[str, Any]) -> str:
    for key in ("trajectory_id", "session_id", "trajectory_path"):
        if ref.get(key):
            return str(ref[key])
    return "?"


def _message_text(value: Any, path: str, *, result: bool = False) -> str:
    """A message or result: text, or (ATIF ≥ 1.6) a list of content parts whose text is kept
    (in a ``result``, an image part reads as a placeholder naming it); an object is JSON."""
    if isinstance(value, Mapping):
        return stringify(value)
    return content_text(value, path, result=result)
