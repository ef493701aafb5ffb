"""What the terminal views of comparisons share: plain text, every line within the given width.

Each comparison renders itself (``TraceComparison.render``, ``EvaluationComparison.render``)
with these helpers."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterable
from typing import Any

__all__ = ["fit", "fit_lines", "json_text", "verdict_word", "wrap_prose"]


def fit(text: str, width: int) -> str:
    indent = text[: len(text) - len(text.lstrip(" "))]
    flat = indent + " ".join(text.split())
    return flat if len(flat) <= width else flat[: max(0, width - 1)] + "…"


def fit_lines(items: Iterable[str], width: int) -> list[str]:
    return [fit(item, width) if len(item) > width else item for item in items]


def json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def verdict_word(value: bool | None) -> str:
    return "passed" if value else "failed" if value is False else "undetermined"


def wrap_prose(lines: Iterable[str], width: int) -> list[str]:
    """Long prose lines wrapped, indented as they were; the rows are already cut to fit."""
    wrapped: list[str] = []
    for line in lines:
        if len(line) <= width:
            wrapped.append(line)
            continue
        indent = " " * (len(line) - len(line.lstrip()) + 2)
        wrapped += textwrap.wrap(
            line, width, subsequent_indent=indent, break_long_words=True, break_on_hyphens=False
        )
    return wrapped
