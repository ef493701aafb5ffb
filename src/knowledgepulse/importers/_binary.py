"""Binary and opaque payloads in logs, replaced by short placeholders.

Logs carry images, audio, files and encrypted blobs as base64 text (an image generation
result, a screenshot returned by a tool, a web search result's ``encrypted_content``). Kept as
text, one such payload is tens of kilobytes of noise in a step's content and in the embedded
text, so every importer replaces it with a placeholder that says what it was and how big:
``[image/png, 24 KB]``, ``[encrypted content, 3 KB]``. A payload stored elsewhere (a URL, a
file path, a file id) is named instead: ``[image/png: images/step_3.png]``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "ENCRYPTED",
    "base64_size",
    "binary_placeholder",
    "data_uri_placeholder",
    "looks_like_base64",
    "media_placeholder",
    "redact_binary",
    "reference_placeholder",
    "scrub_text",
    "scrub_value",
]

ENCRYPTED = "encrypted content"
# Shorter runs are left alone: ids, hashes and short tokens are text a reader may need.
MIN_BASE64_LENGTH = 256
# Keys whose values are opaque by definition, whatever they look like.
_OPAQUE_KEYS = frozenset({"encrypted_content", "encrypted_index", "encrypted_stdout"})

_BASE64_RUN = re.compile(rf"[A-Za-z0-9+/_-]{{{MIN_BASE64_LENGTH},}}={{0,2}}")
_DATA_URL = re.compile(r"data:([\w.+-]+/[\w.+-]+)?(?:;[\w=.+-]+)*;base64,([A-Za-z0-9+/=_\s-]*)")
# The first characters of the base64 of well-known file signatures.
_SIGNATURES = (
    ("iVBORw0KGgo", "image/png"),
    ("/9j/", "image/jpeg"),
    ("R0lGOD", "image/gif"),
    ("UklGR", "image/webp"),
    ("JVBERi0", "application/pdf"),
    ("SUQz", "audio/mpeg"),
    ("//u", "audio/mpeg"),
    ("T2dnUw", "audio/ogg"),
    ("UEsDB", "application/zip"),
)


def binary_placeholder(mime: str | None, size_bytes: int | None) -> str:
    """The text standing for a payload left out: ``[image/png, 24 KB]``.

    Args:
        mime: what the payload is (a MIME type, or words such as ``encrypted content``);
            ``None`` reads ``binary``.
        size_bytes: its size in bytes, decoded; ``None`` when unknown (then left out).
    """
    kind = mime or "binary"
    if size_bytes is None:
        return f"[{kind}]"
    return f"[{kind}, {_size_text(size_bytes)}]"


def reference_placeholder(mime: str | None, reference: str) -> str:
    """The text standing for a payload stored elsewhere: ``[image/png: images/step_3.png]``."""
    return f"[{mime or 'file'}: {reference}]"


def _size_text(size: int) -> str:
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{round(size / 1024)} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def base64_size(text: str) -> int:
    """The decoded size in bytes of base64 ``text`` (whitespace ignored)."""
    compact = "".join(text.split())
    return max(0, len(compact) * 3 // 4 - (len(compact) - len(compact.rstrip("="))))


def _sniff(text: str) -> str | None:
    return next((mime for prefix, mime in _SIGNATURES if text.startswith(prefix)), None)


def looks_like_base64(text: str) -> bool:
    """Whether ``text`` is a base64 payload: a ``data:`` URL, or (whitespace aside) at least
    :data:`MIN_BASE64_LENGTH` base64 characters mixing upper case, lower case and digits
    (hex digests and long words do not mix all three)."""
    stripped = text.strip()
    if _DATA_URL.fullmatch(stripped):
        return True
    compact = "".join(stripped.split())
    return _BASE64_RUN.fullmatch(compact) is not None and _mixed(compact)


def _mixed(run: str) -> bool:
    return (
        any(c.isupper() for c in run)
        and any(c.islower() for c in run)
        and any(c.isdigit() for c in run)
    )


def scrub_text(text: str) -> str:
    """``text`` with every base64 payload in it (``data:`` URLs and long base64 runs)
    replaced by a placeholder; other text is kept as it is."""
    if len(text) < MIN_BASE64_LENGTH:
        return text
    text = _DATA_URL.sub(
        lambda m: binary_placeholder(m.group(1) or _sniff(m.group(2)), base64_size(m.group(2))),
        text,
    )

    def run(match: re.Match[str]) -> str:
        payload = match.group(0)
        if not _mixed(payload):
            return payload
        return binary_placeholder(_sniff(payload), base64_size(payload))

    return _BASE64_RUN.sub(run, text)


#: How deep a value may nest below a step's input before it is cut: a record may nest 200
#: levels (the readers' limit), and a trace holds a step's input 4 levels down, so a deeper
#: value (JSON text a model wrote, parsed from tool-call arguments) could be neither written
#: back nor read again.
MAX_VALUE_DEPTH = 196


def scrub_value(value: Any, depth: int = 1) -> Any:
    """A JSON value with its payloads replaced: base64 text as :func:`scrub_text` does, and
    the values of opaque keys (``encrypted_content``, ...) by ``[encrypted content, N KB]``;
    what nests deeper than :data:`MAX_VALUE_DEPTH` levels (``value`` at ``depth``) by
    ``[nested deeper than 196 levels]``."""
    if isinstance(value, str):
        return scrub_text(value)
    if isinstance(value, (Mapping, list, tuple)) and depth >= MAX_VALUE_DEPTH:
        return f"[nested deeper than {MAX_VALUE_DEPTH} levels]"
    if isinstance(value, Mapping):
        return {
            key: (
                binary_placeholder(ENCRYPTED, base64_size(item))
                if key in _OPAQUE_KEYS and isinstance(item, str) and item
                else scrub_value(item, depth + 1)
            )
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [scrub_value(item, depth + 1) for item in value]
    return value


def media_placeholder(part: Mapping[str, Any]) -> str | None:
    """The placeholder of a media content part (image, audio, file, document) in the OpenAI,
    Anthropic or ATIF shape; ``None`` for any other part, or one that names no payload."""
    kind = part.get("type")
    if kind in ("image", "document"):
        return _from_source(part.get("source"), "image" if kind == "image" else "document")
    if kind in ("image_url", "input_image"):
        url = part.get("image_url")
        if isinstance(url, Mapping):
            url = url.get("url")
        return _from_url(url, "image") or _from_reference(None, part.get("file_id"))
    if kind == "input_audio":
        audio = part.get("input_audio")
        if isinstance(audio, Mapping) and isinstance(audio.get("data"), str):
            fmt = audio.get("format")
            return binary_placeholder(
                f"audio/{fmt}" if isinstance(fmt, str) else "audio", base64_size(audio["data"])
            )
        return None
    if kind in ("file", "input_file"):
        nested = part.get("file")
        file: Mapping[str, Any] = nested if isinstance(nested, Mapping) else part
        data = file.get("file_data")
        if isinstance(data, str) and data:
            if data.startswith("data:"):
                return _from_url(data, "file")
            return binary_placeholder(_sniff(data), base64_size(data))
        name = file.get("filename") or file.get("file_id") or file.get("file_url")
        return _from_reference(None, name)
    return None


def _from_source(source: Any, what: str) -> str | None:
    if not isinstance(source, Mapping):
        return None
    mime = source.get("media_type") if isinstance(source.get("media_type"), str) else None
    data = source.get("data")
    if isinstance(data, str) and data and source.get("type") in (None, "base64"):
        return binary_placeholder(mime or _sniff(data) or what, base64_size(data))
    if isinstance(data, str) and data:  # a text document
        return binary_placeholder(mime or what, len(data.encode("utf-8")))
    for key in ("path", "url", "file_id"):
        if isinstance(source.get(key), str) and source[key]:
            return reference_placeholder(mime or what, source[key])
    return None


def _from_url(url: Any, what: str) -> str | None:
    if not isinstance(url, str) or not url:
        return None
    match = _DATA_URL.fullmatch(url.strip())
    if match:
        mime = match.group(1) or _sniff(match.group(2)) or what
        return binary_placeholder(mime, base64_size(match.group(2)))
    return reference_placeholder(what, url)


def _from_reference(mime: str | None, reference: Any) -> str | None:
    if isinstance(reference, str) and reference:
        return reference_placeholder(mime, reference)
    return None


_BASE64_WHOLE = re.compile(r"^[A-Za-z0-9+/_-]+={0,2}$")
_DATA_URI_ANY = re.compile(r"^data:([\w.+-]+/[\w.+-]+)?((?:;[^,;]*)*?)(;base64)?,", re.IGNORECASE)
_MIME_KEYS = ("mime_type", "mimeType", "mediaType")


def data_uri_placeholder(uri: str) -> str | None:
    """The placeholder of a ``data:`` URI (base64 or not), or ``None`` when ``uri`` is not one."""
    match = _DATA_URI_ANY.match(uri)
    if match is None:
        return None
    payload = uri[match.end() :]
    size = base64_size(payload) if match.group(3) else len(payload)
    return binary_placeholder(match.group(1), size)


def redact_binary(value: Any) -> Any:
    """``value`` (JSON data) with every inline binary payload replaced by its placeholder:
    :func:`scrub_value`, plus ``data:`` URIs of any encoding and the base64 field of a media
    part (an object with a ``mime_type``/``mimeType``/``mediaType``) named by its type."""
    if isinstance(value, str):
        placeholder = data_uri_placeholder(value)
        if placeholder is not None:
            return placeholder
        if _is_base64_field(value):
            return binary_placeholder(None, base64_size(value))
        return scrub_value(value)
    if isinstance(value, Mapping):
        mime = next((value[k] for k in _MIME_KEYS if isinstance(value.get(k), str)), None)
        out: dict[str, Any] = {}
        for key, item in value.items():
            if mime is not None and isinstance(item, str) and _is_base64_field(item):
                out[key] = binary_placeholder(mime, base64_size(item))
            else:
                out[key] = redact_binary(item)
        return scrub_value(out) if mime is None else out
    if isinstance(value, (list, tuple)):
        return [redact_binary(item) for item in value]
    return value


def _is_base64_field(text: str) -> bool:
    """A whole JSON string that is long and all base64: a payload, not text (a field's value,
    unlike free text, needs no sniffing of mixed characters)."""
    return len(text) >= MIN_BASE64_LENGTH and _BASE64_WHOLE.match(text) is not None
