"""From recorded calls to one conversation, and through the importers to a ReasoningTrace.

Chat APIs are stateless: each request carries the conversation so far. The transcript is
therefore grown call by call: a request that continues the transcript adds only its new
messages, and each reply is appended as the assistant's turn; a request that does not
continue it (the agent started another conversation) is appended whole. The conversation is
then read by :func:`~knowledgepulse.importers.from_openai` or
:func:`~knowledgepulse.importers.from_anthropic`, the importers ``kp import`` uses, so a
captured run and an imported log of the same run give the same steps.

A model call that raised is not part of any conversation; it becomes a failed observation at
the point where it happened, so the step after it is the agent's ``error_recovery``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..._schema import ReasoningTrace
from ...importers import ImportOptions, from_anthropic, from_openai
from ._recording import Call, Provider, plain

__all__ = ["build_trace"]

_AGENT_ACTIONS = ("thought", "tool_call")


@dataclass
class _Transcript:
    provider: Provider
    messages: list[dict[str, Any]] = field(default_factory=list)
    # Where the current conversation starts in ``messages``.
    start: int = 0
    # (messages before the failure, "Type: message") per failed call.
    failures: list[tuple[int, str]] = field(default_factory=list)
    response_ids: list[str] = field(default_factory=list)
    model: str | None = None

    def add(self, call: Call) -> None:
        request = [_message(m) for m in call.request.get("messages") or []]
        current = self.messages[self.start :]
        if _continues(current, request):
            self.messages.extend(request[len(current) :])
        else:
            self.start = len(self.messages)
            self.messages.extend(request)
        if call.error is not None:
            self.failures.append((len(self.messages), _describe(call.error)))
        elif call.response is not None:
            self._reply(call.response)

    def _reply(self, response: Mapping[str, Any]) -> None:
        if isinstance(response.get("id"), str):
            self.response_ids.append(response["id"])
        if isinstance(response.get("model"), str):
            self.model = response["model"]
        if self.provider == "openai":
            choices = response.get("choices") or []
            if choices and isinstance(choices[0].get("message"), Mapping):
                self.messages.append(dict(choices[0]["message"]))
        else:
            self.messages.append({"role": "assistant", "content": response.get("content") or []})


def _message(message: Any) -> dict[str, Any]:
    data = plain(message)
    return data if isinstance(data, dict) else {"role": "user", "content": str(data)}


def _same(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """The same turn: equal, or equal in role, text and tool-call ids (an agent may rebuild
    the assistant's turn from the reply with fewer fields)."""
    if a == b:
        return True
    if a.get("role") != b.get("role"):
        return False
    ids_a = [c.get("id") for c in a.get("tool_calls") or []]
    ids_b = [c.get("id") for c in b.get("tool_calls") or []]
    return bool(a.get("content") == b.get("content") and ids_a == ids_b)


def _continues(current: list[dict[str, Any]], request: list[dict[str, Any]]) -> bool:
    return (
        bool(current)
        and len(request) >= len(current)
        and all(_same(a, b) for a, b in zip(current, request))
    )


def _describe(error: BaseException) -> str:
    message = str(error)
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def build_trace(
    calls: Sequence[Call],
    options: ImportOptions,
    *,
    agent_id: str | None = None,
    summary: str | None = None,
) -> ReasoningTrace:
    """The trace of a run's recorded ``calls``, with what the run stated (objective, domain,
    outcome in ``options``; the agent and the summary). Raises ``ValueError`` when there is no
    conversation to build from."""
    if not calls:
        raise ValueError("no model call was recorded (openai or anthropic client)")
    provider = calls[0].provider
    transcript = _Transcript(provider)
    for call in calls:
        if call.provider == provider:
            transcript.add(call)
    record: dict[str, Any] = {"messages": transcript.messages}
    if transcript.response_ids:
        record["id"] = transcript.response_ids[0]
    if transcript.model is not None:
        record["model"] = transcript.model
    importer = from_openai if provider == "openai" else from_anthropic
    (trace,) = importer(record, options)
    data = trace.to_dict()
    if transcript.failures:
        data["steps"] = _with_failures(
            data["steps"], transcript, importer, options, record.get("id")
        )
    kp_import = data["metadata"]["kp_import"]
    kp_import["captured"] = {
        "calls": sum(call.provider == provider for call in calls),
        "failed_calls": len(transcript.failures),
    }
    if transcript.response_ids:
        kp_import["response_id"] = transcript.response_ids[-1]
    others = sorted({call.provider for call in calls} - {provider})
    if others:
        kp_import["notes"] = [f"calls through {', '.join(others)} are not in this trace"]
    if agent_id:
        data["metadata"]["agent_id"] = agent_id
    if summary is not None:
        data["outcome"]["result_summary"] = summary
    return ReasoningTrace.model_validate(data)


def _with_failures(
    steps: list[dict[str, Any]],
    transcript: _Transcript,
    importer: Any,
    options: ImportOptions,
    record_id: str | None,
) -> list[dict[str, Any]]:
    """The steps with a failed observation where each failed call happened."""
    placed: list[tuple[int, str]] = []
    for position, message in transcript.failures:
        prefix = {"messages": transcript.messages[:position], "id": record_id or "prefix"}
        try:
            (before,) = importer(prefix, options)
            index = len(before.steps)
        except ValueError:  # nothing the agent did yet: no steps before it
            index = 0
        placed.append((index, message))
    result: list[dict[str, Any]] = []
    failures = iter(sorted(placed, key=lambda item: item[0]))
    pending = next(failures, None)
    recovering = False
    for index, step in enumerate([*steps, None]):
        while pending is not None and pending[0] == index:
            result.append(
                {
                    "type": "observation",
                    "content": f"model call failed: {pending[1]}",
                    "is_error": True,
                }
            )
            recovering = True
            pending = next(failures, None)
        if step is None:
            break
        if recovering and step["type"] in _AGENT_ACTIONS:
            step = {**step, "type": "error_recovery"}
            recovering = False
        elif step["type"] != "observation":
            recovering = False
        result.append(step)
    return [
        {"step_id": step_id, **{k: v for k, v in step.items() if k != "step_id"}}
        for step_id, step in enumerate(result)
    ]
