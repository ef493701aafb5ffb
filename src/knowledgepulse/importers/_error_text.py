"""The error heuristic: whether a tool result's text reads as a failure.

No source format marks every failed tool call, so a result also counts as failed when its text
looks like an error (the first step of the ``error_recovery`` rule, see :mod:`._builder`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["looks_like_error"]

_ERROR_WORDS = re.compile(
    r"^\W{0,3}(?:error|exception|traceback|fatal|failed|failure|not\s+found|"
    r"unknown\s+(?:action|tool|function|command))\b",
    re.IGNORECASE,
)
_EXCEPTION_NAME = re.compile(r"^\W{0,3}[A-Za-z_][\w.]*(?:Error|Exception)\b")
_HTTP_STATUS = re.compile(
    r"^\W{0,3}(?:(?:HTTP(?:/[\d.]+)?|status(?:\s+code)?:?)\s*[45]\d\d\b"
    r"|[45]\d\d\s+(?:bad request|unauthorized|payment required|forbidden|not found|"
    r"method not allowed|conflict|gone|too many requests|internal server error|bad gateway|"
    r"service unavailable|gateway timeout)\b)",
    re.IGNORECASE,
)
_TRACEBACK = "traceback (most recent call last)"
# Phrases that mean failure wherever they sit in the first line (shell and OS errors).
_FIRST_LINE_PHRASES = ("no such file or directory", "command not found", "permission denied")


def looks_like_error(text: str | None) -> bool:
    """Whether a tool result reads as a failure. Conservative: mostly the start of the text.

    True when the text starts (after up to three punctuation characters such as ``[`` or ``*``)
    with ``error``, ``exception``, ``traceback``, ``fatal``, ``failed``, ``failure``,
    ``not found`` or ``unknown action``/``tool``/``function``/``command`` (any case; tau-bench
    answers a call of a tool it lacks with "Unknown action NAME"), with an exception name
    (``ValueError``, ``requests.HTTPError``), or with an HTTP status of 400 or more
    (``HTTP 404``, ``status code: 500``, ``503 Service Unavailable``); when its first line
    says ``No such file or directory``, ``command not found`` or ``Permission denied``; when
    it holds a Python traceback anywhere.
    JSON text is judged by its content only: an object whose top-level ``error`` is set, whose
    ``is_error``/``isError`` is true, or whose ``status``/``status_code``/``statusCode`` is a
    number from 400 to 599.
    """
    if not text:
        return False
    stripped = text.strip()
    if stripped[:1] in ("{", "[") and stripped[-1:] in ("}", "]"):
        try:
            value = json.loads(stripped)
        except json.JSONDecodeError:
            pass  # not JSON after all: "[ERROR] disk full"
        else:
            return isinstance(value, dict) and _error_object(value)
    head = stripped[:300]
    if _ERROR_WORDS.match(head) or _EXCEPTION_NAME.match(head) or _HTTP_STATUS.match(head):
        return True
    if _TRACEBACK in text.lower():
        return True
    first_line = head.split("\n", 1)[0].lower()
    return any(phrase in first_line for phrase in _FIRST_LINE_PHRASES)


def _error_object(value: Mapping[str, Any]) -> bool:
    if value.get("error") not in (None, "", False, {}, []):
        return True
    if value.get("is_error") is True or value.get("isError") is True:
        return True
    for key in ("status", "status_code", "statusCode"):
        code = value.get(key)
        if isinstance(code, int) and not isinstance(code, bool) and 400 <= code <= 599:
            return True
    return False
