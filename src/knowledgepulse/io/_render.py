"""Rich renderables as plain text: the one place summaries and reports become strings."""

from __future__ import annotations

import io
from typing import Any

__all__ = ["plain_text"]


def plain_text(renderable: Any, width: int = 100) -> str:
    """``renderable`` (a rich table, group, ...) as plain text, no colour, ``width`` columns."""
    from rich.console import Console

    console = Console(width=width, record=True, color_system=None, file=io.StringIO())
    console.print(renderable)
    return console.export_text()
