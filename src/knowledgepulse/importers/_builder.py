"""The step builder every importer feeds, and the rules it applies the same way for each format.

An importer walks its source and feeds a :class:`TraceBuilder` three kinds of event (an agent
thought, a tool call, a tool result) plus the user's messages. The builder then applies:

- **user turns**: the first user message is the task objective, chosen by the rules of
  :mod:`._objective` (a known template's task extracted, harness preambles skipped and kept in
  ``kp_import.objective_context``; where it came from in ``kp_import.objective_from``); every
  later one is an ``observation`` step marked ``"source": "user"`` (what the agent was told
  mid-task is part of its work, as a tool result is). User text is never judged an error by
  its wording; only a harness's parse-error feedback sent as a user turn (Terminus-2's
  "Previous response had parsing errors:", :func:`~._failures.failure_marker`) fails.
  Without any user message the objective is defaulted (trace input, agent, span or tool names,
  listed in ``kp_import.defaulted``): only a trace without steps is refused.
- **payloads**: base64 and opaque payloads in any text or input are replaced by placeholders
  (:mod:`._binary`), so no step carries kilobytes of noise into the embedded text.

- **error_recovery**: no source format marks it, so it is derived here, once. An observation
  *fails* when the source flags it (``is_error``, span status ERROR, a run ``error``, ...), when
  its text carries a harness's failure marker (:func:`~._failures.failure_marker`: a parse
  error, a non-zero ``<returncode>``) or when its text looks like an error
  (:func:`looks_like_error`). The first agent action (thought or tool
  call) after a failed observation becomes an ``error_recovery`` step; a tool call keeps its tool
  and input.
- **options and defaults**: the caller's :class:`ImportOptions` override the source (listed in
  ``metadata.kp_import.overridden``); values neither gives are defaulted and listed in
  ``metadata.kp_import.defaulted``, never invented silently.
- **ids**: ``kp:trace:<format>:<source id>``, or a stable hash of the record when it has no id.
- **reproducible**: nothing depends on the clock; a trace without a source timestamp gets
  :data:`DEFAULT_CREATED_AT` (the Unix epoch, listed as defaulted). The same input gives the
  same trace, byte for byte.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from knowledgepulse._schema import ReasoningTrace, TraceValidationError

from ._binary import scrub_text, scrub_value
from ._error_text import looks_like_error
from ._failures import failure_marker
from ._objective import (
    FROM_AGENT_NAME,
    FROM_FORMAT,
    FROM_OPTION,
    FROM_TOOL_NAMES,
    FROM_USER_MESSAGE,
    TEMPLATE_PREFIX,
    preamble_kind,
    task_from_template,
)
from ._options import (
    DEFAULT_CONFIDENCE_KNOWN,
    DEFAULT_CONFIDENCE_UNKNOWN,
    DEFAULT_CREATED_AT,
    DEFAULT_PRIVACY_LEVEL,
    DEFAULT_TASK_DOMAIN,
    DEFAULT_VISIBILITY,
    ImportOptions,
)
from ._values import ConversionError, stable_hash

__all__ = ["SUMMARY_THRESHOLD", "USER_SOURCE", "RawStep", "TraceBuilder", "derive_step_types"]

# Observations longer than this also get a short ``output_summary``; ``content`` stays whole.
SUMMARY_THRESHOLD = 1000
SUMMARY_LENGTH = 200
# The ``source`` of an observation step that is a later user message.
USER_SOURCE = "user"
# The longest id a step's origin keeps (ids are far shorter: uuids, span ids, event numbers).
ORIGIN_ID_LENGTH = 256

RawType = Literal["thought", "tool_call", "observation"]


@dataclass
class RawStep:
    """A step before numbering and the error_recovery rule."""

    type: RawType
    content: str | None = None
    tool: str | None = None
    mcp_server: str | None = None
    input: dict[str, Any] | None = None
    failed: bool = False
    latency_ms: float | None = None
    call_id: str | None = None
    answered: bool = False
    # Who the step came from, when not the agent or a tool (USER_SOURCE, a subagent's name).
    source: str | None = None
    # Where in the source log it came from (see TraceBuilder.at_origin).
    origin: dict[str, Any] | None = None


def derive_step_types(steps: Sequence[RawStep]) -> list[str]:
    """The final type of each step: the first agent action after a failed observation is
    ``error_recovery``; everything else keeps its type."""
    types: list[str] = []
    after_failure = False
    for step in steps:
        if step.type == "observation":
            after_failure = after_failure or step.failed
            types.append("observation")
        elif after_failure:
            types.append("error_recovery")
            after_failure = False
        else:
            types.append(step.type)
    return types


class TraceBuilder:
    """Collects one trace's steps and facts, then builds the :class:`ReasoningTrace`."""

    def __init__(self, format_name: str) -> None:
        self.format = format_name
        self.steps: list[RawStep] = []
        self.objective: str | None = None
        # Where the objective came from (see ._objective), and user text kept beside it.
        self.objective_from: str | None = None
        self.objective_context: list[str] = []
        # The best objective when no user message comes: (text, where from); marked defaulted.
        self.fallback: tuple[str, str] | None = None
        # An importer set ``objective`` itself from a stand-in (a session id): list it defaulted.
        self.objective_defaulted = False
        # Why a trace without steps has none, when the source says (a crashed run).
        self.no_steps_reason: str | None = None
        self.result_summary: str | None = None
        self.source_id: str | None = None
        self.created_at: datetime | None = None
        # Success as the source states it (a reward, an error status); None when it is silent.
        self.success: bool | None = None
        self.agent_id: str | None = None
        self.info: dict[str, Any] = {}
        # What the right outcome was, when the source says (tau-bench's ``info``).
        self.ground_truth: dict[str, Any] | None = None
        self._calls: dict[str, RawStep] = {}
        # Where the steps added next come from in the source (at_origin).
        self.origin: dict[str, Any] | None = None

    def at_origin(self, **where: Any) -> None:
        """Where the steps added from now on come from in the source, in the source's own
        coordinates (``message=3``, ``line=17``, ``event_id=12``, ``span_id="ab12"``,
        ``sample="s1", epoch=1, message=4``): written as each step's ``origin``, so a verdict
        about step 22 can be found in the user's file. Only whole numbers and non-empty text
        are coordinates (``None`` and any other value are left out), and text is cut at
        :data:`ORIGIN_ID_LENGTH` characters: every step of a run carries its origin, and a
        hostile log's megabyte id must not be copied onto each."""
        kept: dict[str, Any] = {}
        for key, value in where.items():
            if isinstance(value, str) and value:
                cut = len(value) > ORIGIN_ID_LENGTH
                kept[key] = value[:ORIGIN_ID_LENGTH] + "…" if cut else value
            elif isinstance(value, int) and not isinstance(value, bool):
                kept[key] = value
        self.origin = kept or None

    def keep_tools(self, tools: list[dict[str, Any]]) -> None:
        """The tools the source declared (``kp_import.tool_definitions``), if it declared any:
        ``known_tools`` and ``valid_arguments`` decide on them."""
        if tools:
            self.info["tool_definitions"] = tools

    def _new(self, step: RawStep) -> RawStep:
        step.origin = self.origin
        self.steps.append(step)
        return step

    # -- events -------------------------------------------------------------------------------

    def user_message(self, text: str | None, *, origin: str = FROM_USER_MESSAGE) -> RawStep | None:
        """A user message: the first non-blank one that is not a harness preamble is the task
        objective (see :meth:`note_objective`), each later one an observation step marked
        ``"source": "user"`` (returned). Blank text is skipped. ``origin`` says where the text
        came from when it is an explicit task field or input (see :mod:`._objective`)."""
        if text is None or not text.strip():
            return None
        text = scrub_text(text)
        if self.objective is None:
            self._offer_objective(text, origin)
            return None
        # A harness answering an unparsable response through the user turn: a failure.
        failed = failure_marker(text) == "parse_error"
        return self._new(RawStep("observation", content=text, source=USER_SOURCE, failed=failed))

    def note_objective(self, text: str | None, *, origin: str = FROM_USER_MESSAGE) -> None:
        """A user message seen only for the objective: the first non-blank one that is not a
        harness preamble is it (a known template's task is extracted from it)."""
        if not text or not text.strip():
            return
        text = scrub_text(text)
        if self.objective is None:
            self._offer_objective(text, origin)
        elif preamble_kind(text) is not None and text not in self.objective_context:
            self.objective_context.append(text)

    def _offer_objective(self, text: str, origin: str) -> None:
        extracted = task_from_template(text)
        if extracted is not None:
            task, template = extracted
            self.objective, self.objective_from = task, TEMPLATE_PREFIX + template
            self.objective_context.append(text)
        elif preamble_kind(text) is not None:
            # Kept, not lost; it becomes the objective only if nothing better comes.
            if text not in self.objective_context:
                self.objective_context.append(text)
        else:
            self.objective, self.objective_from = text, origin

    def set_objective(self, text: str | None, origin: str) -> None:
        """An explicit task field (a root run's input): the objective whatever came before,
        a known template's task extracted from it. Blank text is ignored."""
        if not text or not text.strip():
            return
        text = scrub_text(text)
        if self.objective is not None and self.objective_from == FROM_USER_MESSAGE:
            self.objective_context.append(self.objective)
        extracted = task_from_template(text)
        if extracted is not None:
            self.objective, self.objective_from = extracted[0], TEMPLATE_PREFIX + extracted[1]
            self.objective_context.append(text)
        else:
            self.objective, self.objective_from = text, origin

    def default_objective(self, text: str | None, origin: str) -> None:
        """The best objective available when the source has no user message (a trace input,
        an agent or span name): used, marked defaulted, only if no user message comes. The
        first one offered wins."""
        if self.fallback is None and text and text.strip():
            self.fallback = (scrub_text(text.strip()), origin)

    def thought(
        self, text: str | None, *, latency_ms: float | None = None, source: str | None = None
    ) -> RawStep | None:
        """An agent thought; blank text is skipped, not an empty thought."""
        if text is None or not text.strip():
            return None
        return self._new(
            RawStep("thought", content=scrub_text(text), latency_ms=latency_ms, source=source)
        )

    def tool_call(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        call_id: str | None = None,
        mcp_server: str | None = None,
        latency_ms: float | None = None,
        source: str | None = None,
    ) -> RawStep:
        step = RawStep(
            "tool_call",
            tool=name,
            mcp_server=mcp_server,
            input=scrub_value(arguments),
            call_id=call_id,
            latency_ms=latency_ms,
            source=source,
        )
        self._new(step)
        if call_id:
            # Ids can be reused within one conversation (tau-bench does); the latest call wins.
            self._calls[call_id] = step
        return step

    def observation(
        self,
        content: str | None,
        *,
        call_id: str | None = None,
        tool: str | None = None,
        failed: bool = False,
        latency_ms: float | None = None,
        source: str | None = None,
    ) -> RawStep:
        """A tool result. Its tool is the call it answers (by ``call_id``, else by name)."""
        call = self.find_call(call_id=call_id, name=tool)
        if call is not None:
            call.answered = True
            tool = call.tool
            mcp_server = call.mcp_server
        else:
            mcp_server = None
        content = scrub_text(content) if content is not None else None
        step = RawStep(
            "observation",
            content=content,
            tool=tool or None,
            mcp_server=mcp_server,
            failed=failed or failure_marker(content) is not None or looks_like_error(content),
            call_id=call_id,
            latency_ms=latency_ms,
            source=source,
        )
        return self._new(step)

    def find_call(self, *, call_id: str | None = None, name: str | None = None) -> RawStep | None:
        """The tool call a result answers: by id, else the earliest unanswered call of ``name``."""
        if call_id:
            return self._calls.get(call_id)
        if name:
            for step in self.steps:
                if step.type == "tool_call" and step.tool == name and not step.answered:
                    return step
        return None

    def note_time(self, moment: datetime | None) -> None:
        """A source timestamp; the earliest one is the trace's ``created_at``."""
        if moment is not None and (self.created_at is None or moment < self.created_at):
            self.created_at = moment

    # -- the trace ----------------------------------------------------------------------------

    def build(self, record: Any, options: ImportOptions) -> ReasoningTrace:
        """The trace, with ``options`` and defaults applied and listed in ``metadata.kp_import``."""
        if not self.steps:
            reason = "no agent steps (thoughts, tool calls or tool results) found"
            raise ConversionError("", self.no_steps_reason or reason)
        # Each default taken is listed in ``defaulted``, in this order: objective, success,
        # confidence, task_domain, created_at.
        defaulted: list[str] = []
        objective, objective_from = self._objective(options, defaulted)
        source_id = self.source_id or stable_hash(record)
        success, confidence = self._success_and_confidence(options, defaulted)
        task_domain = options.task_domain
        if task_domain is None:
            task_domain = DEFAULT_TASK_DOMAIN
            defaulted.append("task_domain")
        metadata: dict[str, Any] = {
            "created_at": self._created_at(options, defaulted),
            "task_domain": task_domain,
            "success": success,
            "visibility": options.visibility or DEFAULT_VISIBILITY,
            "privacy_level": options.privacy_level or DEFAULT_PRIVACY_LEVEL,
            "kp_import": self._kp_import(options, source_id, defaulted, objective, objective_from),
        }
        if self.agent_id:
            metadata["agent_id"] = self.agent_id
        if self.ground_truth is not None:
            metadata["ground_truth"] = self.ground_truth
        data: dict[str, Any] = {
            "@context": "https://openknowledgepulse.org/schema/v1",
            "@type": "ReasoningTrace",
            "id": self._trace_id(options, source_id),
            "metadata": metadata,
            "task": {"objective": objective},
            "steps": self._step_dicts(),
            "outcome": {"result_summary": self._result_summary(), "confidence": confidence},
        }
        try:
            return ReasoningTrace.model_validate(data)
        except TraceValidationError as exc:
            raise ConversionError.from_validation(exc) from None

    def _trace_id(self, options: ImportOptions, source_id: str) -> str:
        """``options.trace_id`` (prefixed unless it is a ``kp:trace:`` id), else from the source."""
        if not options.trace_id:
            return f"kp:trace:{self.format}:{source_id}"
        if options.trace_id.startswith("kp:trace:"):
            return options.trace_id
        return f"kp:trace:{self.format}:{options.trace_id}"

    def _success_and_confidence(
        self, options: ImportOptions, defaulted: list[str]
    ) -> tuple[bool, float]:
        """Success (the option, else the source, else True) and the confidence: the option,
        else a default that is lower when success was not known."""
        if options.success is not None:
            success, success_known = options.success, True
        elif self.success is not None:
            success, success_known = self.success, True
        else:
            success, success_known = True, False
            defaulted.append("success")
        if options.confidence is not None:
            return success, options.confidence
        defaulted.append("confidence")
        default = DEFAULT_CONFIDENCE_KNOWN if success_known else DEFAULT_CONFIDENCE_UNKNOWN
        return success, default

    def _created_at(self, options: ImportOptions, defaulted: list[str]) -> Any:
        """The option, else the earliest source timestamp, else the default (ISO 8601 text
        where it is a datetime)."""
        created: Any = options.created_at or self.created_at
        if created is None:
            created = DEFAULT_CREATED_AT
            defaulted.append("created_at")
        if isinstance(created, datetime):
            created = created.isoformat()
        return created

    def _result_summary(self) -> str:
        """The source's summary, else the last thought, else empty."""
        if self.result_summary is not None:
            return self.result_summary
        thoughts = [s.content for s in self.steps if s.type == "thought" and s.content]
        return thoughts[-1] if thoughts else ""

    def _kp_import(
        self,
        options: ImportOptions,
        source_id: str,
        defaulted: list[str],
        objective: str,
        objective_from: str,
    ) -> dict[str, Any]:
        """``metadata.kp_import``: where the trace came from and what was defaulted or given."""
        kp_import: dict[str, Any] = {
            "format": self.format,
            "source_id": source_id,
            "defaulted": defaulted,
            "objective_from": objective_from,
        }
        context = [t for t in dict.fromkeys(self.objective_context) if t != objective]
        if context:
            kp_import["objective_context"] = context
        if options.given:
            kp_import["overridden"] = options.given
        kp_import.update(self.info)
        return kp_import

    def _objective(self, options: ImportOptions, defaulted: list[str]) -> tuple[str, str]:
        """The objective and where it came from; a defaulted one is listed in ``defaulted``."""
        if options.objective:
            return options.objective, FROM_OPTION
        if self.objective is not None and self.objective.strip():
            if self.objective_defaulted:
                defaulted.append("objective")
            return self.objective, self.objective_from or FROM_USER_MESSAGE
        if self.objective_context:
            # Only preambles came: the first is still what the user sent.
            return self.objective_context[0], FROM_USER_MESSAGE
        defaulted.append("objective")
        if self.fallback is not None:
            return self.fallback
        if self.agent_id:
            return self.agent_id, FROM_AGENT_NAME
        tools = list(dict.fromkeys(s.tool for s in self.steps if s.type == "tool_call" and s.tool))
        if tools:
            return "tools: " + ", ".join(tools), FROM_TOOL_NAMES
        return f"{self.format} run", FROM_FORMAT

    def _step_dicts(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for index, (step, kind) in enumerate(
            zip(self.steps, derive_step_types(self.steps), strict=True)
        ):
            item: dict[str, Any] = {"step_id": index, "type": kind}
            if step.content is not None:
                item["content"] = step.content
            if step.tool:
                tool: dict[str, Any] = {"name": step.tool}
                if step.mcp_server:
                    tool["mcp_server"] = step.mcp_server
                item["tool"] = tool
            if step.input is not None:
                item["input"] = step.input
            if (
                step.type == "observation"
                and step.content is not None
                and len(step.content) > SUMMARY_THRESHOLD
            ):
                item["output_summary"] = step.content[:SUMMARY_LENGTH].rstrip() + "…"
            if step.latency_ms is not None:
                item["latency_ms"] = step.latency_ms
            if step.type == "observation" and step.failed:
                item["is_error"] = True
            if step.source is not None:
                item["source"] = step.source
            if step.origin:
                item["origin"] = dict(step.origin)
            out.append(item)
        return out
