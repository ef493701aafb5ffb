"""What the MCP tools do, as plain blocking calls over the service's engine and the library.

Every read is for a key's eyes (its :class:`~knowledgepulse.kb.Viewer`); a trace it may not
see is answered exactly as one that does not exist. Contributions go through the same path as
``POST /v1/traces``: limits, redaction, then :meth:`Engine.contribute` (scored against the
whole base, stored when the value reaches the threshold, idempotent by id).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from starlette.exceptions import HTTPException

from ..api_models import VIEWER_ONLY, TraceDetail
from ..kb import ApiKey
from ..kb._recall import (
    UNTRUSTED_NOTICE,
    Recall,
    fenced_example,
    one_line,
    quoted,
    render_steps,
    search_similar,
    untrusted_examples,
)
from ..kb._spans import memory_span
from ..service._bodies import Redactor, RequestProblem, refuse_unstorable_ids, traces_of
from ..service._engine import Engine, shown_id
from ..service._settings import ServiceSettings

__all__ = ["LOCAL_KEY", "NotFound", "ToolProblem", "TraceMemory"]

#: Who a local stdio server acts as: the base's owner, who sees every trace (as ``kp kb``
#: does) and contributes as ``local``.
LOCAL_KEY = ApiKey(id="local", name="local", scope="admin", org=None, created_at="")


class ToolProblem(ValueError):
    """A tool's arguments are wrong or over a limit: the message names the argument."""


class NotFound(LookupError):
    """No such trace, or one the key may not see (the same answer for both)."""

    def __init__(self, trace_id: str) -> None:
        super().__init__(f"no trace {trace_id}")


@dataclass
class TraceMemory:
    """The engine (base, embedder, threshold), the limits and the redaction, for the tools."""

    engine: Engine
    settings: ServiceSettings
    redact: Redactor

    # -- reading -----------------------------------------------------------------------------

    def search_traces(
        self,
        key: ApiKey,
        query: str,
        *,
        domain: str | None = None,
        success_only: bool = True,
        min_value: float | None = None,
        prefer: str = "relevant",
        limit: int = 5,
    ) -> dict[str, Any]:
        found = self._search(key, query, domain, success_only, min_value, prefer, limit)
        return {
            "notice": UNTRUSTED_NOTICE,
            "hits": [hit.to_dict() for hit in found],
            "examples": found.prompt,
            "reason": found.reason,
        }

    def _search(
        self,
        key: ApiKey,
        query: str,
        domain: str | None,
        success_only: bool,
        min_value: float | None,
        prefer: str,
        limit: int,
    ) -> Recall:
        limit = min(limit, self.settings.max_k)
        try:
            found = search_similar(
                self.engine.kb,
                self.engine.embedder,
                query,
                k=limit,
                viewer=key.viewer,
                success_only=success_only,
                domain=domain,
                min_value=min_value,
                prefer=prefer,
            )
        except ValueError as exc:
            raise ToolProblem(str(exc)) from None
        # Each id as its contributor gave it (as /v1/search shows it): a row namespaced by its
        # owner would tell every reader that the id is taken, and by which key.
        return replace(found, hits=[replace(hit, id=shown_id(hit.id)) for hit in found])

    def get_trace(self, key: ApiKey, trace_id: str, detail: str = "summary") -> dict[str, Any]:
        found = self.engine.detail(trace_id, key.viewer)
        if found is None:
            raise NotFound(trace_id)
        team = self.engine.team_of(trace_id, key.viewer)
        if detail == "full":
            served = found.model_dump(mode="json", exclude=VIEWER_ONLY[TraceDetail])
            return {"notice": UNTRUSTED_NOTICE, "id": trace_id, "team": team, **served}
        trace = found.trace or {}  # a stored trace always has its steps; kp view's may not
        record = found.record
        task = trace.get("task") or {}
        outcome = trace.get("outcome") or {}
        metadata = trace.get("metadata") or {}
        return {
            "notice": UNTRUSTED_NOTICE,
            "id": trace_id,
            "team": team,
            "value": None if record is None else record.score,
            "objective": task.get("objective"),
            "outcome": outcome.get("result_summary"),
            "success": metadata.get("success"),
            "domain": metadata.get("task_domain"),
            "steps": render_steps(trace),
            "added_at": found.added_at,
            "near_duplicates": [n.model_dump() for n in found.near_duplicates],
        }

    # -- the two tools ChatGPT connectors require ---------------------------------------------

    def search(self, key: ApiKey, query: str) -> dict[str, Any]:
        """``search``: the results as ChatGPT connectors take them (id, title, url)."""
        found = self._search(key, query, None, False, None, "relevant", 10)
        answer: dict[str, Any] = {
            "results": [
                {"id": hit.id, "title": title_of(hit.objective, hit.id), "url": trace_uri(hit.id)}
                for hit in found
            ]
        }
        if found.reason is not None:
            answer["reason"] = found.reason
        return answer

    def fetch(self, key: ApiKey, trace_id: str) -> dict[str, Any]:
        """``fetch``: one trace as ChatGPT connectors take it (id, title, text, url, metadata)."""
        summary = self.get_trace(key, trace_id, "summary")
        text = worked_examples_text(summary)
        return {
            "id": trace_id,
            "title": title_of(summary["objective"], trace_id),
            "text": text,
            "url": trace_uri(trace_id),
            "metadata": {
                "team": summary["team"],
                "added_at": summary["added_at"],
                "value": summary["value"],
                "success": summary["success"],
                "domain": summary["domain"],
            },
        }

    def resource(self, key: ApiKey, trace_id: str) -> str:
        """``kp://trace/{id}``: the stored trace and its score record, as JSON."""
        return json.dumps(self.get_trace(key, trace_id, "full"), ensure_ascii=False)

    def recent(self, key: ApiKey, limit: int = 50) -> list[tuple[str, str | None]]:
        """The latest traces the key may see: (id, objective)."""
        listing = self.engine.listing(
            key.viewer, sort="-added_at", domain=None, text=None, limit=limit, offset=0
        )
        return [(item.id, title_of(item.objective, item.id)) for item in listing.items]

    # -- contributing -----------------------------------------------------------------------

    def contribute_trace(
        self, key: ApiKey, trace: Any, visibility: str | None = None, *, source: str = "mcp"
    ) -> dict[str, Any]:
        if not key.allows("contribute"):
            raise ToolProblem(f"this key's scope is {key.scope}; contribute_trace needs contribute")
        if not isinstance(trace, dict):
            raise ToolProblem(
                f"trace: expected a ReasoningTrace object, got {type(trace).__name__}"
            )
        size = len(json.dumps(trace, ensure_ascii=False).encode("utf-8", "surrogatepass"))
        if size > self.settings.max_body_bytes:
            raise ToolProblem(
                f"trace: {size:,} bytes; at most {self.settings.max_body_bytes:,} are taken"
            )
        if visibility is not None:
            metadata = trace.get("metadata")
            trace = {**trace, "metadata": {**(metadata if isinstance(metadata, dict) else {})}}
            trace["metadata"]["visibility"] = visibility
        try:
            parsed = traces_of(trace, None, self.settings, many=False)[0]
            refuse_unstorable_ids([parsed], many=False)  # the id rule of POST /v1/traces
        except RequestProblem as exc:
            first = exc.problems[0] if exc.problems else None
            where = "trace" if first is None or not first.path else f"trace.{first.path}"
            message = first.message if first is not None else str(exc.detail)
            raise ToolProblem(f"{where}: {message}") from None
        except HTTPException as exc:  # 413: too many steps
            raise ToolProblem(f"trace.{exc.detail}") from None
        with memory_span("create_memory", self.engine.kb) as span:
            span.set_attribute("gen_ai.memory.record.id", parsed.id)
            result = self.engine.contribute([self.redact(parsed)], key, source)[0]
            span.set_attribute("gen_ai.memory.record.count", int(result.status == "accepted"))
        # A copy is named as every surface names it: kp curate's copy decision.
        copied = None if result.record is None else result.record.copy_of
        duplicate = (
            None
            if copied is None or copied.id is None
            else {
                "id": copied.id,
                "relation": copied.relation,
                "similarity": round(copied.similarity, 4),
            }
        )
        return {
            "id": result.id,
            "status": result.status,
            "score": result.value,
            "threshold": result.threshold,
            "passed": result.value is not None and result.value >= result.threshold,
            "stored": result.status in ("accepted", "already_stored"),
            "duplicate_of": duplicate,
            "explanation": result.explanation,
        }


def trace_uri(trace_id: str) -> str:
    return f"kp://trace/{trace_id}"


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def title_of(objective: str | None, trace_id: str) -> str:
    """A stored objective as a title: on one line, at most 200 characters."""
    title = one_line(objective if isinstance(objective, str) else "") or one_line(trace_id)
    return title if len(title) <= 200 else title[:199] + "…"


def worked_examples_text(summary: dict[str, Any]) -> str:
    """``fetch``'s text: the trace as one fenced example, marked as untrusted data, with its
    provenance (what :func:`~knowledgepulse.kb._recall.worked_examples` renders for a hit)."""
    provenance = [
        ("id", quoted(summary["id"])),
        ("team", quoted(summary["team"])),
        ("added at", quoted(summary["added_at"])),
    ]
    if summary["value"] is not None:
        provenance.append(("value", f"{summary['value']:.2f}"))
    example = fenced_example(
        "Example 1 of 1",
        provenance,
        _text(summary["objective"]),
        summary["steps"],
        _text(summary["outcome"]),
        summary["success"] if isinstance(summary["success"], bool) else None,
    )
    return untrusted_examples([example])
