"""LangSmith run trees → ReasoningTrace.

Input: a root run with nested ``child_runs``, or a flat list of one trace's runs (linked by
``parent_run_id``; runs of one ``trace_id`` whose parent is missing stay one trace, see
:mod:`._langsmith_runs`). Children are visited depth-first in ``dotted_order`` (else ``start_time``,
else list order).

- ``llm`` runs: the assistant message in ``outputs`` (``generations[][].message``/``text``,
  ``choices[].message``, ``messages``, or the message itself; LangChain or OpenAI shape): text
  and reasoning → thought, ``tool_calls`` → tool_call. ``inputs.messages`` repeat the
  conversation: tool results found there become observations once (when no tool run logged
  them), and user messages after the first become user observations, each once. Messages
  may be LangGraph ``(role, content)`` tuples. The run's duration → ``latency_ms`` of its
  first step.
- ``tool`` runs: tool_call ``name`` with ``inputs`` (``{"input": text}`` is read as JSON when it
  is an object), unless an earlier llm output already holds that call (same tool name, not yet
  answered); then an observation of ``outputs.output`` (a ToolMessage's ``content``; other
  outputs as JSON). ``error`` or a ToolMessage ``status: error`` marks it failed (its text is the
  error when there is no output).
- ``retriever`` runs: tool_call ``name`` with ``inputs``, observation of the documents'
  ``page_content``.
- ``chain``, ``prompt``, ``parser`` and other runs are containers; one with an ``error`` that no
  run beneath it explains adds a failed observation (the error).

Root run: ``inputs`` → objective (first user message, or ``input``/``question``/``query``/...),
``outputs`` → result summary, ``error`` → success false (else defaulted), ``name`` →
``agent_id``, ``id``/``trace_id`` → id, ``start_time`` → ``created_at``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from knowledgepulse._schema import ReasoningTrace

from ._builder import TraceBuilder
from ._langsmith_runs import RunTree, is_langsmith_batch, plant_trees, trace_key
from ._messages import Message, message_from_chat, message_list, text_from_value
from ._objective import FROM_TRACE_INPUT
from ._options import ImportOptions, resolve_options
from ._replay import Replay
from ._values import (
    ConversionError,
    at,
    expect_dict,
    expect_list,
    parse_arguments,
    parse_timestamp,
    stringify,
)

__all__ = ["RunTree", "convert_tree", "from_langsmith", "langsmith_traces", "plant_trees"]

_CONTAINERS = frozenset({"chain", "prompt", "parser", "embedding"})


def from_langsmith(
    record: Any, options: ImportOptions | None = None, **overrides: Any
) -> list[ReasoningTrace]:
    """The trace of one LangSmith trace: a root run with ``child_runs``, or a flat list of its
    runs (use :func:`langsmith_traces` for the runs of several traces).

    ``options`` (and keyword ``overrides`` of its fields) replace source values in the trace.
    Raises :class:`ConversionError` naming the offending field's path.
    """
    options = resolve_options(options, overrides)
    trees = _trees(record)
    if len(trees) != 1:
        raise ConversionError(
            "",
            f"expected the runs of one trace, found {len(trees)} root runs "
            "(use convert('langsmith', ...) for several traces)",
        )
    return [convert_tree(trees[0], options)]


def langsmith_traces(
    record: Any, options: ImportOptions | None = None, **overrides: Any
) -> list[ReasoningTrace]:
    """The traces of a run tree or of a flat list of runs: one per root run.

    Raises :class:`ConversionError` naming the offending field's path.
    """
    options = resolve_options(options, overrides)
    return [convert_tree(tree, options) for tree in _trees(record)]


def _trees(record: Any) -> list[RunTree]:
    if isinstance(record, (list, tuple)):
        trees, problems = plant_trees((run, at("", i), 0) for i, run in enumerate(record))
        if problems:
            raise ConversionError.merged([error for _, error in problems])
        return trees
    root = expect_dict(record, "")
    return [RunTree(root, "", trace_key(root, 0), [0], {})]


def convert_tree(tree: RunTree, options: ImportOptions) -> ReasoningTrace:
    """The trace of one run tree. Raises :class:`ConversionError` naming an input path."""
    builder = TraceBuilder("langsmith")
    _Walker(builder, tree.paths).visit(tree.root, tree.path, root=True)
    _read_root(builder, tree.root, tree.path)
    try:
        return builder.build(tree.root, options)
    except ConversionError as exc:
        raise exc.under(tree.path) from None


def _read_root(builder: TraceBuilder, root: Mapping[str, Any], path: str) -> None:
    source_id = root.get("id") or root.get("trace_id")
    if source_id:
        builder.source_id = str(source_id)
    builder.note_time(parse_timestamp(root.get("start_time")))
    if isinstance(root.get("name"), str) and root["name"]:
        builder.agent_id = root["name"]
    inputs = root.get("inputs")
    objective = text_from_value(inputs)
    if objective is None and isinstance(inputs, Mapping) and inputs:
        objective = json.dumps(inputs, ensure_ascii=False, default=str)
    # The root run's inputs are the task as the application received it.
    builder.set_objective(objective, FROM_TRACE_INPUT)
    outputs = root.get("outputs")
    if outputs:
        summary = _llm_text(outputs) or text_from_value(outputs, output=True)
        if summary is not None:
            builder.result_summary = summary
    if root.get("error"):
        builder.success = False


class _Walker:
    def __init__(self, builder: TraceBuilder, paths: Mapping[int, str]) -> None:
        self.builder = builder
        self.replay = Replay(builder)
        self.paths = paths

    def visit(self, run: Mapping[str, Any], path: str, *, root: bool = False) -> bool:
        """Steps of ``run`` and its children; whether an error was reported beneath or at it."""
        run_type = run.get("run_type")
        if root and is_langsmith_batch(run):
            raise ConversionError(
                path, "a LangSmith ingestion batch ({post, patch}): use --from langsmith-batch"
            )
        if not isinstance(run_type, str):
            raise ConversionError(at(path, "run_type"), "expected a string such as 'llm', 'tool'")
        error = run.get("error")
        error_text = stringify(error) if error else None
        reported = False
        self._at(run)
        if run_type == "llm":
            self._llm(run, path, error_text)
            reported = error_text is not None
        elif run_type in ("tool", "retriever"):
            self._tool(run, run_type, error_text)
            reported = error_text is not None
        for child, child_path in _children(run, path, self.paths):
            reported = self.visit(child, child_path) or reported
        # The root's own error is its outcome (success false), not a step.
        if (
            error_text
            and not reported
            and not root
            and run_type not in ("llm", "tool", "retriever")
        ):
            self._at(run)
            self.builder.observation(error_text, failed=True)
            reported = True
        return reported

    def _at(self, run: Mapping[str, Any]) -> None:
        """The run's id as the origin of the steps it makes."""
        ident = run.get("id")
        self.builder.at_origin(
            run_id=str(ident) if isinstance(ident, (str, int)) and ident else None
        )

    def _llm(self, run: Mapping[str, Any], path: str, error: str | None) -> None:
        inputs = run.get("inputs")
        messages: list[Any] = []
        if isinstance(inputs, Mapping):
            raw = inputs.get("messages")
            if isinstance(raw, list):
                messages = message_list(raw)
            elif isinstance(inputs.get("prompts"), list):
                messages = [str(p) for p in inputs["prompts"]]
        input_messages = [m for m in map(message_from_chat, messages) if m is not None]
        output_messages = _llm_outputs(run.get("outputs"))
        self.replay.llm_call(input_messages, output_messages, latency_ms=_latency(run), error=error)
        model = _model(run)
        if model:
            self.builder.info.setdefault("model", model)

    def _tool(self, run: Mapping[str, Any], run_type: str, error: str | None) -> None:
        name = run.get("name") if isinstance(run.get("name"), str) and run["name"] else run_type
        inputs = run.get("inputs")
        if isinstance(inputs, Mapping) and set(inputs) == {"input"}:
            arguments = parse_arguments(inputs["input"], "", lenient=True)
        else:
            arguments = parse_arguments(inputs, "", lenient=True)
        outputs = run.get("outputs")
        failed = error is not None
        if run_type == "retriever":
            result = _documents(outputs)
        else:
            result, message_failed = _tool_output(outputs)
            failed = failed or message_failed
        if result is None and error is not None:
            result = error
        self.replay.tool_run(
            str(name),
            call_id=_tool_call_id(outputs),
            arguments=arguments,
            result=result,
            failed=failed,
            latency_ms=_latency(run),
        )


def _children(
    run: Mapping[str, Any], path: str, paths: Mapping[int, str]
) -> list[tuple[dict[str, Any], str]]:
    """A run's children in order, each with its path in the input (a run linked from a flat
    list keeps the path it has there)."""
    raw = run.get("child_runs")
    if not raw:
        return []
    where = at(path, "child_runs")
    children = []
    for index, child in enumerate(expect_list(raw, where)):
        child_path = paths.get(id(child), at(where, index))
        children.append((expect_dict(child, child_path), child_path))

    def key(item: tuple[dict[str, Any], str]) -> tuple[str, float]:
        child = item[0]
        order = child.get("dotted_order")
        moment = parse_timestamp(child.get("start_time"))
        return (order if isinstance(order, str) else "", moment.timestamp() if moment else 0.0)

    # sorted() is stable: runs without order keys stay in list order.
    return sorted(children, key=key)


def _llm_outputs(outputs: Any) -> list[Message]:
    if not isinstance(outputs, Mapping):
        return []
    candidates: list[Any] = []
    generations = outputs.get("generations")
    if isinstance(generations, list):
        flat = generations[0] if generations and isinstance(generations[0], list) else generations
        for gen in flat[:1]:
            if isinstance(gen, Mapping):
                message = gen.get("message")
                candidates.append(
                    message
                    if message is not None
                    else {"role": "assistant", "content": gen.get("text", "")}
                )
    elif isinstance(outputs.get("choices"), list):
        for choice in outputs["choices"][:1]:
            if isinstance(choice, Mapping):
                candidates.append(choice.get("message"))
    elif isinstance(outputs.get("messages"), list):
        candidates.extend(outputs["messages"][-1:])
    elif isinstance(outputs.get("output"), Mapping):
        candidates.append(outputs["output"])
    else:
        candidates.append(outputs)
    messages = []
    for candidate in candidates:
        message = message_from_chat(candidate)
        if message is not None:
            messages.append(
                message if message.role != "user" else Message("assistant", message.parts)
            )
    return messages


def _llm_text(outputs: Any) -> str | None:
    messages = _llm_outputs(outputs)
    texts = [m.text for m in messages if m.role == "assistant" and m.text]
    return texts[-1] if texts else None


def _tool_output(outputs: Any) -> tuple[str | None, bool]:
    """A tool run's output text, and whether a ToolMessage output says it failed."""
    if outputs is None:
        return None, False
    value = outputs.get("output", outputs) if isinstance(outputs, Mapping) else outputs
    message = message_from_chat(value) if isinstance(value, Mapping) else None
    if message is not None and message.role == "tool" and message.parts:
        part = message.parts[0]
        return part.text, part.failed
    return stringify(value), False


def _tool_call_id(outputs: Any) -> str | None:
    value = outputs.get("output") if isinstance(outputs, Mapping) else None
    message = message_from_chat(value) if isinstance(value, Mapping) else None
    if message is not None and message.role == "tool" and message.parts:
        return message.parts[0].call_id
    return None


def _documents(outputs: Any) -> str | None:
    if not isinstance(outputs, Mapping):
        return None
    docs = outputs.get("documents", outputs.get("output"))
    if isinstance(docs, list):
        texts = []
        for doc in docs:
            if isinstance(doc, Mapping):
                inner = doc.get("kwargs", doc) if doc.get("lc") else doc
                texts.append(stringify(inner.get("page_content", inner)))
            else:
                texts.append(stringify(doc))
        return "\n\n".join(texts)
    return stringify(outputs)


def _latency(run: Mapping[str, Any]) -> float | None:
    start = parse_timestamp(run.get("start_time"))
    end = parse_timestamp(run.get("end_time"))
    if start is None or end is None or end < start:
        return None
    return (end - start).total_seconds() * 1000.0


def _model(run: Mapping[str, Any]) -> str | None:
    extra = run.get("extra")
    if isinstance(extra, Mapping):
        metadata = extra.get("metadata")
        if isinstance(metadata, Mapping) and isinstance(metadata.get("ls_model_name"), str):
            return str(metadata["ls_model_name"])
        params = extra.get("invocation_params")
        if isinstance(params, Mapping):
            for key in ("model", "model_name"):
                if isinstance(params.get(key), str):
                    return str(params[key])
    return None
