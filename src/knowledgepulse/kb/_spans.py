"""OpenTelemetry spans for knowledge-base searches and contributions (GenAI memory conventions).

A search of the base is a ``search_memory`` span and a contribution a ``create_memory`` span,
with the attributes of the GenAI semantic conventions for memory operations (status:
development, as the conventions are): ``gen_ai.operation.name``, ``gen_ai.provider.name``
(``knowledgepulse``), ``gen_ai.memory.store.id`` (the base: its file name, or its URL without
the password), ``gen_ai.memory.record.id`` (the trace contributed), ``gen_ai.memory.record.count``
(the traces found, or stored) and ``gen_ai.retrieval.top_k``. The query text and the records
are opt-in content in the conventions and are never recorded here.

Spans go to the global tracer provider, as any instrumented library's do: with the ``otel``
extra installed and a provider configured they are exported; otherwise they cost nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._protocol import KnowledgeBase

__all__ = ["PROVIDER", "memory_span"]

PROVIDER = "knowledgepulse"
_TRACER_NAME = "knowledgepulse"


class _NoSpan:
    def set_attribute(self, key: str, value: Any) -> None:
        pass


def _tracer() -> Any:
    try:
        from opentelemetry import trace
    except ImportError:
        return None
    return trace.get_tracer(_TRACER_NAME)


def store_id(kb: KnowledgeBase | None) -> str:
    """The base as ``gen_ai.memory.store.id``: an SQLite file's name, a server's URL (whose
    password the base already left out)."""
    location = str(getattr(kb, "location", "") or "knowledge-base")
    if "://" in location:
        return location
    return Path(location).name or location


@contextmanager
def memory_span(
    operation: str, kb: KnowledgeBase | None, *, top_k: int | None = None
) -> Iterator[Any]:
    """A span ``{operation} {store}`` around a memory operation; yields it (attributes may be
    added). An exception ending the block sets ``error.type`` and the error status."""
    tracer = _tracer()
    if tracer is None:
        yield _NoSpan()
        return
    from opentelemetry.trace import SpanKind, Status, StatusCode

    store = store_id(kb)
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": operation,
        "gen_ai.provider.name": PROVIDER,
        "gen_ai.memory.store.id": store,
    }
    if top_k is not None:
        attributes["gen_ai.retrieval.top_k"] = top_k
    with tracer.start_as_current_span(
        f"{operation} {store}",
        kind=SpanKind.INTERNAL,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield span
        except BaseException as exc:
            span.set_attribute("error.type", type(exc).__qualname__)
            span.set_status(Status(StatusCode.ERROR, type(exc).__qualname__))
            raise
