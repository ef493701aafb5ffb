"""Scores and rubric results as OpenTelemetry ``gen_ai.evaluation.result`` events.

Each result becomes one OTel log record whose ``event_name`` is ``gen_ai.evaluation.result``,
with the GenAI semantic-convention attributes:

- ``gen_ai.evaluation.name``: the rubric's name, or ``knowledgepulse.value`` for a value score;
- ``gen_ai.evaluation.score.value``: the score in [0, 1];
- ``gen_ai.evaluation.score.label``: the outcome class (``successful_completion`` …) for a
  rubric, ``pass``/``fail`` for a value score measured against a threshold;
- ``gen_ai.evaluation.explanation``: the result's explanation;
- ``gen_ai.response.id``: when the trace knows the model response it grades
  (``metadata.kp_import.response_id``);
- ``error.type``: when a check (or the success gate) raised, the exception's type name;
- ``kp.first_failing_step``, ``kp.first_failing_criterion`` and ``kp.first_failing_agent``:
  where the run first went wrong (the earliest step a failed verdict names, the criterion
  naming it, and in a run of several agents the agent of that step), when the result knows;
  the GenAI conventions have no attribute for it yet;
- ``kp.first_failing_origin``: where that step came from in the source log, as JSON text
  (``{"message":12}``, ``{"span_id":"a0000000000000f3"}``), when its importer recorded it.

A trace imported from OpenTelemetry keeps its ``otel_trace_id`` and ``otel_span_id`` in
``metadata.kp_import``; its events carry that trace and span id, so a tracing backend shows
the score on the run it grades. Events are exported over OTLP/HTTP (protobuf) with the
OpenTelemetry SDK (the ``otel`` extra).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from .._errors import KnowledgePulseError, MissingDependencyError
from .._schema import ReasoningTrace

if TYPE_CHECKING:
    from ..rubrics import EvaluationResult
    from ..scoring._scorer import ValueScore

__all__ = [
    "EVENT_NAME",
    "VALUE_EVALUATION_NAME",
    "EvaluationEvent",
    "EvaluationEventExporter",
    "OtelExportError",
    "emit_evaluation_events",
    "logs_endpoint",
]

EVENT_NAME = "gen_ai.evaluation.result"
#: ``gen_ai.evaluation.name`` of a value score.
VALUE_EVALUATION_NAME = "knowledgepulse.value"

_TRACE_ID = re.compile(r"^[0-9a-f]{32}$")
_SPAN_ID = re.compile(r"^[0-9a-f]{16}$")
_ERROR_TYPE = re.compile(r"^([A-Za-z_][\w.]*)(?::|$| \()")


class OtelExportError(KnowledgePulseError, RuntimeError):
    """The OTLP endpoint did not accept the events (unreachable, or an error status)."""


@dataclass(frozen=True)
class EvaluationEvent:
    """One ``gen_ai.evaluation.result`` event, before it is sent.

    ``trace_id`` (32 hex digits) and ``span_id`` (16) parent the event to the evaluated span;
    ``None`` leaves it unparented. Build one with :meth:`of_result` or :meth:`of_score`.
    """

    name: str
    score: float | None = None
    label: str | None = None
    explanation: str | None = None
    response_id: str | None = None
    error_type: str | None = None
    trace_id: str | None = None
    span_id: str | None = None
    first_failing_step: int | None = None
    first_failing_criterion: str | None = None
    first_failing_agent: str | None = None
    first_failing_origin: str | None = None

    @classmethod
    def of_result(
        cls, result: EvaluationResult, trace: ReasoningTrace | None = None
    ) -> EvaluationEvent:
        """The event of a rubric result; ``trace`` (the case's trace) gives the parent span."""
        raised = [*result.errors.values(), *([result.gate_error] if result.gate_error else [])]
        return cls(
            name=result.rubric,
            score=result.score,
            label=result.outcome_type.value if result.outcome_type is not None else "undetermined",
            explanation=result.explanation,
            error_type=_error_type(raised[0]) if raised else None,
            first_failing_step=result.first_failing_step,
            first_failing_criterion=result.first_failing_criterion,
            first_failing_agent=result.first_failing_agent,
            first_failing_origin=(
                json.dumps(result.first_failing_origin, separators=(",", ":"), default=str)
                if result.first_failing_origin
                else None
            ),
            **_context(trace),
        )

    @classmethod
    def of_score(
        cls,
        score: ValueScore,
        trace: ReasoningTrace | None = None,
        threshold: float | None = None,
    ) -> EvaluationEvent:
        """The event of a value score; labelled pass/fail when a ``threshold`` is given."""
        label = None if threshold is None else ("pass" if score.value >= threshold else "fail")
        return cls(
            name=VALUE_EVALUATION_NAME,
            score=score.value,
            label=label,
            explanation=score.explanation,
            **_context(trace),
        )

    def attributes(self) -> dict[str, str | float]:
        """The event's attributes (those that are known)."""
        values: dict[str, str | float | None] = {
            "gen_ai.evaluation.name": self.name,
            "gen_ai.evaluation.score.value": self.score,
            "gen_ai.evaluation.score.label": self.label,
            "gen_ai.evaluation.explanation": self.explanation,
            "gen_ai.response.id": self.response_id,
            "error.type": self.error_type,
            "kp.first_failing_step": self.first_failing_step,
            "kp.first_failing_criterion": self.first_failing_criterion,
            "kp.first_failing_agent": self.first_failing_agent,
            "kp.first_failing_origin": self.first_failing_origin,
        }
        return {key: value for key, value in values.items() if value is not None}


def _context(trace: ReasoningTrace | None) -> dict[str, Any]:
    """:func:`_trace_context` typed for ``EvaluationEvent(**...)``, whose other fields are
    not all strings."""
    return dict(_trace_context(trace))


def _trace_context(trace: ReasoningTrace | None) -> dict[str, str | None]:
    """The OTel ids and response id an imported trace kept in ``metadata.kp_import``."""
    if trace is None:
        return {}
    kp_import = trace.to_dict()["metadata"].get("kp_import")
    if not isinstance(kp_import, Mapping):
        return {}
    trace_id = _hex(kp_import.get("otel_trace_id"), _TRACE_ID)
    span_id = _hex(kp_import.get("otel_span_id"), _SPAN_ID)
    response_id = kp_import.get("response_id")
    return {
        # A span id means nothing without its trace id.
        "trace_id": trace_id,
        "span_id": span_id if trace_id is not None else None,
        "response_id": response_id if isinstance(response_id, str) and response_id else None,
    }


def _hex(value: Any, pattern: re.Pattern[str]) -> str | None:
    if not isinstance(value, str):
        return None
    value = value.lower()
    # All zeros is OTel's "no id".
    return value if pattern.match(value) and value.strip("0") else None


def _error_type(message: str) -> str:
    """``ValueError`` from ``"ValueError: bad"``; a message with no type name gives ``_OTHER``
    (the semantic conventions' fallback)."""
    match = _ERROR_TYPE.match(message)
    return match.group(1) if match else "_OTHER"


def logs_endpoint(url: str) -> str:
    """The OTLP/HTTP logs URL for ``url``: a collector's base URL (``http://host:4318``) gets
    ``/v1/logs`` appended; a URL that already names a path is used as it is."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"expected an http(s):// URL, got {url!r}")
    if parts.path in ("", "/"):
        return url.rstrip("/") + "/v1/logs"
    return url


class EvaluationEventExporter:
    """Sends events to an OTLP/HTTP endpoint; use as a context manager (it flushes on exit).

    Args:
        endpoint: the collector's URL (see :func:`logs_endpoint`).
        headers: extra HTTP headers (e.g. an API key).
        timeout: seconds per export request.
        service_name: the ``service.name`` resource attribute.

    Raises :class:`~knowledgepulse.MissingDependencyError` without the ``otel`` extra.
    """

    def __init__(
        self,
        endpoint: str,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float = 10.0,
        service_name: str = "knowledgepulse",
    ) -> None:
        try:
            from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
            from opentelemetry.sdk._logs import LoggerProvider
            from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
            from opentelemetry.sdk.resources import Resource
        except ImportError as exc:
            raise MissingDependencyError(
                "exporting evaluation events",
                "otel",
                ["opentelemetry-sdk", "opentelemetry-exporter-otlp-proto-http"],
            ) from exc
        from .. import __version__

        self.endpoint = logs_endpoint(endpoint)
        # Duck-typed: the SDK's exporter base class is only importable with the extra.
        self._exporter = _CountingExporter(
            OTLPLogExporter(endpoint=self.endpoint, headers=dict(headers or {}), timeout=timeout)
        )
        self._provider = LoggerProvider(resource=Resource.create({"service.name": service_name}))
        self._provider.add_log_record_processor(BatchLogRecordProcessor(cast(Any, self._exporter)))
        self._logger = self._provider.get_logger("knowledgepulse", __version__)
        self.sent = 0

    def emit(self, event: EvaluationEvent) -> None:
        """Queue one event (sent in batches, in the background)."""
        from opentelemetry import trace
        from opentelemetry._logs import SeverityNumber

        context = None
        if event.trace_id is not None:
            span_id = int(event.span_id, 16) if event.span_id is not None else 0
            parent = trace.SpanContext(
                int(event.trace_id, 16),
                span_id,
                is_remote=True,
                trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
            )
            context = trace.set_span_in_context(trace.NonRecordingSpan(parent))
        self._logger.emit(
            context=context,
            event_name=EVENT_NAME,
            severity_number=SeverityNumber.WARN if event.error_type else SeverityNumber.INFO,
            attributes=event.attributes(),
        )
        self.sent += 1

    def close(self) -> None:
        """Send what is queued and stop; raises :class:`OtelExportError` when a batch failed."""
        self._provider.shutdown()
        if self._exporter.failed:
            raise OtelExportError(
                f"{self._exporter.failed} of {self.sent} evaluation events were not accepted by "
                f"{self.endpoint}"
            )

    def __enter__(self) -> EvaluationEventExporter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class _CountingExporter:
    """The OTLP exporter, counting the records of the batches that failed: the SDK only logs a
    failed export, and a CI step must be able to tell that its scores did not arrive."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.failed = 0

    def export(self, batch: Any) -> Any:
        from opentelemetry.sdk._logs.export import LogRecordExportResult

        result = self._inner.export(batch)
        if result != LogRecordExportResult.SUCCESS:
            self.failed += len(batch)
        return result

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return bool(self._inner.force_flush(timeout_millis))


def emit_evaluation_events(
    results: Iterable[EvaluationEvent | EvaluationResult],
    endpoint: str,
    *,
    traces: Mapping[str, ReasoningTrace] | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float = 10.0,
) -> int:
    """Send one ``gen_ai.evaluation.result`` event per result to an OTLP/HTTP endpoint.

    Args:
        results: :class:`EvaluationEvent` objects, or rubric results
            (:class:`~knowledgepulse.rubrics.EvaluationResult`).
        endpoint: the collector (``http://localhost:4318`` or a full ``…/v1/logs`` URL).
        traces: the evaluated traces by case id, so a rubric result's event is parented to
            the span its trace was imported from.
        headers: extra HTTP headers.
        timeout: seconds per export request.

    Returns the number of events sent. Raises :class:`OtelExportError` when the endpoint did
    not accept them, and :class:`~knowledgepulse.MissingDependencyError` without the ``otel``
    extra.
    """
    with EvaluationEventExporter(endpoint, headers=headers, timeout=timeout) as exporter:
        for item in results:
            if not isinstance(item, EvaluationEvent):
                trace = (traces or {}).get(item.case_id or "")
                item = EvaluationEvent.of_result(item, trace)
            exporter.emit(item)
    return exporter.sent
