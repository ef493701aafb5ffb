"""Reading a stream of input records as units of conversion: :func:`read_traces`.

A unit is the set of input records that are converted (and rejected) together:

- most records are a unit of their own: a JSONL line, one element of a JSON list (a tau-bench
  results file, a list of traces);
- a JSON list whose elements are the *parts* of one document (the messages of a chat
  conversation, Responses API items) is one unit: its elements are converted together;
- OpenTelemetry spans and LangSmith runs are grouped over the whole source file, by
  ``traceId`` and by run tree: the records holding one trace's spans or runs are one unit,
  emitted when the file ends.

A unit of several records of one source (the messages of one conversation, the spans of one
trace) is one run: it counts once in a run's accounting (:attr:`Conversion.counted`), while its
problems still name each element (``[7].attributes``).

Problem paths start at the record. In a unit of several records they start at the list
(``[17].run_type``) or, for the lines of a JSONL file, at the line (``line 17: run_type``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from knowledgepulse._schema import ReasoningTrace, TraceValidationError, ValidationProblem
from knowledgepulse.io._reader import InputRecord

from ._harness import FILE_FORMATS, RUN_FORMATS, is_run_part
from ._langsmith_batch import merge_batches
from ._options import ImportOptions
from ._otel_spans import Span
from ._otlp import PlainLog
from ._registry import (
    AUTO_FORMAT,
    TRACE_FORMAT,
    convert,
    detect_format,
    format_names,
    undetected,
)
from ._runs import is_one_run
from ._values import ConversionError, NotARun, at
from .langsmith import convert_tree, plant_trees
from .openai import is_responses_items
from .openai_agents import convert_agents_trace, gather_agents_traces
from .otel import convert_trace, group_spans, read_spans, trace_options

__all__ = ["Conversion", "read_traces"]

# Formats whose lists may be the parts (messages, items) of one conversation.
_PART_FORMATS = frozenset(
    {"openai", "openai-responses", "anthropic", "gemini", "bedrock", "mini-swe-agent", AUTO_FORMAT}
)
# Formats whose records are grouped over the whole source file.
_GROUPED_FORMATS = frozenset({"otel", "langsmith", "langsmith-batch", "openai-agents"})


@dataclass(frozen=True)
class Conversion:
    """One unit of input records and what became of it.

    ``records``: the input records the unit consumed (one or more), accepted or rejected
    together. ``traces``: the traces made from them (none is a valid outcome).
    ``problems``: ``"path: message"`` for each problem, the path pointing into the input;
    when there are any, every record of the unit is rejected. ``traces`` then holds only the
    traces of a record that also holds broken ones and could not be split (one OTLP document
    with spans of several traces, say): those are kept, the record still counts as rejected.
    ``format``: the format used, after detection (the one asked for when none was found).
    ``one_run``: the records are the events of one run, counted once (:attr:`counted`).
    ``not_runs``: ``"path: why"`` for each thing the records hold that is not a run (a trace
    of embedding calls beside the runs of a span file): not a problem, no trace made; named so
    that nothing read is silently nothing.
    """

    records: list[InputRecord]
    traces: list[ReasoningTrace]
    problems: list[str]
    format: str
    # The records are the events of one run (a conversation's messages, one trace's spans).
    one_run: bool = False
    not_runs: tuple[str, ...] = ()

    @property
    def rejected(self) -> bool:
        return bool(self.problems)

    @property
    def counted(self) -> int:
        """How many records the unit counts for in a run's accounting: one for the events of
        one run (:func:`~._runs.is_one_run`), else each record."""
        return 1 if self.one_run else len(self.records)


def read_traces(
    records: Iterable[InputRecord], fmt: str = "trace", options: ImportOptions | None = None
) -> Iterator[Conversion]:
    """Convert input records of format ``fmt`` to traces, unit by unit.

    ``records``: as :func:`knowledgepulse.io._reader.iter_records` yields them (a list's elements
    one by one, with their ``index``); read with ``parse=False``, ReasoningTrace records are
    validated from their bytes in one step (any other format parses them first). ``fmt``: ``"trace"`` (ReasoningTrace records),
    ``"auto"`` (detected per record) or a key of :data:`FORMATS`. ``options``: values that
    replace the source's in every trace, ReasoningTrace records included.

    Every input record appears in exactly one :class:`Conversion`. Units come in input order,
    except those grouped over a source file (spans, runs), which come when the file ends, in
    the order of their first record. Raises :class:`ConversionError` for an unknown format
    (before reading any record).
    """
    if fmt not in format_names():
        known = ", ".join(format_names())
        raise ConversionError("", f"unknown format {fmt!r} (expected one of {known})")
    return _Stream(fmt, options or ImportOptions()).run(records)


@dataclass
class _Unit:
    """A grouped unit being gathered: positions of its records, its traces and errors."""

    positions: list[int] = field(default_factory=list)
    traces: list[ReasoningTrace] = field(default_factory=list)
    errors: list[ConversionError] = field(default_factory=list)
    not_runs: list[NotARun] = field(default_factory=list)


class _Stream:
    def __init__(self, fmt: str, options: ImportOptions) -> None:
        self.fmt = fmt
        self.options = options
        self.source: str | None = None
        # The open JSON list: whether its elements are parts of one document, and those parts.
        self.list_of_parts: bool | None = None
        self.parts: list[InputRecord] = []
        # Records of the current source awaiting its end: (format, record).
        self.grouped: list[tuple[str, InputRecord]] = []
        # ReasoningTrace records read unparsed are validated from their bytes, unless options
        # must be written over them first.
        self.from_bytes = fmt == TRACE_FORMAT and not options.given

    def run(self, records: Iterable[InputRecord]) -> Iterator[Conversion]:
        for record in records:
            if record.source != self.source:
                yield from self._end_source()
                self.source = record.source
            yield from self._feed(record)
        yield from self._end_source()

    def _feed(self, record: InputRecord) -> Iterator[Conversion]:
        if record.json is not None:
            if self.from_bytes:
                yield from self._close_list()
                yield _trace_from_bytes(record, self.options)
                return
            record = record.parsed()
        if record.index is not None:
            if record.index == 0 or self.list_of_parts is None:
                yield from self._close_list()
                self.list_of_parts = record.error is None and self._is_part(record.data)
            if self.list_of_parts:
                self.parts.append(record)
                return
        elif record.error is not None and self.parts:
            # The list broke off (invalid JSON): the document's parts go with the error.
            self.parts.append(record)
            yield from self._close_list()
            return
        else:
            yield from self._close_list()
        yield from self._single(record)

    def _is_part(self, data: Any) -> bool:
        """Whether a list element is a message or item of one conversation, not a record."""
        return (
            self.fmt in _PART_FORMATS
            and isinstance(data, Mapping)
            and not any(key in data for key in ("@type", "messages", "traj"))
            and ("role" in data or is_responses_items([data]))
        )

    def _close_list(self) -> Iterator[Conversion]:
        parts, self.parts, self.list_of_parts = self.parts, [], None
        if not parts:
            return
        errors = [record.error for record in parts if record.error is not None]
        if errors:
            yield Conversion(parts, [], errors, self.fmt)
            return
        data = [record.data for record in parts]
        name = self._format_of(data)
        if name == "mini-swe-agent":
            # A trajectory saved as its bare message list: one run, one record.
            parts = [_run_record(parts)]
        conversion = self._convert(parts, data, name)
        yield dataclasses.replace(conversion, one_run=is_one_run(parts))

    def _single(self, record: InputRecord) -> Iterator[Conversion]:
        if record.error is not None:
            yield Conversion([record], [], [record.error], self.fmt)
            return
        name = self._format_of(record.data)
        if self.fmt == AUTO_FORMAT and self.grouped:
            name = self._in_session(name)
        if name in _GROUPED_FORMATS or (name is not None and is_run_part(name, record.data)):
            self.grouped.append((name, record))
            return
        if name in RUN_FORMATS:
            yield from self._runs(record, name)
            return
        yield self._convert([record], record.data, name)

    def _in_session(self, name: str | None) -> str | None:
        """Inside a session file, a line of a kind the detection does not know is the
        session's, and so are a pre-2025-09 Codex rollout's bare Responses items."""
        session = next((fmt for fmt, _ in reversed(self.grouped) if fmt in FILE_FORMATS), None)
        if name is None or (session == "codex" and name in ("openai-responses", "openai")):
            return session
        return name

    def _runs(self, record: InputRecord, name: str) -> Iterator[Conversion]:
        """A record holding several runs (an Inspect log's samples, tau2's simulations): one
        unit per run, each counted as a record of its own (its position as ``index``)."""
        try:
            runs = RUN_FORMATS[name](record.data, self.options)
        except (ConversionError, TraceValidationError) as exc:
            problems = self._hinted([str(p) for p in exc.problems], record.data, name)
            yield Conversion([record], [], problems, name)
            return
        for index, (data, convert_run) in enumerate(runs):
            run = InputRecord(record.source, record.line, data=data, index=index)
            try:
                trace = convert_run()
            except (ConversionError, TraceValidationError) as exc:
                yield Conversion([run], [], [str(p) for p in exc.problems], name)
                continue
            yield Conversion([run], [trace], [], name)

    def _format_of(self, data: Any) -> str | None:
        return detect_format(data) if self.fmt == AUTO_FORMAT else self.fmt

    def _convert(self, records: list[InputRecord], data: Any, name: str | None) -> Conversion:
        if name is None:
            problem = undetected(data)
            return Conversion(records, [], [problem], self.fmt)
        try:
            traces = convert(name, data, self.options)
        except (ConversionError, TraceValidationError) as exc:
            problems = self._hinted([str(p) for p in exc.problems], data, name)
            return Conversion(records, [], problems, name)
        return Conversion(records, traces, [], name)

    def _hinted(self, problems: list[str], data: Any, name: str) -> list[str]:
        """``problems``, the last one ending in ``; it looks like X: use --from X`` when the
        user named a format (not auto) and the record looks like another one: what to type
        instead, not only what the named format expected."""
        if self.fmt in (AUTO_FORMAT, TRACE_FORMAT) or not problems:
            return problems
        if any("use --from" in problem for problem in problems):
            return problems
        detected = detect_format(data)
        if detected is None or detected == name:
            return problems
        return [*problems[:-1], f"{problems[-1]}; it looks like {detected}: use --from {detected}"]

    # -- units grouped over a source file -----------------------------------------------------

    def _end_source(self) -> Iterator[Conversion]:
        yield from self._close_list()
        grouped, self.grouped = self.grouped, []
        if not grouped:
            return
        records = [record for _, record in grouped]
        units: list[tuple[str, _Unit]] = []
        for name, build in (
            ("otel", self._otel_units),
            ("langsmith", self._langsmith_units),
            ("langsmith-batch", self._langsmith_batch_units),
            ("openai-agents", self._openai_agents_units),
        ):
            positions = [n for n, (fmt, _) in enumerate(grouped) if fmt == name]
            if positions:
                units.extend((name, unit) for unit in build(records, positions))
        for name in FILE_FORMATS:
            positions = [n for n, (fmt, _) in enumerate(grouped) if fmt == name]
            if positions:
                units.append((name, self._file_unit(name, records, positions)))
        units.sort(key=lambda item: item[1].positions[0])
        for name, unit in units:
            members = [records[n] for n in unit.positions]
            problems = _render(unit.errors, members)
            if not unit.traces:
                problems = self._hinted(problems, [m.data for m in members], name)
            if name in FILE_FORMATS:
                members = [_run_record(members)]
            yield Conversion(
                members,
                unit.traces,
                problems,
                name,
                one_run=is_one_run(members),
                not_runs=tuple(_render(unit.not_runs, members)),
            )

    def _file_unit(self, name: str, records: list[InputRecord], positions: list[int]) -> _Unit:
        """The records of a run written as many records (a session file's lines): one unit."""
        unit = _Unit(positions=list(positions))
        entries = [(records[n].data, _prefix(records[n])) for n in positions]
        try:
            unit.traces.extend(FILE_FORMATS[name](entries, self.options))
        except ConversionError as exc:
            unit.errors.append(exc)
        return unit

    def _otel_units(self, records: list[InputRecord], positions: list[int]) -> list[_Unit]:
        documents = ((records[n].data, _prefix(records[n]), n) for n in positions)
        spans, problems, plain_logs = read_spans(documents)
        groups = group_spans(spans)
        units = _Units(positions)
        broken = {problem.trace_id for problem in problems if problem.trace_id is not None}
        for group in groups.values():
            units.join(origin for span in group for origin in sorted(span.origins))
        for problem in problems:
            if problem.trace_id is not None and problem.trace_id in groups:
                units.join([problem.origin, groups[problem.trace_id][0].origin])
        # A plain log record of a run's trace is a record of that run (one run, one record).
        for log in plain_logs:
            if log.trace_id is not None and log.trace_id in groups:
                units.join([log.origin, groups[log.trace_id][0].origin])
        # Units are looked up only once every record is joined to its unit.
        for problem in problems:
            units.of(problem.origin).errors.append(problem.error)
        _report_lone_logs(units, plain_logs, groups, {p.origin for p in problems})
        for otel_id, group in groups.items():
            if otel_id in broken:
                continue
            unit = units.of(group[0].origin)
            try:
                options = trace_options(self.options, otel_id, len(groups))
                unit.traces.append(convert_trace(otel_id, group, options))
            except NotARun as exc:
                unit.not_runs.append(exc)
            except ConversionError as exc:
                unit.errors.append(exc)
        return units.all()

    def _langsmith_units(self, records: list[InputRecord], positions: list[int]) -> list[_Unit]:
        runs: list[tuple[Any, str, int]] = []
        for n in positions:
            data, prefix = records[n].data, _prefix(records[n])
            if isinstance(data, list):
                runs.extend((run, at(prefix, i), n) for i, run in enumerate(data))
            else:
                runs.append((data, prefix, n))
        return self._run_tree_units(runs, positions, [], [])

    def _langsmith_batch_units(
        self, records: list[InputRecord], positions: list[int]
    ) -> list[_Unit]:
        """One file is one stream of batches: a run's post and its patches, in any records of
        the file, are one run (and their records one unit)."""
        merged = merge_batches((records[n].data, _prefix(records[n]), n) for n in positions)
        return self._run_tree_units(merged.runs, positions, merged.joins, merged.problems)

    def _run_tree_units(
        self,
        runs: list[tuple[Any, str, int]],
        positions: list[int],
        joins: list[tuple[int, int]],
        problems: list[tuple[int, ConversionError]],
    ) -> list[_Unit]:
        trees, link_problems = plant_trees(runs)
        problems = [*problems, *link_problems]
        units = _Units(positions)
        for pair in joins:
            units.join(pair)
        first_of_trace: dict[str, int] = {}
        for tree in trees:
            units.join([*tree.origins, first_of_trace.setdefault(tree.key, tree.origins[0])])
        for tree in trees:
            unit = units.of(tree.origins[0])
            try:
                unit.traces.append(convert_tree(tree, self.options))
            except ConversionError as exc:
                unit.errors.append(exc)
        for origin, error in problems:
            units.of(origin).errors.append(error)
        return units.all()

    def _openai_agents_units(self, records: list[InputRecord], positions: list[int]) -> list[_Unit]:
        documents = ((records[n].data, _prefix(records[n]), n) for n in positions)
        traces, problems = gather_agents_traces(documents)
        units = _Units(positions)
        for trace in traces:
            units.join(trace.origins)
        for trace in traces:
            unit = units.of(trace.origins[0])
            try:
                unit.traces.append(convert_agents_trace(trace, self.options))
            except ConversionError as exc:
                unit.errors.append(exc)
        for origin, error in problems:
            units.of(origin).errors.append(error)
        return units.all()


def _report_lone_logs(
    units: _Units, plain_logs: list[PlainLog], groups: Mapping[str, list[Span]], broken: set[int]
) -> None:
    """A record that holds only log records without GenAI content, of no run in the input, is
    reported (rejected, with why), never a record that silently became nothing."""
    held = broken | {
        origin for group in groups.values() for span in group for origin in span.origins
    }
    for log in plain_logs:
        if log.origin in held or (log.trace_id is not None and log.trace_id in groups):
            continue
        if log.trace_id is None:
            reason = "a log record with no GenAI content and no trace context: nothing to import"
        else:
            reason = (
                f"a log record with no GenAI content, of no run in this file (trace "
                f"{log.trace_id}): nothing to import"
            )
        units.of(log.origin).errors.append(ConversionError(log.path, reason))


def _trace_from_bytes(record: InputRecord, options: ImportOptions) -> Conversion:
    """A ReasoningTrace record read with ``parse=False``: parsed and validated in one step.

    The converted record keeps only where it was: its bytes are let go. A record the one-step
    validation refuses, or one it might take where the reader would not (NaN and Infinity,
    which the validator's parser reads), is parsed and validated as any other record, for the
    reader's and the validator's exact messages.
    """
    assert record.json is not None
    raw = record.json
    if b"NaN" not in raw and b"Infinity" not in raw:
        try:
            trace = ReasoningTrace.model_validate_json(raw)
        except TraceValidationError:
            pass
        else:
            return Conversion([record.located()], [trace], [], TRACE_FORMAT)
    record = record.parsed()
    if record.error is not None:
        return Conversion([record], [], [record.error], TRACE_FORMAT)
    try:
        traces = convert(TRACE_FORMAT, record.data, options)
    except (ConversionError, TraceValidationError) as exc:
        return Conversion([record], [], [str(p) for p in exc.problems], TRACE_FORMAT)
    return Conversion([record], traces, [], TRACE_FORMAT)


class _Units:
    """Records joined into units (union-find over their positions)."""

    def __init__(self, positions: list[int]) -> None:
        self._parent = {n: n for n in positions}
        self._units: dict[int, _Unit] = {}

    def _root(self, n: int) -> int:
        while self._parent[n] != n:
            self._parent[n] = self._parent[self._parent[n]]
            n = self._parent[n]
        return n

    def join(self, positions: Iterable[int]) -> None:
        roots = [self._root(n) for n in positions]
        for root in roots[1:]:
            self._parent[root] = roots[0]

    def of(self, position: int) -> _Unit:
        return self._units.setdefault(self._root(position), _Unit())

    def all(self) -> list[_Unit]:
        """Every unit, its records in input order; records of no trace are units of their own."""
        for n in self._parent:
            self.of(n).positions.append(n)
        return list(self._units.values())


def _run_record(members: list[InputRecord]) -> InputRecord:
    """The records of one run written as many (a session file's lines, a trajectory's
    events) as the one record they are: located where the first is, holding them all."""
    if len(members) == 1:
        return members[0]
    first = members[0]
    return InputRecord(first.source, first.line, data=[member.data for member in members])


def _prefix(record: InputRecord) -> str:
    """Where a record starts, for the paths in a unit of several: ``[17]`` or ``line 17: ``."""
    return f"[{record.index}]" if record.index is not None else f"line {record.line}: "


def _render(errors: Sequence[ConversionError], records: list[InputRecord]) -> list[str]:
    """Each problem as ``path: message``; with one record, the path starts at that record."""
    prefix = _prefix(records[0]) if len(records) == 1 else None
    out = []
    for error in errors:
        for problem in error.problems:
            path = problem.path
            if prefix is not None:
                path = _strip(path, prefix)
            out.append(
                str(ValidationProblem(path=path.removesuffix(": "), message=problem.message))
            )
    return out


def _strip(path: str, prefix: str) -> str:
    if path == prefix:
        return ""
    if prefix.endswith(": "):
        return path.removeprefix(prefix)
    if path.startswith(prefix + "."):
        return path[len(prefix) + 1 :]
    if path.startswith(prefix + "["):
        return path[len(prefix) :]
    return path
