"""Reading source values with the path of each field, so an error can name it.

Every importer reads its input through these helpers: a value of the wrong kind raises a
:class:`ConversionError` whose path says where it is (``traj[3].tool_calls[0].function``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from knowledgepulse._errors import KnowledgePulseError
from knowledgepulse._schema import TraceValidationError, ValidationProblem
from knowledgepulse.io._reader import json_type_name

from ._binary import media_placeholder, scrub_value

__all__ = [
    "TEXT_PART_TYPES",
    "ConversionError",
    "at",
    "content_text",
    "expect_dict",
    "expect_list",
    "expect_str",
    "join_path",
    "parse_arguments",
    "parse_timestamp",
    "stable_hash",
    "stringify",
]


class ConversionError(KnowledgePulseError, ValueError):
    """A source record cannot be converted. ``path`` names the offending field.

    The message reads ``traj[3].tool_calls[0].function.arguments: not valid JSON``.
    ``problems`` lists every problem found (one, unless the error wraps a
    :class:`~knowledgepulse.TraceValidationError` or several broken traces of one record),
    each with its ``path`` and ``message``; ``str(problem)`` reads ``path: message``.
    """

    def __init__(
        self, path: str, reason: str, *, problems: Sequence[ValidationProblem] | None = None
    ) -> None:
        self.path = path
        self.reason = reason
        self.problems: list[ValidationProblem] = (
            list(problems) if problems else [ValidationProblem(path=path, message=reason)]
        )
        super().__init__(f"{path}: {reason}" if path else reason)

    @classmethod
    def from_validation(cls, error: TraceValidationError) -> ConversionError:
        """The problems of a trace that failed validation, each kept with its own path."""
        return cls("", str(error), problems=error.problems)

    def under(self, prefix: str) -> ConversionError:
        """This error for a record found at ``prefix``: every path is put under it."""
        if not prefix:
            return self
        return ConversionError(
            join_path(prefix, self.path),
            self.reason,
            problems=[
                ValidationProblem(path=join_path(prefix, p.path), message=p.message)
                for p in self.problems
            ],
        )

    @classmethod
    def merged(cls, errors: Sequence[ConversionError]) -> ConversionError:
        """One error listing the problems of several; its message is the first one's."""
        first = errors[0]
        return cls(first.path, first.reason, problems=[p for e in errors for p in e.problems])


class NotARun(ConversionError):
    """A source trace that is not an agent run (a trace of embedding calls or of a workflow
    being built, in a span file beside the runs): nothing is wrong with it, it holds no run.
    Readers of a whole file count it and name it (:attr:`~._stream.Conversion.not_runs`)
    instead of rejecting it; alone, it is an error like any other."""


def at(path: str, key: str | int) -> str:
    """``at("traj", 3)`` -> ``traj[3]``; ``at("traj[3]", "content")`` -> ``traj[3].content``.

    A path ending in ``": "`` is a label (``"line 17: "``): the key follows it directly.
    """
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path and not path.endswith(": ") else f"{path}{key}"


def join_path(prefix: str, path: str) -> str:
    """``path`` (relative to a value) as seen from the value's container at ``prefix``:
    ``join_path("[17]", "run_type")`` -> ``[17].run_type``."""
    if not path:
        return prefix
    if not prefix or path.startswith("["):
        return prefix + path
    return at(prefix, path)


def expect_dict(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise ConversionError(path, f"expected an object, got {json_type_name(value)}")
    return dict(value)


def expect_list(value: Any, path: str) -> list[Any]:
    if not isinstance(value, (list, tuple)):
        raise ConversionError(path, f"expected an array, got {json_type_name(value)}")
    return list(value)


def expect_str(value: Any, path: str, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise ConversionError(path, f"expected a string, got {json_type_name(value)}")
    if not allow_empty and not value.strip():
        raise ConversionError(path, "must be a non-empty string")
    return value


# Content parts whose text is the message's text, across the OpenAI, Anthropic and ATIF shapes.
TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text", "summary_text", "reasoning_text"})


def content_text(content: Any, path: str | None = None, *, result: bool = False) -> str:
    """The text of a message's (or, with ``result``, a tool result's) ``content``.

    ``None`` is the empty string and text is itself. In an array of parts, strings and the
    text of text parts (:data:`TEXT_PART_TYPES`; a ``refusal`` part's refusal) are joined by
    newlines; other parts (images, files) are left out, except in a tool ``result``, where a
    media part that names its payload reads as a placeholder (``[image/png, 24 KB]``,
    :func:`~._binary.media_placeholder`). A tool ``result`` that holds no text part, or that
    is any other value, is kept as compact JSON (payloads replaced, :func:`stringify`).

    With a ``path`` the content is checked: a part that is not an object, a text part whose
    text is not a string, or (for a message) content that is neither text nor an array is a
    :class:`ConversionError` naming its path. Without one, such parts are skipped.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, (list, tuple)):
        if result or path is None:
            return stringify(content)
        raise ConversionError(
            path, f"expected a string or an array of parts, got {json_type_name(content)}"
        )
    texts: list[str] = []
    for index, part in enumerate(content):
        text = _part_text(part, None if path is None else at(path, index), result=result)
        if text is not None:
            texts.append(text)
    if result and not texts and content:
        return stringify(content)
    return "\n".join(texts)


def _part_text(part: Any, path: str | None, *, result: bool) -> str | None:
    """The text of one content part for :func:`content_text`; None: the part has none."""
    if isinstance(part, str):
        return part
    if not isinstance(part, Mapping):
        if path is not None:
            expect_dict(part, path)
        return None
    kind = part.get("type")
    if isinstance(kind, str) and kind in TEXT_PART_TYPES:
        text = part.get("text")
        if path is not None:
            return expect_str(text, at(path, "text"), allow_empty=True)
        return text if isinstance(text, str) else None
    if kind == "refusal" and isinstance(part.get("refusal"), str):
        refusal: str = part["refusal"]
        return refusal
    if result:
        return media_placeholder(part)
    return None


def parse_arguments(raw: Any, path: str, *, lenient: bool = False) -> dict[str, Any]:
    """Tool-call arguments as an object: a mapping, or JSON text of an object.

    Missing or empty arguments are ``{}``. With ``lenient`` (formats whose arguments are free
    text, such as span attributes), anything else is kept as ``{"input": value}``; otherwise it
    is a :class:`ConversionError` naming ``path``.
    """
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    if isinstance(raw, Mapping):
        return dict(raw)
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            if lenient:
                return {"input": raw}
            raise ConversionError(path, "not valid JSON") from None
        if isinstance(value, dict):
            return value
        if lenient:
            return {"input": value}
        raise ConversionError(path, f"expected a JSON object, got {json_type_name(value)}")
    if lenient:
        return {"input": raw}
    raise ConversionError(path, f"expected an object or JSON text, got {json_type_name(raw)}")


def stringify(value: Any) -> str:
    """Text as is; anything else as compact JSON (``None`` is the empty string), its binary
    and opaque payloads replaced by placeholders (:func:`~._binary.scrub_value`)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(scrub_value(value), ensure_ascii=False, default=str)


def parse_timestamp(value: Any) -> datetime | None:
    """A datetime from ISO 8601 text, Unix seconds, or Unix nanoseconds; ``None`` if unreadable."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return None
        if text.isdigit():
            return parse_timestamp(int(text))
        try:
            parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return None
        return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=timezone.utc)
    if isinstance(value, (int, float)):
        seconds = float(value)
        if seconds > 1e17:  # nanoseconds (OTLP)
            seconds /= 1e9
        elif seconds > 1e14:  # microseconds
            seconds /= 1e6
        elif seconds > 1e11:  # milliseconds
            seconds /= 1e3
        try:
            return datetime.fromtimestamp(seconds, tz=timezone.utc)
        except (OverflowError, OSError, ValueError):
            return None
    return None


def stable_hash(record: Any) -> str:
    """A hash of the record's content that is the same on every run and machine."""
    text = json.dumps(
        record, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
