"""Formats whose file is one run written as many records (a session's JSONL lines, the events of
one trajectory list): the entries of one unit, each with the label its problems start with."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ._builder import TraceBuilder
from ._objective import ObjectiveFrom
from ._values import at

__all__ = ["Entry", "default_objective", "entries_of", "first_str", "label_origin"]

#: One record of a run and where it is: ``[3]`` (an element of a list) or ``line 17: ``.
Entry = tuple[Any, str]


def entries_of(record: Any) -> list[Entry]:
    """The entries of a record handed to a converter directly: a list's elements (``[k]``) or
    the record itself (a single line)."""
    if isinstance(record, (list, tuple)):
        return [(item, at("", index)) for index, item in enumerate(record)]
    return [(record, "")]


def label_origin(label: str) -> dict[str, int]:
    """Where an entry is, as a step's origin: ``line 17: `` → ``{"line": 17}`` (a JSONL file's
    line), ``[3]`` → ``{"record": 3}``, ``history[5]`` → ``{"history": 5}``; ``{}`` for a
    single record."""
    line = re.fullmatch(r"line (\d+): ", label)
    if line is not None:
        return {"line": int(line.group(1))}
    last = re.search(r"(\w*)\[(\d+)\]$", label)
    if last is not None:
        return {last.group(1) or "record": int(last.group(2))}
    return {}


def default_objective(builder: TraceBuilder, fallback: str | None, origin: ObjectiveFrom) -> None:
    """When no objective was found but the run has steps, take ``fallback`` and say so: a run
    that crashed before its first prompt is still a run (marked ``defaulted``; ``origin``, one
    of ``._objective``'s names, says what the stand-in is)."""
    if builder.objective is not None or not builder.steps:
        return
    if fallback and fallback.strip():
        builder.objective = fallback.strip()
        builder.objective_from = origin
        # Listed where every other default is (kp_import.defaulted).
        builder.objective_defaulted = True


def first_str(record: Mapping[str, Any], *keys: str) -> str | None:
    """The first of ``keys`` whose value is a non-blank string."""
    for key in keys:
        value = record.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return None
