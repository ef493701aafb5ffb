"""Failure markers harnesses write into a tool result's text.

Some harnesses mark a failed action in the text they send back rather than in a field:
Terminus-2 answers a response it cannot parse with "Previous response had parsing errors:
ERROR: ...", mini-swe-agent and SWE-agent wrap a command's output with its ``<returncode>``,
Codex reports a shell command's ``exit_code``.
Such a result is a failed observation (``is_error``), so the ``error_recovery`` rule sees the
recovery that follows (see :mod:`._builder`, which applies :func:`failure_marker` to every
observation). Field-level signals (``is_error``, ``error: true``, a span's ERROR status) are
read by each importer; :func:`failed_exit_code` is the rule for an exit code field.

The API for importers: :func:`failure_marker` and :func:`failed_exit_code`.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["failed_exit_code", "failure_marker"]

_TERMINUS_PARSE_ERROR = "Previous response had parsing errors:"
_RETURNCODE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
_EXIT_CODE_LINE = re.compile(r"Exit code:\s*(-?\d+)\b")


def failure_marker(text: str | None) -> str | None:
    """The harness failure marker ``text`` carries, or ``None``.

    - ``parse_error``: it starts with Terminus-2's "Previous response had parsing errors:"
      (its "Previous response had warnings:" is not a failure: the commands still ran);
    - ``returncode``: its first ``<returncode>N</returncode>`` has N other than 0
      (mini-swe-agent, SWE-agent);
    - ``exit_code``: Codex's shell output, ``{"output": ..., "metadata": {"exit_code": N}}``
      or text starting ``Exit code: N``, with N other than 0.
    """
    if not text:
        return None
    stripped = text.lstrip()
    if stripped.startswith(_TERMINUS_PARSE_ERROR):
        return "parse_error"
    match = _RETURNCODE.search(text[:2000])
    if match is not None and int(match.group(1)) != 0:
        return "returncode"
    match = _EXIT_CODE_LINE.match(stripped)
    if match is not None and int(match.group(1)) != 0:
        return "exit_code"
    if stripped.startswith("{") and '"exit_code"' in stripped:
        try:
            value = json.loads(stripped)
        except json.JSONDecodeError:
            return None
        metadata = value.get("metadata") if isinstance(value, dict) else None
        if isinstance(metadata, dict) and failed_exit_code(metadata.get("exit_code")):
            return "exit_code"
    return None


def failed_exit_code(value: Any) -> bool:
    """Whether an exit or return code field says the command failed: an integer (or integer
    text) other than 0. Anything else (missing, ``null``, text) is no signal."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return value != 0
    if isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
        return int(value) != 0
    return False
