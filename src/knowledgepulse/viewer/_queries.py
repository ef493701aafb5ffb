"""The viewer's HTTP API (the ``/v1`` contract of ``kp serve``), answered from memory.

Each function takes the loaded :class:`ViewerData` and returns the answer of one endpoint as
the service's own model (:mod:`knowledgepulse.api_models`), so both servers answer one
contract. ``kp view`` has no knowledge base, so:

- ``added_at``, ``last_added_at``, ``threshold``, ``model`` and ``dimensions`` are null, and
  sorting by ``added_at`` follows the order the records were read in;
- search matches the query's words where words of trace ids and objectives begin (there is no embedder); a
  hit's ``similarity`` is the fraction of the query's words it contains.

Beyond what ``kp serve`` answers, ``GET /v1/traces`` also sorts by any column of the table and
filters by ``value_min`` / ``value_max``; ``GET /v1/stats`` fills the models' kp-view-only
fields (what was read, ``"search": "text"``); ``GET /v1/groups`` lists the curation groups.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._errors import KnowledgePulseError
from ..api_models import (
    Group,
    GroupList,
    NearestRef,
    SearchHit,
    SearchResponse,
    Stats,
    TraceDetail,
    TraceList,
    TraceListItem,
)
from ..compare import (
    ComparisonError,
    EvaluationComparison,
    TraceComparison,
    compare_evaluations,
    compare_traces,
)
from ..records import GroupDuplicate
from ._load import ViewedTrace, ViewerData

__all__ = [
    "MAX_LIMIT",
    "SORT_KEYS",
    "QueryError",
    "compare_runs",
    "compare_two",
    "group_list",
    "list_traces",
    "search_traces",
    "trace_detail",
    "trace_stats",
]

MAX_LIMIT = 500
MAX_SEARCH_HITS = 100
#: What ``sort`` may name (``-`` in front: descending). ``value`` and ``added_at`` are the
#: contract's; the others sort the table by its other columns.
SORT_KEYS: dict[str, Callable[[ViewedTrace], Any]] = {
    "value": lambda t: t.record.score if t.record else None,
    "complexity": lambda t: t.record.complexity if t.record else None,
    "novelty": lambda t: t.record.novelty if t.record else None,
    "tool_diversity": lambda t: t.record.tool_diversity if t.record else None,
    "outcome": lambda t: t.record.outcome if t.record else None,
    "success": lambda t: t.success,
    "domain": lambda t: t.domain,
    "id": lambda t: t.id,
    "added_at": lambda t: t.order,
}


class QueryError(KnowledgePulseError, ValueError):
    """A request parameter that cannot be used (HTTP 422): ``path`` names it ("" for the whole
    body), ``message`` says why; the text is ``"path: message"`` (or the message alone)."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}" if path else message)


def list_traces(data: ViewerData, params: Mapping[str, Sequence[str]]) -> TraceList:
    """``GET /v1/traces``: one page of traces, filtered and sorted.

    Args:
        data: what was loaded.
        params: the query string, each name to its values (as ``urllib.parse.parse_qs`` gives):
            ``sort``, ``domain``, ``q`` (words that must all appear in the id or objective),
            ``value_min``, ``value_max``, ``limit`` (1 to :data:`MAX_LIMIT`, default 50),
            ``offset``.
    """
    sort = _text(params, "sort") or "-value"
    descending = sort.startswith("-")
    key = SORT_KEYS.get(sort.lstrip("-"))
    if key is None:
        raise QueryError("sort", f"expected one of {', '.join(SORT_KEYS)}, with - for descending")
    domain = _text(params, "domain")
    words = _words(_text(params, "q"))
    value_min = _number(params, "value_min")
    value_max = _number(params, "value_max")
    limit = _integer(params, "limit", 50, low=1, high=MAX_LIMIT)
    offset = _integer(params, "offset", 0, low=0, high=None)

    def wanted(trace: ViewedTrace) -> bool:
        if domain and trace.domain != domain:
            return False
        if words and _matched(trace, words) < len(words):
            return False
        if value_min is None and value_max is None:
            return True
        value = trace.record.score if trace.record else None
        if value is None:
            return False
        return (value_min is None or value >= value_min) and (
            value_max is None or value <= value_max
        )

    chosen = [trace for trace in data.traces.values() if wanted(trace)]
    # Ties (and missing values, always last) are ordered by id, whatever the direction.
    chosen.sort(key=lambda t: t.id)
    present = [t for t in chosen if key(t) is not None]
    missing = [t for t in chosen if key(t) is None]
    present.sort(key=key, reverse=descending)
    ordered = present + missing
    return TraceList(
        items=[_item(trace) for trace in ordered[offset : offset + limit]], total=len(ordered)
    )


def trace_detail(data: ViewerData, trace_id: str) -> TraceDetail | None:
    """``GET /v1/traces/{id}``; None when the id was not read (HTTP 404)."""
    trace = data.traces.get(trace_id)
    if trace is None:
        return None
    sources = trace.sources
    return TraceDetail(
        trace=trace.trace.to_dict() if trace.trace else None,
        record=trace.record,
        added_at=None,
        source=next(iter(sources.values()), None),
        near_duplicates=[NearestRef(**near) for near in data.near_duplicates(trace_id)],
        sources=sources,
        eval=trace.eval.to_dict() if trace.eval else None,
    )


def compare_two(data: ViewerData, params: Mapping[str, Sequence[str]]) -> TraceComparison | str:
    """``GET /v1/compare?a=ID&b=ID[&rubric=agent|none]``: the two traces compared, or the
    first id whose steps were not read (HTTP 404, as ``kp serve`` answers an id it lacks)."""
    ids = []
    for name in ("a", "b"):
        value = _text(params, name)
        if not value:
            raise QueryError(name, "expected a trace id")
        ids.append(value)
    rubric = _text(params, "rubric") or "agent"
    if rubric not in ("agent", "none"):
        raise QueryError("rubric", f"expected 'agent' or 'none', got {rubric!r}")
    traces = []
    for trace_id in ids:
        viewed = data.traces.get(trace_id)
        if viewed is None or viewed.trace is None:
            return trace_id
        traces.append(viewed.trace)
    return compare_traces(traces[0], traces[1], rubric=None if rubric == "none" else rubric)


def compare_runs(
    data: ViewerData, params: Mapping[str, Sequence[str]]
) -> EvaluationComparison | str:
    """``GET /v1/runs/compare?a=FILE&b=FILE[&by=id|task]`` (kp view only): the eval lines of two
    files compared, or the first file no eval line was read from (HTTP 404). Two rubrics, or
    cases that cannot be paired, are a 422 naming both."""
    files = []
    for name in ("a", "b"):
        value = _text(params, name)
        if not value:
            raise QueryError(name, "expected a file of kp eval lines")
        files.append(value)
    by = _text(params, "by") or "id"
    if by not in ("id", "task"):
        raise QueryError("by", f"expected 'id' or 'task', got {by!r}")
    for file in files:
        if file not in data.eval_runs:
            return file
    try:
        return compare_evaluations(
            data.eval_runs[files[0]],
            data.eval_runs[files[1]],
            by="task" if by == "task" else "id",
            names=(files[0], files[1]),
        )
    except ComparisonError as exc:
        raise QueryError("", str(exc)) from None


def search_traces(data: ViewerData, body: Any) -> SearchResponse:
    """``POST /v1/search`` with ``{"text": ..., "k": 10}``: traces holding the query's words."""
    if not isinstance(body, dict) or not isinstance(body.get("text"), str):
        raise QueryError("", 'expected a JSON object {"text": "...", "k": 10}')
    k = body.get("k", 10)
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_SEARCH_HITS:
        raise QueryError("k", f"expected a whole number from 1 to {MAX_SEARCH_HITS}")
    words = _words(body["text"])
    if not words:
        raise QueryError("text", "expected at least one word to search for")
    scored = []
    for trace in data.traces.values():
        matched = _matched(trace, words)
        if matched:
            scored.append((matched / len(words), trace))
    scored.sort(key=lambda hit: (-hit[0], -(_value(hit[1]) or 0.0), hit[1].id))
    return SearchResponse(
        hits=[
            SearchHit(
                id=trace.id,
                similarity=round(similarity, 6),
                value=_value(trace),
                domain=trace.domain,
                objective=trace.objective,
            )
            for similarity, trace in scored[:k]
        ]
    )


def trace_stats(data: ViewerData) -> Stats:
    """``GET /v1/stats``: counts of what was read, by kind and by domain."""
    domains: dict[str, int] = {}
    for trace in data.traces.values():
        if trace.domain is not None:
            domains[trace.domain] = domains.get(trace.domain, 0) + 1
    traces = data.traces.values()
    values = [t.record.score for t in traces if t.record is not None]
    return Stats(
        traces=len(data.traces),
        by_domain=dict(sorted(domains.items())),
        mean_value=sum(values) / len(values) if values else None,
        last_added_at=None,
        threshold=None,
        model=None,
        dimensions=None,
        scored=len(values),
        with_steps=sum(1 for t in traces if t.trace is not None),
        evaluated=sum(1 for t in traces if t.eval is not None),
        groups=len(data.groups),
        duplicates=sum(len(g.duplicates) for g in data.groups),
        files=list(data.files),
        skipped=list(data.skipped),
        warnings=list(data.warnings),
        search="text",
    )


def group_list(data: ViewerData) -> GroupList:
    """``GET /v1/groups``: each group of near-duplicates, with the line it was read from."""
    return GroupList(
        groups=[
            Group(
                kept=g.kept,
                relation=g.relation,
                duplicates=[GroupDuplicate(**{"value": None, **d}) for d in g.duplicates],
                reason=g.reason,
                source=g.place,
            )
            for g in data.groups
        ]
    )


def _item(trace: ViewedTrace) -> TraceListItem:
    record = trace.record
    nearest = record.nearest if record else None
    return TraceListItem(
        id=trace.id,
        value=record.score if record else None,
        complexity=record.complexity if record else None,
        novelty=record.novelty if record else None,
        tool_diversity=record.tool_diversity if record else None,
        outcome=record.outcome if record else None,
        domain=trace.domain,
        success=trace.success,
        nearest=(
            NearestRef(id=nearest.id, similarity=nearest.similarity)
            if nearest is not None and nearest.id is not None
            else None
        ),
        added_at=None,
        objective=trace.objective,
    )


def _value(trace: ViewedTrace) -> float | None:
    return trace.record.score if trace.record else None


def _words(text: str | None) -> list[str]:
    return list(dict.fromkeys((text or "").casefold().split()))


def _matched(trace: ViewedTrace, words: list[str]) -> int:
    """How many of ``words`` begin a word of the trace's id or objective (case ignored).

    A word must match where a word starts: ``pr`` finds "PR #42" and "proposal", not
    "interpret".
    """
    haystack = f"{trace.id} {trace.objective or ''}".casefold()
    return sum(1 for word in words if re.search(r"(?<!\w)" + re.escape(word), haystack))


def _text(params: Mapping[str, Sequence[str]], name: str) -> str | None:
    values = params.get(name)
    return values[-1].strip() if values else None


def _number(params: Mapping[str, Sequence[str]], name: str) -> float | None:
    text = _text(params, name)
    if not text:
        return None
    try:
        number = float(text)
    except ValueError:
        raise QueryError(name, f"expected a number, got {text!r}") from None
    if number != number or number in (float("inf"), float("-inf")):
        raise QueryError(name, f"expected a finite number, got {text!r}")
    return number


def _integer(
    params: Mapping[str, Sequence[str]], name: str, default: int, *, low: int, high: int | None
) -> int:
    text = _text(params, name)
    if not text:
        return default
    try:
        number = int(text)
    except ValueError:
        raise QueryError(name, f"expected a whole number, got {text!r}") from None
    if number < low or (high is not None and number > high):
        bound = f"from {low} to {high}" if high is not None else f"of at least {low}"
        raise QueryError(name, f"expected a whole number {bound}, got {number}")
    return number
