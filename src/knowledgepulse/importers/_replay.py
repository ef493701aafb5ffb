"""Replaying conversation snapshots (span and run formats) as steps, each item once."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from typing import Any

from ._binary import scrub_text
from ._builder import RawStep, TraceBuilder
from ._messages import Message, Part
from ._objective import preamble_kind
from ._text_calls import calls_in_text, emit_text_reply

__all__ = ["Replay"]


class Replay:
    """Turns LLM calls and tool executions into steps, each conversation item once.

    Each LLM call (a span, a run) logs the whole conversation so far as its input and the new
    assistant message as its output, so the same message shows up again and again. A part is
    emitted only the first time it is seen: tool calls and results by their call id, text by a
    count (an assistant that says "OK" twice in one conversation keeps both).

    An assistant text that writes calls in a known convention (:mod:`._text_calls`: BeeAI's
    ReAct log, ``<tool_call>`` blocks, ...) is those thoughts, calls and outputs.

    User messages are replayed the same way, each once: the first is the objective, later ones
    user observations (see :meth:`TraceBuilder.user_message`), so a user's answer mid-task is
    not lost. A user text that holds the objective (read from a trace's input first; a
    flattened prompt around it) or is kept beside it, and a harness preamble after the task,
    are not user turns.
    """

    def __init__(self, builder: TraceBuilder) -> None:
        self.builder = builder
        self._emitted: Counter[tuple[Any, ...]] = Counter()

    def llm_call(
        self,
        inputs: Iterable[Message],
        outputs: Iterable[Message],
        *,
        latency_ms: float | None = None,
        error: str | None = None,
    ) -> None:
        seen: Counter[tuple[Any, ...]] = Counter()
        first_thought: RawStep | None = None
        tagged = [(False, m) for m in inputs] + [(True, m) for m in outputs]
        for is_output, message in tagged:
            for part in message.parts:
                user_text = part.kind == "text" and message.role == "user"
                if (
                    not user_text
                    and message.role in ("user", "system")
                    and part.kind != "tool_result"
                ):
                    continue
                key = _fingerprint(part, message.role)
                seen[key] += 1
                if seen[key] <= self._emitted[key]:
                    continue
                if part.kind == "tool_result" and part.call_id:
                    call = self.builder.find_call(call_id=part.call_id)
                    if call is not None and call.answered:
                        continue
                self._emitted[key] += 1
                if user_text:
                    self._user_turn(part.text)
                    continue
                step = self._emit(part)
                if first_thought is None and is_output and step is not None:
                    first_thought = step if step.type == "thought" else None
        # The call's duration is the time it took to produce its (first) new thought.
        if first_thought is not None and latency_ms is not None:
            first_thought.latency_ms = latency_ms
        if error is not None:
            self.builder.observation(error, failed=True)

    def _user_turn(self, text: str | None) -> None:
        builder = self.builder
        if text is None or not text.strip():
            return
        if builder.objective is not None:
            clean = scrub_text(text).strip()
            # The task restated: the objective itself, text kept beside it, or, before the
            # agent did anything, a flattened prompt ("system: ...\nuser: <task>") or the call's
            # arguments around it (later, a short objective inside an answer is an answer).
            objective = builder.objective.strip()
            restated = objective in clean if not builder.steps else clean == objective
            if restated or clean in (c.strip() for c in builder.objective_context):
                return
            if preamble_kind(clean) is not None:
                builder.note_objective(text)
                return
        builder.user_message(text)

    def _emit(self, part: Part) -> RawStep | None:
        if part.kind == "text" and part.text:
            # Calls the agent wrote as text (a ReAct log, <tool_call> blocks) are calls.
            reply = calls_in_text(part.text)
            if reply is not None:
                return emit_text_reply(self.builder, reply)
        if part.kind in ("text", "reasoning"):
            return self.builder.thought(part.text)
        if part.kind == "tool_call":
            return self.builder.tool_call(
                part.name or "unknown", part.arguments or {}, call_id=part.call_id
            )
        return self.builder.observation(
            part.text, call_id=part.call_id, tool=part.name, failed=part.failed
        )

    def tool_run(
        self,
        name: str,
        *,
        call_id: str | None,
        arguments: dict[str, Any] | None,
        result: str | None,
        failed: bool,
        latency_ms: float | None,
    ) -> None:
        """A tool execution: the call (unless an LLM call already emitted it) and its result."""
        call = self.builder.find_call(call_id=call_id, name=name)
        if call is not None and call.answered:
            call = None
        if call is None:
            call = self.builder.tool_call(
                name, arguments or {}, call_id=call_id, latency_ms=latency_ms
            )
            self._emitted[
                _fingerprint(
                    Part("tool_call", call_id=call_id, name=name, arguments=arguments or {})
                )
            ] += 1
        elif call.latency_ms is None:
            call.latency_ms = latency_ms
        self.builder.observation(result, call_id=call_id, tool=name, failed=failed)
        self._emitted[_fingerprint(Part("tool_result", text=result or "", call_id=call_id))] += 1
        if call_id:
            # A later request may send the result back without its call id (Koog's tool
            # messages): the same text is the same result.
            self._emitted[_fingerprint(Part("tool_result", text=result or ""))] += 1


def _fingerprint(part: Part, role: str = "assistant") -> tuple[Any, ...]:
    if part.kind == "text" and role == "user":
        return ("user", part.text)
    if part.kind == "tool_call":
        if part.call_id:
            return ("call", part.call_id)
        return ("call", part.name, json.dumps(part.arguments, sort_keys=True, default=str))
    if part.kind == "tool_result":
        return ("result", part.call_id) if part.call_id else ("result", part.text)
    return (part.kind, part.text)
