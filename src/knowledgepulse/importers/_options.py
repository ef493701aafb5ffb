"""What the caller tells the importers: :class:`ImportOptions`, and the defaults used otherwise.

Every option that is set **overrides** the source: it replaces the value the source gives (or
the default) in every trace, and its name is listed in ``metadata.kp_import.overridden``. Values
that neither the source nor the caller gives are defaulted and listed in
``metadata.kp_import.defaulted``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from knowledgepulse.io._reader import json_type_name

from ._values import ConversionError

__all__ = [
    "DEFAULT_CONFIDENCE_KNOWN",
    "DEFAULT_CONFIDENCE_UNKNOWN",
    "DEFAULT_CREATED_AT",
    "DEFAULT_PRIVACY_LEVEL",
    "DEFAULT_TASK_DOMAIN",
    "DEFAULT_VISIBILITY",
    "ImportOptions",
    "override_trace_data",
    "resolve_options",
]

DEFAULT_TASK_DOMAIN = "default"
DEFAULT_VISIBILITY = "private"
DEFAULT_PRIVACY_LEVEL = "private"
# A trace whose success the source states is as sure as the source; otherwise half sure.
DEFAULT_CONFIDENCE_KNOWN = 1.0
DEFAULT_CONFIDENCE_UNKNOWN = 0.5
# A trace whose source has no timestamp: a fixed time, not the clock's, so that importing the
# same input twice gives the same bytes (and ``created_at`` is listed as defaulted).
DEFAULT_CREATED_AT = "1970-01-01T00:00:00+00:00"


@dataclass(frozen=True)
class ImportOptions:
    """Values that replace the source's in every trace (each optional; ``None`` = not set).

    ``task_domain`` → ``metadata.task_domain``; ``success`` → ``metadata.success``;
    ``confidence`` → ``outcome.confidence`` (0 to 1); ``trace_id`` → ``id`` (prefixed with
    ``kp:trace:<format>:`` unless it starts with ``kp:trace:``); ``created_at`` →
    ``metadata.created_at``; ``objective`` → ``task.objective``; ``visibility`` and
    ``privacy_level`` → the ``metadata`` fields of the same names.

    Raises :class:`ConversionError` for a value no trace could hold (an empty ``task_domain``,
    a ``confidence`` outside 0 to 1, a ``success`` that is not a boolean).
    """

    task_domain: str | None = None
    success: bool | None = None
    confidence: float | None = None
    trace_id: str | None = None
    created_at: datetime | str | None = None
    objective: str | None = None
    visibility: str | None = None
    privacy_level: str | None = None

    def __post_init__(self) -> None:
        if self.task_domain is not None and (
            not isinstance(self.task_domain, str) or not self.task_domain.strip()
        ):
            raise ConversionError("task_domain", "must be a non-empty string")
        if self.success is not None and not isinstance(self.success, bool):
            raise ConversionError(
                "success", f"expected a boolean, got {json_type_name(self.success)}"
            )
        confidence = self.confidence
        if confidence is not None and (
            isinstance(confidence, bool)
            or not isinstance(confidence, (int, float))
            or not math.isfinite(confidence)
            or not 0.0 <= confidence <= 1.0
        ):
            raise ConversionError(
                "confidence", f"must be a number from 0 to 1 (got {confidence!r})"
            )

    @property
    def given(self) -> list[str]:
        """The names of the options that are set, in field order."""
        return [f.name for f in dataclasses.fields(self) if getattr(self, f.name) is not None]


def resolve_options(options: ImportOptions | None, overrides: dict[str, Any]) -> ImportOptions:
    """``options`` (or none) with keyword ``overrides`` applied; an unknown name is a TypeError."""
    base = options if options is not None else ImportOptions()
    return dataclasses.replace(base, **overrides) if overrides else base


# Where each option goes in a trace's JSON.
_TRACE_FIELDS: dict[str, tuple[str, str]] = {
    "task_domain": ("metadata", "task_domain"),
    "success": ("metadata", "success"),
    "confidence": ("outcome", "confidence"),
    "created_at": ("metadata", "created_at"),
    "objective": ("task", "objective"),
    "visibility": ("metadata", "visibility"),
    "privacy_level": ("metadata", "privacy_level"),
}


def override_trace_data(data: dict[str, Any], options: ImportOptions) -> dict[str, Any]:
    """A ReasoningTrace record with the set options written over it (a copy; ``data`` is kept).

    The options' names are added to ``metadata.kp_import.overridden``. A section that is not
    an object is left alone: validating the record reports it.
    """
    given = options.given
    if not given:
        return data
    out = dict(data)
    for name in given:
        value = getattr(options, name)
        if name == "trace_id":
            out["id"] = value if value.startswith("kp:trace:") else f"kp:trace:{value}"
            continue
        section, key = _TRACE_FIELDS[name]
        part = out.get(section, {})
        if isinstance(part, dict):
            out[section] = {
                **part,
                key: value.isoformat() if isinstance(value, datetime) else value,
            }
    metadata = out.get("metadata")
    if isinstance(metadata, dict):
        kp_import = metadata.get("kp_import")
        kp_import = dict(kp_import) if isinstance(kp_import, dict) else {}
        earlier = kp_import.get("overridden")
        earlier = [n for n in earlier if n not in given] if isinstance(earlier, list) else []
        kp_import["overridden"] = [*earlier, *given]
        out["metadata"] = {**metadata, "kp_import": kp_import}
    return out
