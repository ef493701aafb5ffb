"""Tool calls an agent wrote in its message text, read the same way by every importer.

Agents that do not use a model's function calling write their calls as text, each in its own
convention; read as a thought, the call would be lost. :func:`calls_in_text` knows:

- a leading ``<think>…</think>`` block → thought (Harbor's export of reasoning models);
- Terminus (Harbor's agent) JSON replies ``{"analysis", "plan", "commands": [...],
  "task_complete"}`` → thoughts (``analysis``, ``plan``) and one call ``terminal`` per command
  (``{keystrokes, duration}``);
- ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks (Hermes/Qwen style,
  OpenHands' text serialisation of function calls in Harbor traces);
- ``<function=NAME><parameter=KEY>value</parameter>…</function>`` (OpenHands without function
  calling);
- ReAct text ``Function Name: X`` / ``Function Input: {...}`` / ``Function Output: ...``
  (BeeAI) and ``Action: X`` / ``Action Input: ...`` / ``Observation: ...``: the call, and the
  tool's output when the text holds it (the agent's log of its own step).

Text around the calls (``Thought: ...`` with its label removed) → thought. A text that holds
no call in any of these conventions is ``None``: its reader keeps it as a thought.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ._builder import RawStep, TraceBuilder
from ._values import parse_arguments

__all__ = ["TextCall", "TextReply", "calls_in_text", "emit_text_reply"]


@dataclass(frozen=True)
class TextCall:
    """One call written as text: the tool's name, its arguments, and its output when the text
    holds it too (a ReAct log)."""

    name: str
    arguments: dict[str, Any]
    output: str | None = None


@dataclass
class TextReply:
    """What a message's text holds: thoughts and calls, in the order written."""

    items: list[str | TextCall] = field(default_factory=list)

    @property
    def calls(self) -> list[TextCall]:
        return [item for item in self.items if isinstance(item, TextCall)]

    def thought(self, text: str | None, *, as_written: bool = False) -> None:
        """A thought; text between calls loses its surrounding blank space, a field's value
        (``as_written``) is kept as it is."""
        if text is not None and text.strip():
            self.items.append(text if as_written else text.strip())


_THINK = re.compile(r"^\s*<think>(.*?)</think>\s*", re.DOTALL)
_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
_FUNCTION = re.compile(r"<function=([^>\s]+)>(.*?)(?:</function>|\Z)", re.DOTALL)
_PARAMETER = re.compile(r"<parameter=([^>\s]+)>(.*?)</parameter>", re.DOTALL)
# ReAct labels: (call, input, output) as BeeAI and LangChain's ReAct agents write them.
_REACT_LABELS = (
    ("Function Name", "Function Input", "Function Output"),
    ("Action", "Action Input", "Observation"),
)
_TERMINUS_KEYS = frozenset({"analysis", "plan", "commands", "task_complete"})
_THOUGHT_LABEL = re.compile(r"^\s*Thought:\s*", re.IGNORECASE)


def calls_in_text(text: str) -> TextReply | None:
    """The thoughts and calls of an agent's message text, or ``None`` when it writes no call
    in a known convention (see the module's docstring)."""
    if not text or not text.strip():
        return None
    reply = TextReply()
    think = _THINK.match(text)
    rest = text
    if think is not None:
        reply.thought(think.group(1), as_written=True)
        rest = text[think.end() :]
    found = (
        _terminus(rest, reply)
        or _tool_call_blocks(rest, reply)
        or _function_blocks(rest, reply)
        or _react(rest, reply)
    )
    if not found:
        return None
    return reply


def _terminus(text: str, reply: TextReply) -> bool:
    start = text.find("{")
    if start == -1:
        return False
    try:
        value, end = json.JSONDecoder().raw_decode(text[start:])
    except json.JSONDecodeError:
        return False
    # Terminus's keys and no others: a model's structured answer that happens to hold an
    # "analysis" field is not a Terminus reply, and must not lose its other fields.
    if (
        not isinstance(value, Mapping)
        or not set(value) <= _TERMINUS_KEYS
        or not (isinstance(value.get("commands"), list) or isinstance(value.get("analysis"), str))
    ):
        return False
    reply.thought(text[:start])
    for key in ("analysis", "plan"):
        if isinstance(value.get(key), str):
            reply.thought(value[key], as_written=True)
    commands = value.get("commands")
    for command in commands if isinstance(commands, list) else []:
        if isinstance(command, Mapping):
            reply.items.append(TextCall("terminal", dict(command)))
    reply.thought(text[start + end :])
    return True


def _tool_call_blocks(text: str, reply: TextReply) -> bool:
    calls: list[tuple[int, int, TextCall]] = []
    for match in _TOOL_CALL.finditer(text):
        try:
            body = json.loads(match.group(1))
        except json.JSONDecodeError:
            continue
        if not isinstance(body, Mapping) or not isinstance(body.get("name"), str):
            continue
        raw = body.get("arguments", body.get("parameters", body.get("input")))
        call = TextCall(body["name"], parse_arguments(raw, "", lenient=True))
        calls.append((match.start(), match.end(), call))
    return _interleave(text, calls, reply)


def _function_blocks(text: str, reply: TextReply) -> bool:
    calls = []
    for match in _FUNCTION.finditer(text):
        arguments = {key: value.strip() for key, value in _PARAMETER.findall(match.group(2))}
        calls.append((match.start(), match.end(), TextCall(match.group(1), arguments)))
    return _interleave(text, calls, reply)


def _interleave(text: str, calls: list[tuple[int, int, TextCall]], reply: TextReply) -> bool:
    """The calls found at their spans of ``text``, the text between them as thoughts."""
    if not calls:
        return False
    position = 0
    for start, end, call in calls:
        reply.thought(_THOUGHT_LABEL.sub("", text[position:start]))
        reply.items.append(call)
        position = end
    reply.thought(text[position:])
    return True


def _react(text: str, reply: TextReply) -> bool:
    for name_label, input_label, output_label in _REACT_LABELS:
        name = re.search(rf"^{name_label}:[ \t]*(\S[^\n]*)$", text, re.MULTILINE)
        if name is None:
            continue
        after = text[name.end() :]
        given = re.match(
            rf"\s*{input_label}:[ \t]*(.*?)(?:\n{output_label}:[ \t]*(.*))?\Z", after, re.DOTALL
        )
        if given is None:
            continue
        raw_input = given.group(1).strip()
        output = given.group(2)
        reply.thought(_THOUGHT_LABEL.sub("", text[: name.start()]))
        reply.items.append(
            TextCall(
                name.group(1).strip(),
                parse_arguments(raw_input, "", lenient=True),
                output.strip() if output is not None else None,
            )
        )
        return True
    return False


def emit_text_reply(
    builder: TraceBuilder, reply: TextReply, *, source: str | None = None
) -> RawStep | None:
    """The reply's thoughts and calls as steps, in order (the first returned); an output the
    text holds (a ReAct log) → the call's observation."""
    first: RawStep | None = None
    for item in reply.items:
        if isinstance(item, str):
            step = builder.thought(item, source=source)
        else:
            step = builder.tool_call(item.name, item.arguments, source=source)
            if item.output is not None:
                step.answered = True
                builder.observation(item.output, tool=item.name, source=source)
        first = first or step
    return first
