"""Langfuse trace exports → ReasoningTraces, one per trace.

Input: the UI's download ``{"trace": {...}, "observations": [...]}``, a trace as
``GET /api/public/traces/{traceId}`` returns it (``id``, ``timestamp``, ``name``, ``input``,
``output``, ``observations`` as objects), a list of them, or ``{"data": [...]}``.
Observations are ordered by ``startTime`` and read by ``type``; generation messages may be
chat messages, OTel GenAI messages with ``parts``, Responses API objects and items, or Gemini
contents (Google ADK; see ``_messages`` below); LangChain tool definitions logged as ``role: "tool"`` are left out:

- ``GENERATION``: ``input`` (chat messages, ``{"messages": [...]}`` or text; a message
  logged as its pydantic repr, ``role='user' content=...``, as Agno does, is read back) and
  ``output`` (an assistant message, a list of them, a chat choice or ``gen_ai.choice`` event,
  a whole ``chat.completion``, a LangChain message such as an ``AIMessageChunk``, or text)
  → thoughts, tool calls and tool results, each once; ``model`` → ``kp_import.model``;
  ``level: ERROR`` → a failed observation of ``statusMessage``; a generation right under a
  generation that logged the call is the same call seen twice (Agno) and is not read again;
- ``TOOL``, ``RETRIEVER``, and a ``SPAN`` whose span names its tool (``gen_ai.tool.name``:
  Koog's ``tool.<name>`` spans; OpenInference ``tool.name`` with span kind ``TOOL``: Agno's):
  tool_call ``name`` with ``input`` (unless a generation already
  holds the call), then an observation of ``output``; ``level: ERROR`` → failed, with
  ``statusMessage`` as the text when there is no output. Observations ingested over OTel are
  named after their span (``execute_tool <tool>``, Pydantic AI's ``running tool: <tool>``):
  the tool is the span's ``gen_ai.tool.name`` attribute (kept in ``metadata.attributes``),
  else the name without that prefix, and ``gen_ai.tool.call.id`` ties it to its call;
- ``AGENT`` (or any observation whose span set ``gen_ai.agent.name``): the agent nearest
  above the first generation or tool (the agent that ran, not an outer workflow span such as
  "Agent workflow"), else the first one → ``agent_id``: its ``gen_ai.agent.name``, else its
  name without ``invoke_agent`` / ``agent_run [...]`` around it;
- ``EVENT``, ``GUARDRAIL``: an observation of ``output`` when there is one (``ERROR`` →
  failed);
- ``SPAN``, ``CHAIN`` and the rest: a failed observation of ``statusMessage`` when they are
  ``ERROR`` and no observation under them already is; otherwise nothing.

The trace's ``input`` (the UI's download holds it, like ``output``, as a JSON string literal
of the span's text: decoded; the ``@observe`` decorator's record of a function's arguments,
``{"args": [...], "kwargs": {...}}``, is not a task and only a fallback) → objective (else the first user message of a generation, else
the trace's ``name``, defaulted), ``output`` → result summary, ``timestamp`` →
``created_at``, ``id`` → source id; an ``ERROR`` on an ``AGENT`` or top-level observation →
success false.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any, Literal

from knowledgepulse._schema import ReasoningTrace
from knowledgepulse.io._reader import json_type_name

from ._binary import redact_binary
from ._builder import TraceBuilder
from ._genai_parts import semconv_messages
from ._messages import (
    Message,
    Part,
    is_chat_message,
    is_response_object,
    is_tool_definition,
    message_from_chat,
    responses_messages,
    text_from_value,
)
from ._objective import FROM_TRACE_INPUT, FROM_TRACE_NAME
from ._options import ImportOptions, resolve_options
from ._replay import Replay
from ._tool_definitions import tools_of_spans
from ._values import (
    ConversionError,
    at,
    expect_dict,
    expect_list,
    parse_arguments,
    parse_timestamp,
    stringify,
)
from .openai import is_responses_items

__all__ = ["from_langfuse"]

_TOOLS = frozenset({"TOOL", "RETRIEVER"})
_RESULTS = frozenset({"EVENT", "GUARDRAIL"})


def from_langfuse(
    record: Any, options: ImportOptions | None = None, **overrides: Any
) -> list[ReasoningTrace]:
    """The traces of a Langfuse export: one trace, a list of them, or ``{"data": [...]}``.

    ``options`` (and keyword ``overrides`` of its fields) replace source values in every
    trace. Raises :class:`ConversionError` naming the offending field's path.
    """
    options = resolve_options(options, overrides)
    return [_convert(trace, path, options) for trace, path in _traces(record, "")]


def _traces(record: Any, path: str) -> Iterator[tuple[dict[str, Any], str]]:
    if _is_ui_download(record):
        # The UI's download: the trace and its observations side by side.
        trace = dict(record["trace"])
        trace["observations"] = record["observations"]
        yield trace, path
    elif isinstance(record, Mapping) and "observations" not in record and "data" in record:
        yield from _traces(record["data"], at(path, "data"))
    elif isinstance(record, Mapping):
        yield dict(record), path
    else:
        for index, item in enumerate(expect_list(record, path)):
            yield expect_dict(item, at(path, index)), at(path, index)


def _is_ui_download(record: Any) -> bool:
    return (
        isinstance(record, Mapping)
        and isinstance(record.get("trace"), Mapping)
        and isinstance(record.get("observations"), list)
    )


def _convert(trace: dict[str, Any], path: str, options: ImportOptions) -> ReasoningTrace:
    try:
        return _convert_trace(trace, path, options)
    except ConversionError as exc:
        if exc.path:
            raise
        raise ConversionError(path or f"trace {trace.get('id')}", exc.reason) from None


def _convert_trace(trace: dict[str, Any], path: str, options: ImportOptions) -> ReasoningTrace:
    builder = TraceBuilder("langfuse")
    if isinstance(trace.get("id"), str) and trace["id"]:
        builder.source_id = trace["id"]
    builder.note_time(parse_timestamp(trace.get("timestamp")))
    trace_input = _unquoted(trace.get("input"))
    arguments = _call_arguments_text(trace_input)
    if arguments is not None:
        # Langfuse's @observe decorator records the decorated function's arguments as the trace
        # input: not a statement of the task. The first user message of a generation is the
        # objective; the arguments are only the fallback.
        builder.default_objective(arguments, FROM_TRACE_INPUT)
    else:
        builder.user_message(
            _gemini_text(trace_input, output=False) or text_from_value(redact_binary(trace_input)),
            origin=FROM_TRACE_INPUT,
        )
    if isinstance(trace.get("name"), str):
        builder.default_objective(trace["name"], FROM_TRACE_NAME)
    trace_output = _unquoted(trace.get("output"))
    summary = _gemini_text(trace_output, output=True) or text_from_value(
        redact_binary(trace_output), output=True
    )
    if summary is not None:
        builder.result_summary = summary
    if isinstance(trace.get("sessionId"), str):
        builder.info["session_id"] = trace["sessionId"]

    observations = _observations(trace, path)
    by_id = {str(o.get("id")): o for o in observations if o.get("id")}
    failed_under: set[str] = set()
    for observation in observations:
        if _is_error(observation):
            parent = observation.get("parentObservationId")
            while isinstance(parent, str) and parent in by_id and parent not in failed_under:
                failed_under.add(parent)
                parent = by_id[parent].get("parentObservationId")

    builder.agent_id = _agent_name(observations, by_id)
    replay = Replay(builder)
    builder.keep_tools(tools_of_spans(_span_attributes(o) for o in observations))
    for observation in observations:
        if not _inner_generation(observation, by_id):
            _step(replay, observation, failed_under)
    return builder.build(trace, options)


def _inner_generation(
    observation: Mapping[str, Any], by_id: Mapping[str, Mapping[str, Any]]
) -> bool:
    """Whether a generation is one model call seen twice: a ``GENERATION`` right under a
    ``GENERATION`` that logged the call (Agno's ``OpenAIChat.invoke`` holds the OpenAI
    instrumentation's ``chat gpt-4o-mini``, whose input is the prompt flattened to text and
    whose first output is empty). The outer one is read; the inner adds nothing but noise."""
    if str(observation.get("type", "")).upper() != "GENERATION":
        return False
    parent = by_id.get(str(observation.get("parentObservationId")))
    return (
        parent is not None
        and str(parent.get("type", "")).upper() == "GENERATION"
        and parent.get("output") not in (None, "", [], {})
        and not _is_error(observation)
    )


def _agent_name(
    observations: list[dict[str, Any]], by_id: Mapping[str, Mapping[str, Any]]
) -> str | None:
    """The name of the agent that ran: the nearest agent above the first generation or tool,
    else the first agent (see :func:`_named_agent` for what an agent is and its name).

    Instrumentations open an outer ``AGENT`` span for the workflow (OpenInference's OpenAI
    Agents instrumentation names it after the workflow, "Agent workflow") with the agent that
    did the work inside it; the outer one's name is not the agent's.
    """
    for observation in observations:
        if str(observation.get("type", "")).upper() not in ("GENERATION", *_TOOLS):
            continue
        parent = observation.get("parentObservationId")
        seen: set[str] = set()
        while isinstance(parent, str) and parent in by_id and parent not in seen:
            seen.add(parent)
            name = _named_agent(by_id[parent])
            if name is not None:
                return name
            parent = by_id[parent].get("parentObservationId")
        break
    return next((n for n in map(_named_agent, observations) if n is not None), None)


# Span names that wrap the agent's name: "invoke_agent <name>" (GenAI semantic conventions,
# Microsoft Agent Framework), "agent_run [<name>]" (Google ADK).
_AGENT_SPAN_NAME = re.compile(r"^(?:invoke_agent\s+(?P<a>.+)|agent_run \[(?P<b>.+)\])$")


def _named_agent(observation: Mapping[str, Any]) -> str | None:
    """The agent's name when ``observation`` is an agent: an ``AGENT`` observation or one
    whose span set ``gen_ai.agent.name`` (Pydantic AI's agent runs are ``SPAN``s). The name
    is that attribute, else the span name without its wrapper (:data:`_AGENT_SPAN_NAME`)."""
    attribute = _span_attributes(observation).get("gen_ai.agent.name")
    if isinstance(attribute, str) and attribute.strip():
        return attribute.strip()
    name = observation.get("name")
    if str(observation.get("type", "")).upper() != "AGENT" or not isinstance(name, str):
        return None
    match = _AGENT_SPAN_NAME.match(name.strip())
    if match is not None:
        return (match.group("a") or match.group("b")).strip()
    return name.strip() or None


def _unquoted(value: Any) -> Any:
    """``value`` without the JSON string encodings around it.

    The UI's download holds the trace's ``input`` and ``output`` as JSON text of the stored
    text, so a span's message list arrives as a JSON string literal whose value is the list's
    JSON text (seen in real downloads of Microsoft Agent Framework and LangGraph traces). Each
    level that is a JSON string literal is decoded; text that is not one stays as it is.
    """
    for _ in range(4):  # the downloads seen hold two levels; a bound keeps it cheap
        if not isinstance(value, str):
            return value
        stripped = value.strip()
        if len(stripped) < 2 or stripped[0] != '"' or stripped[-1] != '"':
            return value
        try:
            decoded = json.loads(stripped)
        except json.JSONDecodeError:
            return value
        if not isinstance(decoded, str):
            return value
        value = decoded
    return value


def _call_arguments_text(value: Any) -> str | None:
    """The text of a trace input that is a function's arguments as ``@observe`` records them
    (``{"args": [...], "kwargs": {...}}``), or ``None`` for any other input."""
    parsed = value
    if isinstance(value, str) and value.strip().startswith("{"):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            return None
    if (
        isinstance(parsed, Mapping)
        and set(parsed) == {"args", "kwargs"}
        and isinstance(parsed["args"], list)
        and isinstance(parsed["kwargs"], Mapping)
    ):
        return value if isinstance(value, str) else json.dumps(parsed, ensure_ascii=False)
    return None


# Span names of tool observations ingested over OTel: "execute_tool <tool>" (GenAI semantic
# conventions), "running tool: <tool>" (Pydantic AI).
_TOOL_SPAN_PREFIXES = ("execute_tool", "running tool:")


def _tool_name(name: str | None) -> str | None:
    if not name:
        return None
    for prefix in _TOOL_SPAN_PREFIXES:
        if name.startswith(prefix) and name[len(prefix) :].strip():
            return name[len(prefix) :].strip()
    return name


def _span_attributes(observation: Mapping[str, Any]) -> Mapping[str, Any]:
    """The span attributes Langfuse keeps in an OTel-ingested observation's metadata."""
    metadata = observation.get("metadata")
    if isinstance(metadata, str) and metadata.strip().startswith("{"):
        try:
            metadata = json.loads(metadata)
        except json.JSONDecodeError:
            return {}
    if isinstance(metadata, Mapping) and isinstance(metadata.get("attributes"), Mapping):
        attributes: Mapping[str, Any] = metadata["attributes"]
        return attributes
    return {}


def _observations(trace: Mapping[str, Any], path: str) -> list[dict[str, Any]]:
    obs_path = at(path, "observations")
    items = []
    for index, raw in enumerate(expect_list(trace.get("observations", []), obs_path)):
        if not isinstance(raw, Mapping):
            raise ConversionError(
                at(obs_path, index),
                f"expected an observation object, got {json_type_name(raw)} (export the trace "
                "with GET /api/public/traces/{traceId}, which includes the observations)",
            )
        start = parse_timestamp(raw.get("startTime"))
        items.append((start.timestamp() if start else 0.0, index, dict(raw)))
    items.sort(key=lambda item: (item[0], item[1]))
    return [observation for _, _, observation in items]


def _is_error(observation: Mapping[str, Any]) -> bool:
    return observation.get("level") == "ERROR"


def _step(replay: Replay, observation: dict[str, Any], failed_under: set[str]) -> None:
    builder = replay.builder
    builder.at_origin(span_id=observation.get("id"))  # its span's id, from OpenTelemetry
    kind = str(observation.get("type", "SPAN")).upper()
    name = observation.get("name") if isinstance(observation.get("name"), str) else None
    failed = _is_error(observation)
    message = observation.get("statusMessage")
    message = message if isinstance(message, str) and message else None
    latency = _latency_ms(observation)
    output = redact_binary(observation.get("output"))
    builder.note_time(parse_timestamp(observation.get("startTime")))
    if failed and (kind == "AGENT" or not observation.get("parentObservationId")):
        builder.success = False

    if kind == "GENERATION":
        inputs = _messages(redact_binary(observation.get("input")), "user")
        outputs = _messages(output, "assistant")
        error = (message or "error") if failed else None
        replay.llm_call(inputs, outputs, latency_ms=latency, error=error)
        if isinstance(observation.get("model"), str) and observation["model"]:
            builder.info.setdefault("model", observation["model"])
    elif kind in _TOOLS or _names_a_tool(observation):
        attributes = _span_attributes(observation)
        if output in (None, {}, []):
            output = _tool_result_attribute(attributes)
        text = stringify(output) if output is not None else (message if failed else None)
        tool_name = attributes.get("gen_ai.tool.name") or attributes.get("tool.name")
        if not isinstance(tool_name, str) or not tool_name:
            tool_name = _tool_name(name) or kind.lower()
        call_id = attributes.get("gen_ai.tool.call.id")
        if not isinstance(call_id, str) or builder.find_call(call_id=call_id) is None:
            # An id the model's call does not carry (Google ADK makes its own) cannot tie the
            # result to it; the tool's name does.
            call_id = None
        replay.tool_run(
            tool_name,
            call_id=call_id,
            arguments=parse_arguments(redact_binary(observation.get("input")), "", lenient=True),
            result=text,
            failed=failed,
            latency_ms=latency,
        )
    elif kind in _RESULTS and output is not None:
        builder.observation(stringify(output), failed=failed)
    elif failed and str(observation.get("id")) not in failed_under:
        builder.observation(message or stringify(output) or "error", failed=True)


def _names_a_tool(observation: Mapping[str, Any]) -> bool:
    """Whether a ``SPAN`` is a tool's run: its span names the tool (``gen_ai.tool.name``, as
    Koog's ``tool.<name>`` spans do; OpenInference's ``tool.name``, as Agno's do). A span of
    tool events that names no tool (BeeAI's ``tool.*.start``/``finish``) is not."""
    attributes = _span_attributes(observation)
    name = attributes.get("gen_ai.tool.name") or attributes.get("tool.name")
    return (
        str(observation.get("type", "")).upper() == "SPAN"
        and isinstance(name, str)
        and bool(name)
        and str(attributes.get("openinference.span.kind", "TOOL")).upper() == "TOOL"
    )


def _messages(value: Any, role: str) -> list[Message]:
    """Chat messages in a generation's input or output; bare text has ``role``.

    Read: chat messages (OpenAI, LangChain), OTel GenAI messages with ``parts`` (Microsoft
    Agent Framework, Pydantic AI), a Responses API response or its items (OpenAI Agents via
    OpenInference); LangChain's tool definitions logged as ``role: "tool"`` are not messages.
    """
    value = _unwrapped(value)
    gemini = _gemini_messages(value)
    if gemini is not None:
        return gemini
    if _is_completion(value):
        # A whole ``chat.completion`` object (Agno's generation output): its first choice.
        value = value["choices"][0]
    if _is_choice(value):
        # A chat choice, or the GenAI `gen_ai.choice` event Pydantic AI 0.2 logs as the output:
        # {"index": 0, "message": {"role": "assistant", ...}, "event.name": "gen_ai.choice"}.
        value = value["message"]
    if is_response_object(value):
        return responses_messages(value["output"])
    if isinstance(value, str):
        value = [{"role": role, "content": value}]
    elif isinstance(value, Mapping):
        chat = "role" in value or is_chat_message(value)
        value = [value if chat else {"role": role, "content": stringify(value)}]
    if not isinstance(value, list):
        return []
    if is_responses_items(value):
        return responses_messages(value)
    return [message for item in value for message in _item_messages(item)]


def _unwrapped(value: Any) -> Any:
    """``value`` with JSON text that holds a response or a list parsed, and a
    ``{"messages": [...]}`` wrapper taken off."""
    if isinstance(value, str) and value.strip()[:1] in ("{", "["):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            parsed = None
        if is_response_object(parsed) or isinstance(parsed, list):
            value = parsed
    if isinstance(value, Mapping) and isinstance(value.get("messages"), list):
        value = value["messages"]
    return value


def _item_messages(item: Any) -> list[Message]:
    """The messages of one list item: none for a tool definition, OTel GenAI ``parts``
    messages, else a chat message."""
    if is_tool_definition(item):
        return []
    if isinstance(item, Mapping) and isinstance(item.get("parts"), list):
        try:
            return semconv_messages([item], "")
        except ConversionError:
            return []
    message = message_from_chat(item)
    return [] if message is None else [message]


def _is_completion(value: Any) -> bool:
    choices = value.get("choices") if isinstance(value, Mapping) else None
    return (
        isinstance(choices, list)
        and bool(choices)
        and isinstance(choices[0], Mapping)
        and isinstance(choices[0].get("message"), Mapping)
    )


def _is_choice(value: Any) -> bool:
    return (
        isinstance(value, Mapping)
        and "role" not in value
        and isinstance(value.get("message"), Mapping)
        and "role" in value["message"]
        and ("index" in value or value.get("event.name") == "gen_ai.choice")
    )


def _gemini_contents(value: Any) -> list[Mapping[str, Any]] | None:
    """The Gemini contents in a generation's input or output, or ``None`` when it holds none.

    Read: a request (``{"model", "config", "contents": [...]}``, or ``contents`` as one text,
    as google-genai takes it), a response with
    ``candidates``, an ADK ``LlmResponse`` or event (``{"content": {...}, ...}``), one content
    (``{"role", "parts"}`` whose parts have no ``type``) or a list of contents.
    """
    items: list[Any]
    if isinstance(value, Mapping):
        if isinstance(value.get("contents"), list):
            items = value["contents"]
        elif isinstance(value.get("contents"), str) and "model" in value:
            # google-genai's ``generate_content(model=..., contents="text")``: one user text.
            items = [{"role": "user", "parts": [{"text": value["contents"]}]}]
        elif isinstance(value.get("candidates"), list) and value["candidates"]:
            first = value["candidates"][0]
            items = [first.get("content")] if isinstance(first, Mapping) else []
        elif isinstance(value.get("content"), Mapping) and "role" not in value:
            items = [value["content"]]
        else:
            items = [value]
    elif isinstance(value, list):
        items = value
    else:
        return None
    if items and all(_is_gemini_content(item) for item in items):
        return items
    return None


def _is_gemini_content(item: Any) -> bool:
    return (
        isinstance(item, Mapping)
        and isinstance(item.get("parts"), list)
        and bool(item["parts"])
        and all(isinstance(p, Mapping) and "type" not in p for p in item["parts"])
        and set(item) <= {"role", "parts"}
    )


def _gemini_messages(value: Any) -> list[Message] | None:
    """Gemini contents (Google ADK, the Gen AI SDK) as messages; ``None`` when not Gemini."""
    contents = _gemini_contents(value)
    if contents is None:
        return None
    messages = []
    for content in contents:
        role = "assistant" if content.get("role") == "model" else str(content.get("role") or "user")
        parts: list[Part] = []
        for raw in content["parts"]:
            call = raw.get("function_call", raw.get("functionCall"))
            response = raw.get("function_response", raw.get("functionResponse"))
            if isinstance(call, Mapping):
                args = call.get("args")
                call_id = call.get("id")
                parts.append(
                    Part(
                        "tool_call",
                        name=str(call.get("name") or "unknown"),
                        arguments=dict(args) if isinstance(args, Mapping) else {},
                        call_id=call_id if isinstance(call_id, str) else None,
                    )
                )
            elif isinstance(response, Mapping):
                result = response.get("response")
                if isinstance(result, Mapping) and len(result) == 1:
                    # {"output": ...} or {"result": ...} alone is the text, as in `gemini`.
                    ((key, only),) = result.items()
                    result = only if key in ("output", "result") else result
                response_id = response.get("id")
                parts.append(
                    Part(
                        "tool_result",
                        text=stringify(redact_binary(result)),
                        name=str(response.get("name") or "") or None,
                        call_id=response_id if isinstance(response_id, str) else None,
                    )
                )
            elif isinstance(raw.get("text"), str):
                kind: Literal["text", "reasoning"] = (
                    "reasoning" if raw.get("thought") is True else "text"
                )
                parts.append(Part(kind, text=raw["text"]))
        messages.append(Message(role, parts))
    return messages


def _gemini_text(value: Any, *, output: bool) -> str | None:
    """The user's text in a Google ADK runner input (``new_message``), or the model's text in
    a Gemini response or ADK event; ``None`` for any other value."""
    if isinstance(value, str) and value.strip().startswith("{"):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return None
    if not output and isinstance(value, Mapping) and isinstance(value.get("new_message"), Mapping):
        value = value["new_message"]
    messages = _gemini_messages(value)
    if not messages:
        return None
    role = "assistant" if output else "user"
    texts = [m.text for m in messages if m.role == role and m.text]
    if not texts:
        return None
    return texts[-1] if output else texts[0]


def _tool_result_attribute(attributes: Mapping[str, Any]) -> Any:
    """A tool span's result kept in its attributes: ``gen_ai.tool.call.result``, else
    OpenInference's ``output.value`` (of an ADK function response, its ``response``)."""
    result = attributes.get("gen_ai.tool.call.result")
    if result not in (None, "", {}, []):
        return result
    value = attributes.get("output.value")
    if isinstance(value, Mapping) and "response" in value and "name" in value:
        return value["response"]
    return value if value not in ("", {}, []) else None


def _latency_ms(observation: Mapping[str, Any]) -> float | None:
    start = parse_timestamp(observation.get("startTime"))
    end = parse_timestamp(observation.get("endTime"))
    if start is None or end is None or end < start:
        return None
    return round((end - start).total_seconds() * 1000, 3)
