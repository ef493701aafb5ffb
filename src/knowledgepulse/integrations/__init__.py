"""Where knowledgepulse meets other tools: the pytest plugin, JUnit XML reports, OpenTelemetry
evaluation events, and capture of agent runs made through the official model clients."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_attributes

if TYPE_CHECKING:
    from ._capture import (
        CapturedRun as CapturedRun,
    )
    from ._capture import (
        capture as capture,
    )
    from ._capture import (
        captured as captured,
    )
    from ._junit import (
        JUnitReport as JUnitReport,
    )

# Each public name and its module; __all__ derives from it. Names load on first use.
_LAZY: dict[str, str] = {
    **dict.fromkeys(["JUnitReport"], "._junit"),
    **dict.fromkeys(["CapturedRun", "capture", "captured"], "._capture"),
}

__all__ = sorted(_LAZY)

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY, __all__)
