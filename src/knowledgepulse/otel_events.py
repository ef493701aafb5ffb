"""OpenTelemetry evaluation events: kept importable here; the module is
:mod:`knowledgepulse.integrations.otel_events`."""

from __future__ import annotations

from .integrations.otel_events import *  # noqa: F403
from .integrations.otel_events import __all__ as __all__
