"""The failures people name most in agent runs, checked without a model: a write made before
the user was identified, a final answer stating numbers or ids that nothing in the run gave,
and a write whose arguments nobody gave (guessed).

"Given" means written, before the point in question, in the task's objective, a user turn or a
tool's output: the only places an agent can learn a fact from. Each check returns a
:class:`~._checks.Finding`, undetermined when the trace lacks what it needs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .._schema import ReasoningTrace
from ._checks import (
    DEFAULT_WRITE_TOOLS,
    Finding,
    state_changing_calls,
)
from ._facts import (
    DEFAULT_READ_ONLY_TOOLS,
    ToolCall,
    is_read_only,
    steps_text,
    tool_calls,
    tool_definitions,
)
from ._outcome import (
    final_answer,
)

__all__ = [
    "DEFAULT_IDENTIFY_TOOLS",
    "UngroundedValue",
    "grounded_answer",
    "grounded_arguments",
    "grounded_statements",
    "identified_before_write",
    "ungrounded_answer_values",
    "ungrounded_arguments",
    "ungrounded_statements",
    "unidentified_writes",
]

#: Tools that identify or verify the user, as name patterns: tau-bench's lookups of the user
#: (``get_user_details``, retail's ``find_user_id_by_email`` and ``find_user_id_by_name_zip``)
#: and the verbs support tool sets name it with. A policy that wants a sequence (find the id,
#: then read the profile) lists each step: ``identify_tools`` is the order the policy asks for.
DEFAULT_IDENTIFY_TOOLS: tuple[str, ...] = (
    "get_user_details",
    "find_user_id_*",
    "*authenticate*",
    "*verify_user*",
    "*verify_identity*",
    "*identify*",
    "lookup_user*",
    "get_customer*",
)

# An id: a token mixing letters and at least two digits (HAT136, M20IZO, #W2378156,
# credit_card_7815826), five characters or more; a name with one digit (python3) is a word. A number: digits with thousands separators and decimals.
_ID = re.compile(r"(?<![\w#-])#?(?=\w*\d\w*\d)(?=\w*[A-Za-z])\w{5,}(?![\w-])")
_NUMBER = re.compile(
    r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w-])|(?<![\w.,])\d+(?:\.\d+)?(?![\w-])"
)
# Dates and times are written in too many ways (May 17 / 2024-05-17 / 17/05) to compare as
# text: their parts are left out of the numbers checked.
_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_DATE_OR_TIME = re.compile(
    r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?\b|\b\d{1,2}:\d{2}(?::\d{2})?\b|"
    r"\b\d{1,2}/\d{1,2}(?:/\d{2,4})?\b|"
    rf"\b{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?\b|"
    rf"\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}(?:,?\s+\d{{4}})?\b|"
    r"\b(?:19|20)\d{2}\b",
    re.IGNORECASE,
)

# A source location (orchestrator.py:216, app/main.ts:12:5): where a log line or a traceback
# comes from, written by the runtime, not a figure an agent states.
# It is tried only where a path can start (after a character no path holds): tried inside a
# long token too, it took time quadratic in the token's length (200 KB of an inlined image:
# minutes).
_SOURCE_LOCATION = re.compile(r"(?<![\w./\\-])[\w./\\-]+\.[A-Za-z]\w{0,4}:\d+(?::\d+)?\b")


# A link (https://…, www.…): where a page is, not a figure stated. What a browsing agent
# reports of a page carries the page's address, with its ids and tracking tokens (Bing's
# ``&cvid=5315e9cc…``); a claim's ids and numbers are read from the text around it.
_LINK = re.compile(r"\b(?:[a-z][a-z0-9+.-]{0,30}://|www\.)[^\s<>\"'`()\[\]{}]+", re.IGNORECASE)


# Text that encodes rather than states: a JSON escape (``\u2019re`` read as an id), and a run
# of base64 (a page's token, an inlined image): 24 characters or more with ``+``, ``/`` or
# ``=`` and digits, capitals and small letters mixed, as random bytes encode (a path,
# ``site-packages/magentic/orchestrator``, has no such mix).
_ESCAPE = re.compile(r"\\u[0-9a-fA-F]{4}")
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/]{24,}={0,2}")


def _encoded(match: re.Match[str]) -> str:
    run = match.group(0)
    mixed = (
        any(c in "+/=" for c in run)
        and any(c.isdigit() for c in run)
        and any(c.isupper() for c in run)
        and any(c.islower() for c in run)
    )
    return " " if mixed else run


def _stated(text: str) -> str:
    """``text`` as a statement: its links and encoded runs left out (what an agent states,
    not where it read it). What was given keeps them: a value given only in a link was still
    given."""
    text = _LINK.sub(" ", _SOURCE_LOCATION.sub(" ", text))
    return _BASE64_RUN.sub(_encoded, _ESCAPE.sub(" ", text))


@dataclass(frozen=True)
class UngroundedValue:
    """A value the agent used that nothing before it gave: where (``step``; ``None`` for the
    outcome's summary), what (``value``) and, for an argument, its ``path`` in the call."""

    step: int | None
    value: str
    path: str = ""
    tool: str = ""

    def describe(self) -> str:
        if self.tool:
            return f"step {self.step} {self.tool} {self.path}={self.value}"
        where = f"step {self.step}" if self.step is not None else "the result summary"
        return f"{self.value!r} ({where})"


def _given_texts(trace: ReasoningTrace) -> list[str]:
    """What the agent was told: the objective, the user turns, the tools' outputs."""
    texts = [trace.task.objective]
    texts += [_observation_text(step) for step in trace.steps if step.type == "observation"]
    return texts


def _observation_text(step: Any) -> str:
    summary = getattr(step, "output_summary", None)
    content = step.content or ""
    return content if not isinstance(summary, str) else f"{content}\n{summary}"


def _figures(text: str) -> tuple[set[str], set[str]]:
    """(numbers, ids) written in ``text``, source locations, dates and times left out: the
    numbers as canonical strings (``1,194.00`` and ``1194`` are both ``1194``), the ids
    lower-cased without their ``#``. The text is cleaned once for both: it is the grounding
    checks' most repeated work."""
    cleaned = _DATE_OR_TIME.sub(" ", _SOURCE_LOCATION.sub(" ", text))
    numbers = {_canonical_number(match.group(0)) for match in _NUMBER.finditer(cleaned)}
    ids = {match.group(0).lstrip("#").lower() for match in _ID.finditer(cleaned)}
    return numbers, ids


def _canonical_number(text: str) -> str:
    value = text.replace(",", "")
    if "." in value:
        value = value.rstrip("0").rstrip(".")
    return value.lstrip("0") or "0"


class _Given:
    """What was given so far, grown text by text (:meth:`add`): its numbers (as canonical
    strings and as values), its ids, and its text lower-cased for substrings. Each text is
    read once, so a run of 10^4 steps is read in linear time."""

    def __init__(self) -> None:
        self.numbers: set[str] = set()
        self.values: set[float] = set()
        self.ids: set[str] = set()
        self._parts: list[str] = []
        self._text: str | None = ""

    @classmethod
    def of(cls, texts: Iterable[str]) -> _Given:
        given = cls()
        for text in texts:
            given.add(text)
        return given

    def add(self, text: str) -> None:
        numbers, ids = _figures(text)
        self.numbers.update(numbers)
        self.values.update(round(float(number), 6) for number in numbers)
        self.ids.update(ids)
        self._parts.append(text.lower())
        self._text = None

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = "\n".join(self._parts)
            self._parts = [self._text]
        return self._text

    def has_id(self, value: str) -> bool:
        plain = value.lstrip("#").lower()
        return plain in self.ids or plain in self.text

    def has_number(self, value: str, min_number: float) -> bool:
        """Whether ``value`` is small, given, or one step of arithmetic from what was given:
        the sum or difference of two given numbers, or one of them times 2 to 10 (a total, a
        saving, two bags at a price); a longer calculation is not followed."""
        canonical = _canonical_number(value)
        try:
            number = round(float(canonical), 6)
        except ValueError:
            return False
        if abs(number) < min_number or canonical in self.numbers:
            return True
        values = self.values
        if any(round(number / k, 6) in values for k in range(2, 11)):
            return True
        # One pass over the given values: number = a + b, a - b or b - a.
        return any(
            round(number - a, 6) in values
            or round(a - number, 6) in values
            or round(a + number, 6) in values
            for a in values
        )


# -- identified before the first write -----------------------------------------------------------


def unidentified_writes(
    trace: ReasoningTrace,
    *,
    identify_tools: Iterable[str] = DEFAULT_IDENTIFY_TOOLS,
    write_tools: Iterable[str] = DEFAULT_WRITE_TOOLS,
    read_only_tools: Iterable[str] = DEFAULT_READ_ONLY_TOOLS,
    in_order: bool = False,
) -> list[ToolCall]:
    """The state-changing calls made before a call to an ``identify_tools`` tool had
    succeeded. With ``in_order``, each pattern of ``identify_tools`` is a step of the policy
    (find the user's id, then read their profile), to be done in that order before a write."""
    patterns = tuple(identify_tools)
    done: list[int] = []  # the identification calls that succeeded, in order: pattern indexes
    writes = {
        call.step_id
        for call in state_changing_calls(
            trace, write_tools=write_tools, read_only_tools=read_only_tools
        )
    }
    unidentified = []
    for call in tool_calls(trace):
        if call.step_id in writes:
            if not _identified(done, len(patterns), in_order):
                unidentified.append(call)
            continue
        if call.failed or call.result_step is None:
            continue
        for index, pattern in enumerate(patterns):
            if is_read_only(call.name, (pattern,)):
                done.append(index)
                break
    return unidentified


def _identified(done: list[int], count: int, in_order: bool) -> bool:
    if not in_order:
        return bool(done)
    wanted = 0
    for index in done:
        if index == wanted:
            wanted += 1
    return wanted >= count


def identified_before_write(
    trace: ReasoningTrace,
    *,
    identify_tools: Iterable[str] = DEFAULT_IDENTIFY_TOOLS,
    write_tools: Iterable[str] = DEFAULT_WRITE_TOOLS,
    read_only_tools: Iterable[str] = DEFAULT_READ_ONLY_TOOLS,
    in_order: bool = False,
) -> Finding:
    """Every state-changing call comes after the user was identified (a call to one of
    ``identify_tools`` succeeded; with ``in_order``, one to each, in the order given):
    :func:`unidentified_writes`. Undetermined without state-changing calls, or when the run
    neither calls nor declares any identifying tool (nothing says its policy has one)."""
    patterns = tuple(identify_tools)
    writes = state_changing_calls(trace, write_tools=write_tools, read_only_tools=read_only_tools)
    if not writes:
        return Finding(None, "the trace has no state-changing call")
    declared = tool_definitions(trace) or {}
    names = {call.name for call in tool_calls(trace)} | set(declared)
    if not any(is_read_only(name, patterns) for name in names):
        return Finding(None, "the run neither calls nor declares a tool that identifies the user")
    left = unidentified_writes(
        trace,
        identify_tools=patterns,
        write_tools=write_tools,
        read_only_tools=read_only_tools,
        in_order=in_order,
    )
    steps = tuple(call.step_id for call in (left or writes))
    if not left:
        return Finding(
            True, f"the user was identified before each write ({steps_text(steps)})", steps
        )
    names_left = ", ".join(dict.fromkeys(call.name for call in left))
    return Finding(
        False, f"{names_left} at {steps_text(steps)} before the user was identified", steps
    )


# -- a final answer grounded in what the run was told --------------------------------------------


def ungrounded_answer_values(
    trace: ReasoningTrace, *, min_number: float = 10
) -> list[UngroundedValue]:
    """The numbers and ids of the final answer (:func:`~._outcome.final_answer`) that appear in
    no tool output, user turn or the objective. Numbers below ``min_number`` (counts, list
    items) and dates and times (written in too many ways to compare) are not checked."""
    answer, steps = final_answer(trace)
    if not answer:
        return []
    return _ungrounded_in(_stated(answer), steps, trace, min_number)


def _ungrounded_in(
    stated: str, steps: tuple[int, ...], trace: ReasoningTrace, min_number: float
) -> list[UngroundedValue]:
    """The values of ``stated`` (a final answer, its links left out) given by nothing the run
    was told (:func:`ungrounded_answer_values`)."""
    given = _Given.of(_given_texts(trace))
    step = steps[0] if steps else None
    missing: list[UngroundedValue] = []
    numbers, ids = _figures(stated)
    for value in sorted(ids):
        if not given.has_id(value):
            missing.append(UngroundedValue(step, value))
    ids_text = " ".join(ids)
    for value in sorted(numbers):
        if value in ids_text:  # a number inside an id (HAT136): the id was checked
            continue
        if not given.has_number(value, min_number):
            missing.append(UngroundedValue(step, value))
    return missing


def grounded_answer(trace: ReasoningTrace, *, min_number: float = 10) -> Finding:
    """Every number and id in the final answer appears in a tool output, a user turn or the
    objective (:func:`ungrounded_answer_values`); undetermined without a final answer or when
    it states no number or id."""
    answer, steps = final_answer(trace)
    if not answer:
        return Finding(None, "the run has no final answer")
    answer = _stated(answer)
    numbers, ids = _figures(answer)
    checked = ids | {v for v in numbers if abs(float(v)) >= min_number}
    if not checked:
        return Finding(None, "the final answer states no number or id")
    missing = _ungrounded_in(answer, steps, trace, min_number)  # the answer read once
    if not missing:
        return Finding(
            True,
            f"the {len(checked)} numbers and ids of the final answer were all given by a tool "
            "or the user",
            steps,
        )
    shown = ", ".join(value.describe() for value in missing[:5])
    more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
    return Finding(
        False,
        f"the final answer states {shown}{more}, given by no tool output or user turn",
        steps,
    )


# -- write arguments someone gave ----------------------------------------------------------------


def _scalars(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from _scalars(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from _scalars(item, f"{path}[{index}]")
    else:
        yield path, value


def ungrounded_arguments(
    trace: ReasoningTrace,
    *,
    write_tools: Iterable[str] = DEFAULT_WRITE_TOOLS,
    read_only_tools: Iterable[str] = DEFAULT_READ_ONLY_TOOLS,
    min_number: float = 10,
) -> list[UngroundedValue]:
    """The argument values of state-changing calls that appear in nothing the agent was told
    before the call (objective, user turns, tool outputs). Checked are the values that can be
    guessed: ids (letters and digits mixed, such as ``HAT136`` or ``credit_card_7815826``),
    e-mail addresses and numbers of at least ``min_number``; plain words (an ``economy``
    cabin, a ``change_of_plan`` reason) are choices from the tool's own vocabulary, and dates
    are written in too many ways to compare, so neither is checked."""
    writes = {
        call.step_id: call
        for call in state_changing_calls(
            trace, write_tools=write_tools, read_only_tools=read_only_tools
        )
    }
    missing: list[UngroundedValue] = []
    given = _Given.of([trace.task.objective])
    for step in trace.steps:
        # What was told grows step by step; a write is checked against what came before it.
        if step.type == "observation":
            given.add(_observation_text(step))
            continue
        call = writes.get(step.step_id)
        if call is None:
            continue
        for path, value in _scalars(dict(call.arguments), ""):
            shown = _guessable(value)
            if shown is None:
                continue
            kind, text = shown
            ok = given.has_number(text, min_number) if kind == "number" else given.has_id(text)
            if not ok:
                missing.append(UngroundedValue(call.step_id, text, path, call.name))
    return missing


def _guessable(value: Any) -> tuple[str, str] | None:
    """("number" | "id", text) for a value worth checking, else ``None``."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return "number", _canonical_number(repr(value))
    if not isinstance(value, str):
        return None
    text = value.strip()
    if "@" in text and " " not in text:
        return "id", text
    if _DATE_OR_TIME.fullmatch(text):
        return None
    if _ID.fullmatch(text):
        return "id", text
    return None


def grounded_arguments(
    trace: ReasoningTrace,
    *,
    write_tools: Iterable[str] = DEFAULT_WRITE_TOOLS,
    read_only_tools: Iterable[str] = DEFAULT_READ_ONLY_TOOLS,
    min_number: float = 10,
) -> Finding:
    """Every id, e-mail and number passed to a state-changing call was given before it by the
    user, a tool or the objective (:func:`ungrounded_arguments`); undetermined without
    state-changing calls or when they pass no such value."""
    writes = state_changing_calls(trace, write_tools=write_tools, read_only_tools=read_only_tools)
    if not writes:
        return Finding(None, "the trace has no state-changing call")
    checked = [
        (call, value)
        for call in writes
        for _, value in _scalars(dict(call.arguments), "")
        if _guessable(value) is not None
    ]
    if not checked:
        return Finding(None, "the state-changing calls pass no id, e-mail or number to check")
    missing = ungrounded_arguments(
        trace, write_tools=write_tools, read_only_tools=read_only_tools, min_number=min_number
    )
    if not missing:
        steps = tuple(dict.fromkeys(call.step_id for call in writes))
        return Finding(
            True,
            f"the {len(checked)} ids and numbers passed to the writes at {steps_text(steps)} "
            "were all given before",
            steps,
        )
    shown = "; ".join(value.describe() for value in missing[:3])
    more = f" (and {len(missing) - 3} more)" if len(missing) > 3 else ""
    steps = tuple(dict.fromkeys(value.step for value in missing if value.step is not None))
    return Finding(False, f"given by no one before the call: {shown}{more}", steps)


# -- every agent statement grounded in what came before -----------------------------------------


def ungrounded_statements(
    trace: ReasoningTrace, *, min_number: float = 10
) -> list[UngroundedValue]:
    """The ids and numbers (at least ``min_number``; dates and times aside) that an agent
    message (a thought, or an error recovery calling no tool) states and that nothing before it wrote: neither the objective, nor a
    user turn, a tool's output or an earlier message of any agent. In a run of several agents
    the first such message is where a figure entered the run from nowhere it shows."""
    given = _Given.of([trace.task.objective])
    missing: list[UngroundedValue] = []
    for step in trace.steps:
        text = step.content or ""
        if _is_message(step) and text:
            stated = _stated(text)
            numbers, ids = _figures(stated)
            ids_text = " ".join(ids)
            for value in sorted(ids):
                if not given.has_id(value):
                    missing.append(UngroundedValue(step.step_id, value))
            for value in sorted(numbers):
                if value not in ids_text and not given.has_number(value, min_number):
                    missing.append(UngroundedValue(step.step_id, value))
        given.add(text)
        if step.input:
            given.add(json.dumps(step.input, ensure_ascii=False, default=str))
    return missing


def _is_message(step: Any) -> bool:
    """An agent's message: a thought, or an error recovery that calls no tool (what an agent
    said after a failure)."""
    return step.type == "thought" or (step.type == "error_recovery" and step.tool is None)


def grounded_statements(trace: ReasoningTrace, *, min_number: float = 10) -> Finding:
    """Every id and number an agent message states was written before it, by the user, a tool
    or another message (:func:`ungrounded_statements`); undetermined without agent messages."""
    thoughts = [step for step in trace.steps if _is_message(step) and step.content]
    if not thoughts:
        return Finding(None, "the trace has no agent message")
    missing = ungrounded_statements(trace, min_number=min_number)
    if not missing:
        return Finding(
            True, f"the ids and numbers of the {len(thoughts)} agent messages were all given before"
        )
    steps = tuple(dict.fromkeys(value.step for value in missing if value.step is not None))
    first = [value for value in missing if value.step == steps[0]]
    shown = ", ".join(repr(value.value) for value in first[:4])
    more = f"; {len(steps) - 1} later messages too" if len(steps) > 1 else ""
    return Finding(
        False,
        f"step {steps[0]} states {shown}, written nowhere before it{more}",
        steps,
    )
