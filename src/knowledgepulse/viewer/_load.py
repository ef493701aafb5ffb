"""Reading what ``kp view`` shows: score and eval lines, ReasoningTraces and curation groups.

Every file is read through :func:`knowledgepulse.io._reader.iter_records`; each record is recognised
by its shape:

- ``"@type": "ReasoningTrace"``: a trace (validated, so a broken one is reported, not shown);
- ``kept``, ``duplicates`` and ``reason``: a group written by ``kp curate --groups``;
- anything else: a ``kp score`` or ``kp eval`` line, through
  :func:`knowledgepulse.records.parse_output_record`.

Score, trace and eval records of one id are joined into one :class:`ViewedTrace` (an eval line
joins by its ``case_id``). Each keeps the place it was read from. A record that cannot be read
is listed in :attr:`ViewerData.skipped`; a second record of a kind for an id already seen is
listed in :attr:`ViewerData.warnings` and the first is kept, so what is shown never depends on
which of two conflicting lines came last.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, get_args

from .._schema import ReasoningTrace, TraceValidationError
from ..io._reader import InputRecord, iter_records
from ..records import EvalRecord, Relation, ScoreRecord, parse_output_record

__all__ = ["GroupEntry", "ViewedTrace", "ViewerData", "load_view_files"]


@dataclass
class ViewedTrace:
    """Everything read about one trace id, and where each piece came from (``file:line``)."""

    id: str
    order: int  # position of the first record of this id: the order traces were read in
    trace: ReasoningTrace | None = None
    trace_place: str | None = None
    record: ScoreRecord | None = None
    record_place: str | None = None
    eval: EvalRecord | None = None
    eval_place: str | None = None

    @property
    def objective(self) -> str | None:
        return self.trace.task.objective if self.trace is not None else None

    @property
    def domain(self) -> str | None:
        if self.record is not None:
            return self.record.domain
        return self.trace.metadata.task_domain if self.trace is not None else None

    @property
    def success(self) -> bool | None:
        if self.record is not None:
            return self.record.success
        return self.trace.metadata.success if self.trace is not None else None

    @property
    def sources(self) -> dict[str, str]:
        """Where each kind of record of this trace was read: ``{"score": "file:line", …}``."""
        places = {"score": self.record_place, "trace": self.trace_place, "eval": self.eval_place}
        return {kind: place for kind, place in places.items() if place is not None}


@dataclass(frozen=True)
class GroupEntry:
    """One group of near-duplicates from ``kp curate --groups``, and where it was read."""

    kept: str
    duplicates: list[dict[str, Any]]  # {"id", "similarity"}, "value" and "relation" if given
    reason: str
    place: str
    relation: str | None = None


@dataclass
class ViewerData:
    """What ``kp view`` serves: the traces by id, the groups, and what could not be shown."""

    files: list[str] = field(default_factory=list)
    traces: dict[str, ViewedTrace] = field(default_factory=dict)
    groups: list[GroupEntry] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # "file:line: why"
    warnings: list[str] = field(default_factory=list)
    #: Every eval line by the file it was read from: each file is one run of an evaluation,
    #: two of them compared by ``GET /v1/runs/compare``.
    eval_runs: dict[str, list[EvalRecord]] = field(default_factory=dict)

    def entry(self, trace_id: str) -> ViewedTrace:
        """The entry of ``trace_id``, created (in reading order) when first seen."""
        found = self.traces.get(trace_id)
        if found is None:
            found = self.traces[trace_id] = ViewedTrace(trace_id, order=len(self.traces))
        return found

    def near_duplicates(self, trace_id: str) -> list[dict[str, Any]]:
        """Traces grouped with ``trace_id`` by curation: its duplicates, or the trace kept in
        its place, most similar first."""
        found: dict[str, float] = {}
        for group in self.groups:
            if group.kept == trace_id:
                for duplicate in group.duplicates:
                    found.setdefault(duplicate["id"], duplicate["similarity"])
            else:
                for duplicate in group.duplicates:
                    if duplicate["id"] == trace_id:
                        found.setdefault(group.kept, duplicate["similarity"])
        ranked = sorted(found.items(), key=lambda item: (-item[1], item[0]))
        return [{"id": other, "similarity": similarity} for other, similarity in ranked]


def load_view_files(files: Iterable[str]) -> ViewerData:
    """Read ``files`` (paths or directories, as ``kp`` reads them) into a :class:`ViewerData`.

    Args:
        files: score / eval output files, ReasoningTrace files and ``kp curate`` groups files,
            in any mix and order.

    Raises FileNotFoundError for a path that does not exist; every other problem is a line of
    ``skipped``.
    """
    data = ViewerData()
    seen_files: dict[str, None] = {}
    for item in iter_records(files):
        seen_files.setdefault(item.source, None)
        if item.error is not None:
            data.skipped.append(f"{item.place}: {item.error}")
            continue
        try:
            _add_record(data, item)
        except ValueError as exc:
            data.skipped.append(f"{item.place}: {exc}")
    data.files = list(seen_files)
    return data


def _add_record(data: ViewerData, item: InputRecord) -> None:
    value = item.data
    if isinstance(value, dict) and value.get("@type") == "ReasoningTrace":
        _add_trace(data, item)
    elif isinstance(value, dict) and {"kept", "duplicates", "reason"} <= value.keys():
        data.groups.append(_group(value, item.place))
    else:
        record = parse_output_record(value)
        if isinstance(record, ScoreRecord):
            entry = data.entry(record.id)
            if _first_of_kind(data, entry.record_place, record.id, "score", item.place):
                entry.record, entry.record_place = record, item.place
        elif record.case_id is None:
            raise ValueError("an eval record without case_id cannot be joined to a trace")
        else:
            data.eval_runs.setdefault(item.source, []).append(record)
            entry = data.entry(record.case_id)
            if _first_of_kind(data, entry.eval_place, record.case_id, "eval", item.place):
                entry.eval, entry.eval_place = record, item.place


def _add_trace(data: ViewerData, item: InputRecord) -> None:
    try:
        trace = ReasoningTrace.model_validate(item.data)
    except TraceValidationError as exc:
        raise ValueError("; ".join(str(p) for p in exc.problems[:3])) from None
    entry = data.entry(trace.id)
    if _first_of_kind(data, entry.trace_place, trace.id, "trace", item.place):
        entry.trace, entry.trace_place = trace, item.place


def _first_of_kind(
    data: ViewerData, earlier: str | None, trace_id: str, kind: str, place: str
) -> bool:
    if earlier is None:
        return True
    data.warnings.append(
        f"{place}: another {kind} record of {trace_id} (kept the one at {earlier})"
    )
    return False


def _group(value: dict[str, Any], place: str) -> GroupEntry:
    kept, duplicates, reason = value["kept"], value["duplicates"], value["reason"]
    if not isinstance(kept, str) or not isinstance(reason, str) or not isinstance(duplicates, list):
        raise ValueError("a groups line needs kept (a string), duplicates (a list), reason")
    checked = []
    for position, duplicate in enumerate(duplicates):
        if not (
            isinstance(duplicate, dict)
            and isinstance(duplicate.get("id"), str)
            and _is_number(duplicate.get("similarity"))
        ):
            raise ValueError(f"duplicates[{position}]: expected {{id, similarity}}")
        shown = {"id": duplicate["id"], "similarity": float(duplicate["similarity"])}
        if _is_number(duplicate.get("value")):
            shown["value"] = float(duplicate["value"])
        if duplicate.get("relation") in RELATIONS:
            shown["relation"] = duplicate["relation"]
        checked.append(shown)
    relation = value.get("relation") if value.get("relation") in RELATIONS else None
    return GroupEntry(kept=kept, duplicates=checked, reason=reason, place=place, relation=relation)


#: The relations a group line may name (kp curate --by copies and --by task).
RELATIONS = get_args(Relation)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
