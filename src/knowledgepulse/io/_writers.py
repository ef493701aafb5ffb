"""Writing output lines so that what was written stays whole and readable after any stop.

A :class:`LineWriter` writes one JSON line at a time. Plain files are written through a
buffer (whole lines reach the file when it is flushed or closed); ``.gz`` files are written as
a sequence of gzip members, one per flush, so that a file cut short by a kill still
decompresses up to its last member (a gzip reader reads concatenated members as one stream).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import sys
from pathlib import Path
from typing import IO, Any

__all__ = ["LineWriter", "OutputClosed", "dumps", "same_file"]

#: Bytes collected before a ``.gz`` output writes a member: large enough to compress well,
#: small enough that little is lost to a kill.
GZIP_MEMBER_BYTES = 1 << 20


class OutputClosed(Exception):
    """Standard output was closed by its reader (``kp score … | head``): stop, quietly."""


#: One encoder for every line: ``json.dumps`` with options builds a new one per call.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def dumps(record: Any) -> str:
    """One compact JSON line (no newline), UTF-8 text kept as is."""
    return _ENCODER.encode(record)


class LineWriter:
    """Whole lines to a file (``.gz`` compresses) or, for ``None`` or ``-``, to stdout."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.lines = 0
        self._stdout = path is None or path == "-"
        self._gzip = not self._stdout and str(path).lower().endswith(".gz")
        self._file: IO[bytes] | None = None
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        if not self._stdout:
            target = Path(str(path))
            target.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(target, "wb")  # noqa: SIM115 - closed in close()

    def write_line(self, text: str) -> None:
        """Write ``text`` and a newline. ``text`` must not contain a newline."""
        if self._stdout:
            try:
                sys.stdout.write(text + "\n")
            except BrokenPipeError:
                raise OutputClosed from None
        else:
            data = text.encode("utf-8", errors="backslashreplace") + b"\n"
            if self._gzip:
                self._pending.append(data)
                self._pending_bytes += len(data)
                if self._pending_bytes >= GZIP_MEMBER_BYTES:
                    self._write_member()
            else:
                assert self._file is not None
                self._file.write(data)
        self.lines += 1

    def write_json(self, record: Any) -> None:
        self.write_line(dumps(record))

    def flush(self) -> None:
        if self._stdout:
            try:
                sys.stdout.flush()
            except BrokenPipeError:
                raise OutputClosed from None
            return
        if self._gzip:
            self._write_member()
        assert self._file is not None
        self._file.flush()

    def close(self) -> None:
        if self._stdout:
            # The reader may have gone away; OutputClosed has said so already.
            with contextlib.suppress(BrokenPipeError):
                sys.stdout.flush()
            return
        if self._file is None:
            return
        try:
            if self._gzip:
                self._write_member()
        finally:
            self._file.close()
            self._file = None

    def _write_member(self) -> None:
        if not self._pending:
            return
        assert self._file is not None
        self._file.write(gzip.compress(b"".join(self._pending), compresslevel=6, mtime=0))
        self._pending.clear()
        self._pending_bytes = 0

    def __enter__(self) -> LineWriter:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def same_file(a: str, b: str) -> bool:
    """Whether two paths name the same file (existing or not); ``-`` is never a file."""
    if a == "-" or b == "-":
        return False
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)
