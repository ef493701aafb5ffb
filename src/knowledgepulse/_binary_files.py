"""Telling a binary file from a file of JSON records by its first bytes, and saying what it is.

A zip archive, an image or a database handed to ``kp`` is refused once, as a whole, naming
what it looks like (an Inspect AI ``.eval`` log is a zip archive), instead of one "not valid
UTF-8" rejection per line of noise.
"""

from __future__ import annotations

__all__ = ["SNIFF_BYTES", "binary_refusal", "looks_binary", "zip_archive"]

#: How many leading bytes are looked at.
SNIFF_BYTES = 4096

# Signatures at the start of a file, and what the file then is.
_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"PK\x03\x04", "a zip archive"),
    (b"PK\x05\x06", "a zip archive (empty)"),
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"%PDF-", "a PDF document"),
    (b"SQLite format 3\x00", "an SQLite database"),
    (b"PAR1", "a Parquet file"),
    (b"\x28\xb5\x2f\xfd", "a zstd-compressed file"),
    (b"BZh", "a bzip2-compressed file"),
    (b"\xfd7zXZ\x00", "an xz-compressed file"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (b"\x7fELF", "an executable"),
)


def zip_archive(head: bytes) -> bool:
    return head.startswith(b"PK\x03\x04") or head.startswith(b"PK\x05\x06")


def looks_binary(head: bytes) -> str | None:
    """What a file starting with ``head`` is when it is not text (``"a zip archive"``), else
    ``None``. Text files never hold NUL bytes; UTF-16 JSON would, and is named as such."""
    for signature, kind in _SIGNATURES:
        if head.startswith(signature):
            return kind
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "UTF-16 text (save it as UTF-8)"
    if b"\x00" in head:
        return "a binary file"
    return None


def binary_refusal(name: str, head: bytes) -> str | None:
    """The one rejection for a binary file (``None`` for a text file): what it looks like and,
    when kp reads it some other way, how."""
    kind = looks_binary(head)
    if kind is None:
        return None
    if zip_archive(head) and name.lower().endswith(".eval"):
        return (
            "this is an Inspect AI log (.eval, a zip archive), not JSON records: "
            "read it with 'kp import --from inspect' (or --from auto)"
        )
    return f"this is {kind}, not JSON records: the file is skipped as a whole"
