"""What a streaming ``kp curate`` keeps on disk instead of in memory: vectors and trace lines.

:class:`VectorSpool` holds unit vectors in an append-only float32 file, each row under the
digest of the text it embeds, so a run that stops (Ctrl-C, SIGTERM, a crash) leaves every
embedding made so far for the next run over the same work directory: a text already there is
not embedded again. The file is read back memory-mapped, so memory holds the pages in use,
never the whole pile. :class:`LineSpool` holds each trace's JSON line, so the kept ones are
copied out without keeping any trace in memory.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["DECIDER_DIR", "LineSpool", "VectorSpool", "text_digest"]

FloatArray = npt.NDArray[np.float32]

#: Bytes of the digest a vector is stored under: collisions are out of reach at any pile size.
DIGEST_SIZE = 16
_META, _VECTORS, _KEYS = "spool.json", "vectors.f32", "vectors.keys"


def text_digest(text: str) -> bytes:
    """The key a text's vector is stored under."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=DIGEST_SIZE).digest()


class VectorSpool:
    """Unit vectors on disk under their texts' digests, kept across runs of one work directory.

    Vectors made by another embedder (name or dimensions) are not reused: the spool starts
    over. A run stopped while appending leaves at most a partial last row, cut when reopened.

    Args:
        directory: the work directory (created if missing).
        embedder: the embedder's name, recorded with the vectors.
        dimensions: the vectors' length.
    """

    def __init__(self, directory: Path, embedder: str, dimensions: int) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.dimensions = dimensions
        self._row_bytes = 4 * dimensions
        meta = {"embedder": embedder, "dimensions": dimensions}
        meta_path = directory / _META
        if _read_meta(meta_path) != meta:
            for name in (_VECTORS, _KEYS):
                (directory / name).unlink(missing_ok=True)
            meta_path.write_text(json.dumps(meta) + "\n")
        self._rows: dict[bytes, int] = {}
        self.size = self._load()
        self.stored_before = self.size  # rows an earlier run left
        self._vectors = open(directory / _VECTORS, "ab")  # noqa: SIM115  (closed by close())
        self._keys = open(directory / _KEYS, "ab")  # noqa: SIM115
        self._map: np.memmap[Any, np.dtype[np.float32]] | None = None

    def _load(self) -> int:
        vectors, keys = self.directory / _VECTORS, self.directory / _KEYS
        if not vectors.exists() or not keys.exists():
            vectors.write_bytes(b"")
            keys.write_bytes(b"")
            return 0
        rows = min(vectors.stat().st_size // self._row_bytes, keys.stat().st_size // DIGEST_SIZE)
        # Cut what a stop left half-written: a vector without its key, or part of a row.
        os.truncate(vectors, rows * self._row_bytes)
        os.truncate(keys, rows * DIGEST_SIZE)
        with keys.open("rb") as stream:
            for row in range(rows):
                self._rows.setdefault(stream.read(DIGEST_SIZE), row)
        return rows

    def row_of(self, digest: bytes) -> int | None:
        """The row holding the vector of the text with ``digest``, if there is one."""
        return self._rows.get(digest)

    def append(self, digests: list[bytes], vectors: FloatArray) -> list[int]:
        """Store ``vectors`` (unit rows) under ``digests``; their rows."""
        rows = np.ascontiguousarray(vectors, dtype=np.float32).reshape(len(digests), -1)
        self._vectors.write(rows.tobytes())
        self._vectors.flush()
        # Keys after vectors: a key on disk always has its vector.
        self._keys.write(b"".join(digests))
        self._keys.flush()
        placed = []
        for digest in digests:
            self._rows.setdefault(digest, self.size)
            placed.append(self.size)
            self.size += 1
        return placed

    def fill(
        self, texts: list[str], embed: Callable[[list[str]], FloatArray], batch_size: int
    ) -> tuple[list[int], int, int]:
        """The rows of ``texts``' vectors, ``embed`` called (``batch_size`` texts at most per
        call) on each text without one, once: a text met again takes the row made for it.
        Returns the rows, the texts embedded, and the texts whose row an earlier run left."""
        digests = [text_digest(text) for text in texts]
        missing: dict[bytes, str] = {}
        reused = 0
        for digest, text in zip(digests, texts):
            row = self.row_of(digest)
            if row is None:
                missing.setdefault(digest, text)
            elif row < self.stored_before:
                reused += 1
        keys, made = list(missing), list(missing.values())
        for start in range(0, len(made), batch_size):
            batch = made[start : start + batch_size]
            self.append(keys[start : start + len(batch)], embed(batch))
        rows = [self._rows[digest] for digest in digests]
        return rows, len(made), reused

    def matrix(self) -> np.memmap[Any, np.dtype[np.float32]]:
        """Every row, memory-mapped (read-only); call again after appending."""
        if self._map is None or self._map.shape[0] != self.size:
            self._vectors.flush()
            self._map = np.memmap(
                self.directory / _VECTORS, np.float32, "r", shape=(self.size, self.dimensions)
            )
        return self._map

    def rows(self, positions: list[int]) -> FloatArray:
        """The rows at ``positions`` (a copy)."""
        return np.asarray(self.matrix()[positions], dtype=np.float32)

    def close(self) -> None:
        self._map = None
        self._vectors.close()
        self._keys.close()


def _read_meta(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


class LineSpool:
    """Trace lines appended to a file, copied out later by offset (in any order)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._out = path.open("wb")
        self.size = 0

    def append(self, line: str) -> tuple[int, int]:
        """Store one line (no newline); its offset and length in bytes."""
        data = line.encode("utf-8", errors="surrogatepass")
        offset = self.size
        self._out.write(data)
        self.size += len(data)
        return offset, len(data)

    def finish(self) -> None:
        self._out.close()

    def copy(self, places: Iterable[tuple[int, int]], write: Any) -> None:
        """Call ``write(line)`` for the lines at ``places`` (offset, length), in that order."""
        with self.path.open("rb") as source:
            for offset, length in places:
                source.seek(offset)
                write(source.read(length).decode("utf-8", errors="surrogatepass"))


def copy_out(
    work_dir: Path,
    lines: LineSpool,
    places: Iterable[tuple[int, int]],
    kept_line: Any,
    group_line: Any,
) -> None:
    """Write a streaming curation's outputs: its groups (``groups.jsonl`` in ``work_dir``,
    line by line) to ``group_line``, then the kept traces' lines at ``places`` (offset,
    length; in input order) to ``kept_line``."""
    with (work_dir / "groups.jsonl").open(encoding="utf-8", errors="surrogatepass") as groups:
        for line in groups:
            group_line(line.rstrip("\n"))
    lines.copy(places, kept_line)


#: The files of a streaming curation's work directory that a re-run makes again.
SCRATCH_FILES = ("traces.jsonl", "canonical.f32", "near.pos", "near.cos", "groups.jsonl")
#: Every file a streaming curation writes in its work directory.
WORK_FILES = (_META, _VECTORS, _KEYS, *SCRATCH_FILES)
#: The sub-directory holding the deciding embedder's vectors when a first pass proposes.
DECIDER_DIR = "decider"


def remove_work_dir(directory: Path) -> None:
    """Remove the files a finished run wrote in ``directory``, and the directory once empty
    (nothing else in it is touched: it may be a directory the user named)."""
    for name in (_META, _VECTORS, _KEYS):
        (directory / DECIDER_DIR / name).unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        (directory / DECIDER_DIR).rmdir()
    for name in WORK_FILES:
        (directory / name).unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # something else is in it: it stays
        directory.rmdir()
