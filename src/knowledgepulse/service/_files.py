"""The files ``kp view`` read, as the read-only source of the service's ``/v1`` application.

:class:`FilesSource` answers each ``/v1`` read of :func:`create_source_app` with the viewer's
queries (``knowledgepulse.viewer._queries``, which the stdlib fallback server answers with
too); a parameter they refuse is the service's 422, naming it. The service imports the viewer,
never the other way round.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel

from ..api_models import GroupList, SearchHit, Stats, TraceDetail, TraceList
from ..compare import EvaluationComparison, TraceComparison
from ..kb import ApiKey, Viewer
from ..viewer._load import ViewerData
from ..viewer._queries import (
    QueryError,
    compare_runs,
    compare_two,
    group_list,
    list_traces,
    search_traces,
    trace_detail,
    trace_stats,
)
from ._bodies import RequestProblem, problem
from ._source import ListQuery

__all__ = ["FilesSource"]

T = TypeVar("T")


class FilesSource:
    """What ``kp view`` loaded (:func:`load_view_files`), read-only: every key sees every
    trace; there is no engine, so writes answer 405 and ``/mcp`` is not served."""

    engine = None

    def __init__(self, data: ViewerData) -> None:
        self.data = data

    def left_out(self, model: type[BaseModel]) -> set[str]:
        return set()  # every field: kp view's own (sources, files, groups...) included

    def listing(self, viewer: Viewer, query: ListQuery) -> TraceList:
        params = {
            name: [str(value)]
            for name, value in (
                ("sort", query.sort),
                ("domain", query.domain),
                ("q", query.text),
                ("limit", query.limit),
                ("offset", query.offset),
                ("value_min", query.value_min),
                ("value_max", query.value_max),
            )
            if value is not None
        }
        return _asked(list_traces, self.data, params)

    def detail(self, trace_id: str, viewer: Viewer) -> TraceDetail | None:
        return trace_detail(self.data, trace_id)

    def compare(self, a: str, b: str, viewer: Viewer, rubric: str | None) -> TraceComparison | str:
        params = {"a": [a], "b": [b], "rubric": [rubric or "none"]}
        return _asked(compare_two, self.data, params)

    def search(
        self, text: str, k: int, viewer: Viewer, prefer: str
    ) -> tuple[list[SearchHit], str | None]:
        """The traces holding the text's words (no embedder); ValueError: no word in it."""
        if not text.split():
            raise ValueError("expected at least one word to search for")
        found = _asked(search_traces, self.data, {"text": text, "k": k})
        return found.hits, None

    def stats(self, key: ApiKey) -> Stats:
        return trace_stats(self.data)

    def groups(self) -> GroupList:
        return group_list(self.data)

    def compare_runs(
        self, a: str | None, b: str | None, by: str | None
    ) -> EvaluationComparison | str:
        params = {name: [value] for name, value in (("a", a), ("b", b), ("by", by)) if value}
        return _asked(compare_runs, self.data, params)

    def health(self) -> tuple[dict[str, Any], dict[str, Any]]:
        return {"backend": "files", "model": None, "threshold": None}, {
            "name": None,
            "dimensions": None,
        }

    def ping(self) -> None:
        """Files in memory always answer."""


def _asked(query: Callable[..., T], *args: Any) -> T:
    """``query(*args)``, a parameter it refuses turned into the service's 422 naming it."""
    try:
        return query(*args)
    except QueryError as exc:
        raise RequestProblem(str(exc), [problem(exc.path, exc.message)]) from None
