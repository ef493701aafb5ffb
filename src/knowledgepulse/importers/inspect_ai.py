"""Inspect AI evaluation logs (``.json``, and ``.eval`` zip archives) → ReasoningTrace.

One trace per sample and epoch (id ``<task_id>:sample-<id>:epoch-<n>``).

- objective: the sample's ``input`` (text, or the text of its last user message when it is a
  message list; ``kp_import.objective_from = "task_field"``), else its first user message.
  An input that only instructs gives way to the question after it (:func:`_question_after`):
  when a solver sends a user message before the model's first answer, and the input is a
  harness preamble or asks no question while that message does, the message is the objective
  (``user_message``) and the input is kept in ``kp_import.objective_context``;
- ``messages``: ``system`` messages are dropped; ``user`` messages after the input →
  observations marked ``"source": "user"``; ``assistant`` text and ``reasoning`` content →
  thought, ``tool_calls[]{id, function, arguments}`` → tool_call; ``tool`` messages →
  observation matched by ``tool_call_id``, failed when they carry an ``error``
  (``{type, message}``; the message is the content when the tool returned none);
- success: the first scorer's value (``C`` correct → success, ``I``/``N``/``P`` → failure,
  a number ≥ 1 or ``true`` → success); every score → ``kp_import.scores``; a sample
  ``error`` → failure, its message a failed observation (a crashed sample is still a run);
- ground truth: the sample's ``target`` → ``metadata.ground_truth.target``, its multiple-choice
  ``choices`` → ``metadata.ground_truth.choices`` (with the sample's ``metadata``, when it has
  any); the choices are also added to the objective as the ``multiple_choice`` solver shows
  them (``A) …``), without which an answer ``ANSWER: C`` names nothing;
- a log that did not run to its end (``status`` ``cancelled`` or ``error``):
  ``kp_import.log_status`` (and ``log_error``) on each of its samples' traces; a sample never
  scored → success false; a log without samples is rejected saying it was cancelled;
- ``eval.task``, ``eval.model`` → ``kp_import.task``, ``kp_import.model``; time: the sample's
  ``started_at``, else the log's ``eval.created``;
- dropped: ``events`` (the same conversation, event by event), ``output`` (the last assistant
  message again), ``store``, usage and the log's ``plan``, ``results`` and ``stats``.

An ``.eval`` archive holds ``header.json`` (the log without samples) and one
``samples/<id>_epoch_<n>.json`` per sample: :func:`read_eval_archive` reads them.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from typing import Any

from knowledgepulse._schema import ReasoningTrace

from ._builder import TraceBuilder
from ._entries import default_objective
from ._harness_text import mapping
from ._objective import FROM_SOURCE_ID, FROM_TASK_FIELD, FROM_USER_MESSAGE, preamble_kind
from ._options import ImportOptions, resolve_options
from ._tool_definitions import declared_tools, first_of_each_name
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

__all__ = [
    "EvalArchiveSample",
    "from_inspect",
    "inspect_runs",
    "inspect_sample_trace",
    "is_inspect_log",
    "read_eval_archive",
]

FORMAT = "inspect"
_CORRECT, _INCORRECT = "C", "I"
# Log statuses of an eval that did not run to its end.
_UNFINISHED = frozenset({"cancelled", "error"})


def is_inspect_log(record: Any) -> bool:
    """Whether a record is an Inspect AI log (or an archive's header with its samples)."""
    return (
        isinstance(record, Mapping)
        and isinstance(record.get("eval"), Mapping)
        and ("samples" in record or "results" in record or "plan" in record)
        and "version" in record
    )


def from_inspect(
    record: Any, options: ImportOptions | None = None, **overrides: Any
) -> list[ReasoningTrace]:
    """The traces of an Inspect AI log: one per sample and epoch. Raises
    :class:`ConversionError` listing every broken sample (``samples[3].messages[2]...``)."""
    options = resolve_options(options, overrides)
    traces: list[ReasoningTrace] = []
    errors: list[ConversionError] = []
    for _, convert_run in inspect_runs(record, options):
        try:
            traces.append(convert_run())
        except ConversionError as exc:
            errors.append(exc)
    if errors:
        raise ConversionError.merged(errors)
    return traces


def inspect_runs(
    record: Any, options: ImportOptions
) -> list[tuple[Any, Callable[[], ReasoningTrace]]]:
    """Each sample (and epoch) of a log with its converter. Raises :class:`ConversionError` when the
    record is no log or holds no samples."""
    log = expect_dict(record, "")
    if not isinstance(log.get("eval"), Mapping):
        raise ConversionError("eval", "expected an Inspect AI log (no 'eval' object)")
    samples = expect_list(log.get("samples") or [], "samples")
    if not samples:
        status = log.get("status")
        why = (
            f"the eval was {'cancelled' if status == 'cancelled' else 'stopped'}: status {status!r}"
            if isinstance(status, str) and status in _UNFINISHED
            else "a log written without them has only its header"
        )
        raise ConversionError("samples", f"the log holds no samples ({why})")
    return [
        (sample, partial(inspect_sample_trace, log, sample, at("samples", index), options))
        for index, sample in enumerate(samples)
    ]


def inspect_sample_trace(
    log: Mapping[str, Any], raw: Any, path: str, options: ImportOptions
) -> ReasoningTrace:
    """The trace of one sample of ``log`` (the log's ``eval`` gives its task and model)."""
    sample = expect_dict(raw, path)
    spec = mapping(log.get("eval"))
    builder = TraceBuilder(FORMAT)
    task_id = spec.get("task_id") or spec.get("run_id") or spec.get("task") or "log"
    epoch = sample.get("epoch", 1)
    builder.source_id = f"{task_id}:sample-{sample.get('id')}:epoch-{epoch}"
    for key, info in (("task", "task"), ("model", "model")):
        if isinstance(spec.get(key), str) and spec[key]:
            builder.info[info] = spec[key]
    builder.info["sample"] = sample.get("id")
    builder.info["epoch"] = epoch
    builder.note_time(
        parse_timestamp(sample.get("started_at")) or parse_timestamp(spec.get("created"))
    )

    input_text = _input_text(sample.get("input"))
    messages = expect_list(sample.get("messages") or [], at(path, "messages"))
    question = _question_after(input_text, messages)
    if question is not None and input_text:
        builder.objective, builder.objective_from = question, FROM_USER_MESSAGE
        builder.objective_context.append(input_text)
    elif input_text:
        builder.objective, builder.objective_from = input_text, FROM_TASK_FIELD
    sample_id = sample.get("id")  # at_origin keeps it only if it is text or a whole number
    _read_messages(builder, messages, at(path, "messages"), input_text, question, sample_id, epoch)

    error = sample.get("error")
    if error:
        builder.at_origin(sample=sample_id, epoch=epoch, field="error")
        message = stringify(mapping(error).get("message") or error)
        builder.observation(message, failed=True, source="harness")
        builder.success = False
        builder.info["error"] = message
    _read_scores(builder, sample.get("scores"))
    _read_log_status(builder, log, sample)
    builder.keep_tools(_tools_of_events(sample.get("events")))
    choices = _choices(sample.get("choices"))
    if choices and builder.objective is not None and builder.objective_from == FROM_TASK_FIELD:
        # The options as Inspect's multiple_choice solver shows them: without them an answer
        # ("ANSWER: C") names nothing.
        options_text = "\n".join(f"{chr(ord('A') + n)}) {c}" for n, c in enumerate(choices))
        if options_text not in builder.objective:
            builder.objective = f"{builder.objective}\n\n{options_text}"
    target = sample.get("target")
    truth: dict[str, Any] = {}
    if target not in (None, "", []):
        truth["target"] = target
    if choices:
        truth["choices"] = choices
    if truth:
        if isinstance(sample.get("metadata"), Mapping) and sample["metadata"]:
            truth["metadata"] = dict(sample["metadata"])
        builder.ground_truth = truth
    default_objective(builder, f"Inspect sample {sample.get('id')}", FROM_SOURCE_ID)
    try:
        return builder.build(sample, options)
    except ConversionError as exc:
        raise exc.under(path) from None


def _tools_of_events(events: Any) -> list[dict[str, Any]]:
    """The tools the sample's model calls were given (each ``model`` event's ``tools``, the
    first definition of each name)."""
    return first_of_each_name(
        declared_tools(event.get("tools"))
        for event in (events if isinstance(events, list) else [])
        if isinstance(event, Mapping) and event.get("event") == "model"
    )


def _read_log_status(
    builder: TraceBuilder, log: Mapping[str, Any], sample: Mapping[str, Any]
) -> None:
    """A log that did not run to its end (``status`` ``cancelled`` or ``error``): its status
    and error → ``kp_import.log_status``, ``kp_import.log_error``; a sample of it that was
    never scored did not finish: success false."""
    status = log.get("status")
    if not isinstance(status, str) or status not in _UNFINISHED:
        return
    builder.info["log_status"] = status
    log_error = log.get("error")
    if log_error:
        builder.info["log_error"] = stringify(mapping(log_error).get("message") or log_error)
    if not sample.get("scores") and builder.success is None:
        builder.success = False


def _choices(value: Any) -> list[str]:
    """A multiple-choice sample's options (text each), or none."""
    if isinstance(value, list) and value and all(isinstance(c, str) for c in value):
        return list(value)
    return []


def _input_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value if value.strip() else None
    if isinstance(value, list):
        users = [m for m in value if isinstance(m, Mapping) and m.get("role") == "user"]
        if users:
            text = content_text(users[-1].get("content"))
            return text if text.strip() else None
    return None


def _question_after(input_text: str | None, messages: list[Any]) -> str | None:
    """The question an input that only instructs is about, or ``None`` (the input is the task).

    Real logs hold such inputs: upstream's own ``input_task`` sends "Please answer any
    questions that I answer using the type of lingo that Gen Z would use." as the input, and
    its solver then the question. The question is the first user message after the input and
    before the model's first answer, taken when the input is a harness preamble
    (:func:`~._objective.preamble_kind`) or asks no question (no ``?``) while it does. A user
    message after an answer is a later turn, never the task.
    """
    if not input_text:
        return None
    for raw in messages:
        if not isinstance(raw, Mapping):
            return None
        role = raw.get("role")
        if role == "assistant":
            return None
        text = _text(raw.get("content")) if role == "user" else ""
        if not text.strip() or raw.get("source") == "input" or text == input_text:
            continue
        instructs = preamble_kind(input_text) is not None or "?" not in input_text
        return text if instructs and "?" in text else None
    return None


def _read_messages(
    builder: TraceBuilder,
    messages: list[Any],
    path: str,
    input_text: str | None,
    question: str | None = None,
    sample_id: str | int | None = None,
    epoch: Any = None,
) -> None:
    input_seen = input_text is None
    question_seen = question is None
    for index, raw in enumerate(messages):
        builder.at_origin(sample=sample_id, epoch=epoch, message=index)
        where = at(path, index)
        message = expect_dict(raw, where)
        role = expect_str(message.get("role"), at(where, "role"))
        content = message.get("content")
        if role == "user":
            text = _text(content)
            if not input_seen and (message.get("source") == "input" or text == input_text):
                input_seen = True
                continue
            if not question_seen and text == question:
                question_seen = True  # the objective, not also a user turn
                continue
            builder.user_message(text)
        elif role == "assistant":
            _read_assistant(builder, message, where)
        elif role == "tool":
            error = message.get("error")
            text = _text(content, result=True)
            if error and not text.strip():
                text = stringify(mapping(error).get("message") or error)
            call_id = message.get("tool_call_id")
            builder.observation(
                text,
                call_id=call_id if isinstance(call_id, str) else None,
                tool=message.get("function") if isinstance(message.get("function"), str) else None,
                failed=bool(error),
            )


def _text(content: Any, *, result: bool = False) -> str:
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, Mapping) and part.get("type") == "reasoning":
                continue
            parts.append(part)
        return content_text(parts, result=result)
    return content_text(content, result=result)


def _read_assistant(builder: TraceBuilder, message: Mapping[str, Any], where: str) -> None:
    content = message.get("content")
    if isinstance(content, list):
        for part in content:
            if (
                isinstance(part, Mapping)
                and part.get("type") == "reasoning"
                and isinstance(part.get("reasoning"), str)
                and not part.get("redacted")
            ):
                builder.thought(part["reasoning"])
    builder.thought(_text(content))
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        return
    for index, raw in enumerate(calls):
        call_where = at(at(where, "tool_calls"), index)
        call = expect_dict(raw, call_where)
        call_id = call.get("id")
        builder.tool_call(
            expect_str(call.get("function"), at(call_where, "function")),
            parse_arguments(call.get("arguments"), at(call_where, "arguments"), lenient=True),
            call_id=call_id if isinstance(call_id, str) else None,
        )


def _read_scores(builder: TraceBuilder, scores: Any) -> None:
    if not isinstance(scores, Mapping) or not scores:
        return
    values = {name: mapping(score).get("value") for name, score in scores.items()}
    builder.info["scores"] = values
    first = next(iter(values.values()))
    success = _success(first)
    if success is not None and builder.success is None:
        builder.success = success


def _success(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value >= 1.0
    if isinstance(value, str):
        if value == _CORRECT:
            return True
        if value in (_INCORRECT, "N", "P"):
            return False
    return None


# ---------------------------------------------------------------------------------------------
# .eval archives


class EvalArchiveSample:
    """One sample file of an ``.eval`` archive: its name, and its parsed JSON or why not."""

    def __init__(self, name: str, data: Any = None, error: str | None = None) -> None:
        self.name = name
        self.data = data
        self.error = error


def read_eval_archive(path: str) -> tuple[dict[str, Any], Iterator[EvalArchiveSample]]:
    """The log header of an ``.eval`` archive and its samples, in name order. Raises
    :class:`ConversionError` when the archive or its header cannot be read."""
    try:
        archive = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as exc:
        raise ConversionError("", f"not a readable .eval archive ({exc})") from None
    names = archive.namelist()
    header_name = next((n for n in ("header.json", "_journal/start.json") if n in names), None)
    if header_name is None:
        archive.close()
        raise ConversionError("", "not an Inspect AI .eval archive (no header.json)")
    try:
        header = json.loads(archive.read(header_name))
    except (ValueError, zipfile.BadZipFile, OSError) as exc:
        archive.close()
        raise ConversionError(header_name, f"cannot be read ({exc})") from None
    if not isinstance(header, dict):
        archive.close()
        raise ConversionError(header_name, "expected a JSON object")
    if "log" in header and isinstance(header["log"], Mapping):  # _journal/start.json
        header = dict(header["log"])
    samples = sorted(n for n in names if n.startswith("samples/") and n.endswith(".json"))

    def read() -> Iterator[EvalArchiveSample]:
        with archive:
            for name in samples:
                try:
                    data = json.loads(archive.read(name))
                except (ValueError, zipfile.BadZipFile, OSError) as exc:
                    yield EvalArchiveSample(name, error=f"cannot be read ({exc})")
                    continue
                yield EvalArchiveSample(name, data)

    return header, read()
