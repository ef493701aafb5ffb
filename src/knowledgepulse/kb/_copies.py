"""Copy facets in a knowledge base: which stored trace a new one is a copy of.

Two tables beside ``traces``, the same in SQLite and PostgreSQL:

- ``copy_facets`` (id, digest, signature, steps, messages): each stored trace's copy facet
  (:mod:`knowledgepulse.copies`); the signature is NULL for a trace with no word, the steps
  digest NULL where the steps do not identify the run;
- ``copy_bands`` (band, key, id): the LSH key of each band of each signature, indexed, so the
  candidates for a new signature are one indexed query.

The scheme that made them (:attr:`~knowledgepulse.copies.CopyScheme.label`) is recorded in
``kb_meta`` as ``copy_scheme``. A base made before copy facets existed, or with another
scheme, is migrated the first time copies are asked of it or written to it: the facets are
made from the stored traces (nothing else changes; a log line names both schemes).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..copies import DEFAULT_SCHEME as SCHEME
from ..copies import (
    EXACT,
    NEAR_COPY,
    CopyFacet,
    CopyMatch,
    band_keys,
    copy_facets,
    estimated_similarity,
    verbatim_share,
)
from ._frame import SQLFrame

__all__ = ["COPY_TABLES", "CopyStoreMixin"]

logger = logging.getLogger("knowledgepulse")

#: The statements creating the copy tables; ``{blob}`` is the dialect's binary type.
COPY_TABLES = (
    "CREATE TABLE IF NOT EXISTS copy_facets (id TEXT PRIMARY KEY, digest {blob} NOT NULL, "
    "signature {blob}, steps {blob}, messages {blob})",
    "CREATE INDEX IF NOT EXISTS copy_facets_digest ON copy_facets (digest)",
    "CREATE INDEX IF NOT EXISTS copy_facets_steps ON copy_facets (steps)",
    "CREATE TABLE IF NOT EXISTS copy_bands (band INTEGER NOT NULL, key BIGINT NOT NULL, "
    "id TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS copy_bands_key ON copy_bands (band, key)",
)
#: Stored traces read per page while migrating.
_PAGE = 500


def _signed(keys: np.ndarray) -> list[int]:
    """uint64 band keys as the signed 64-bit integers both databases store."""
    return [int(k) for k in np.asarray(keys, dtype=np.uint64).view(np.int64)]


class CopyStoreMixin(SQLFrame):
    """Copy facets stored beside the traces (used by :class:`~._sql.SQLKnowledgeBase`)."""

    _copies_ready: bool = False

    # -- the tables ---------------------------------------------------------------------------

    def _ensure_copies(self, fresh: int = 0) -> None:
        """Create the copy tables and fill them for stored traces that lack a facet (or whose
        facet another scheme made); ``fresh`` of them were stored by the caller just now.
        Runs inside the caller's write transaction."""
        if self._copies_ready:
            return
        for statement in COPY_TABLES:
            self._execute(statement.format(blob=self.dialect.blob_type))
        recorded = self._meta().get("copy_scheme")
        if recorded is not None and recorded != SCHEME.label:
            logger.warning(
                "%s: copy facets were made with %s; remaking them with %s",
                self.location,
                recorded,
                SCHEME.label,
            )
            # Made anew: another scheme's tables may lack a column of this one's.
            self._execute("DROP TABLE copy_bands")
            self._execute("DROP TABLE copy_facets")
            for statement in COPY_TABLES:
                self._execute(statement.format(blob=self.dialect.blob_type))
        missing = self._select(
            "SELECT COUNT(*) FROM traces WHERE id NOT IN (SELECT id FROM copy_facets)"
        )[0][0]
        if missing:
            if recorded is None and missing > fresh:
                logger.warning(
                    "%s: making the copy facets of %d stored traces (%s)",
                    self.location,
                    missing - fresh,
                    SCHEME.label,
                )
            self._fill_missing_facets()
        if recorded != SCHEME.label:
            m = self.dialect.mark
            self._execute(
                f"INSERT INTO kb_meta (key, value) VALUES ({m}, {m}) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                ["copy_scheme", SCHEME.label],
            )
        self._copies_ready = True

    def _fill_missing_facets(self) -> None:
        m = self.dialect.mark
        after = -1
        while True:
            rows = self._select(
                f"SELECT seq, id, trace FROM traces WHERE seq > {m} AND id NOT IN "
                f"(SELECT id FROM copy_facets) ORDER BY seq LIMIT {_PAGE}",
                [after],
            )
            if not rows:
                return
            self._store_facets([(row[1], self.dialect.json_in(row[2]), None) for row in rows])
            after = rows[-1][0]

    def _store_facets(self, items: Sequence[tuple[str, Any, CopyFacet | None]]) -> None:
        """Store the copy facets of ``(id, trace, facet)`` (a trace as stored: a mapping; its
        facet when the caller made it, else it is made here)."""
        from .._schema import ReasoningTrace, TraceValidationError

        given: dict[int, CopyFacet] = {}
        ids: list[str] = []
        traces: list[ReasoningTrace | None] = []
        for trace_id, trace, facet in items:
            if facet is not None:
                given[len(ids)] = facet
                traces.append(None)
            else:
                try:
                    traces.append(ReasoningTrace.model_validate(trace))
                except TraceValidationError:
                    continue  # a stored row that is no trace (a test's empty trace): no facet
            ids.append(trace_id)
        made = iter(copy_facets([t for t in traces if t is not None], SCHEME))
        facets = [given[i] if i in given else next(made) for i in range(len(ids))]
        m = self.dialect.mark
        self._executemany(
            "INSERT INTO copy_facets (id, digest, signature, steps, messages) "
            f"VALUES ({m}, {m}, {m}, {m}, {m}) ON CONFLICT (id) DO NOTHING",
            [
                (
                    trace_id,
                    facet.digest,
                    None if facet.signature is None else facet.signature.tobytes(),
                    facet.steps,
                    facet.messages,
                )
                for trace_id, facet in zip(ids, facets)
            ],
        )
        band_rows: list[tuple[int, int, str]] = []
        for trace_id, facet in zip(ids, facets):
            if facet.signature is None:
                continue
            keys = band_keys(facet.signature.reshape(1, -1), SCHEME)[0]
            band_rows.extend((band, key, trace_id) for band, key in enumerate(_signed(keys)))
        if band_rows:
            self._executemany(
                f"INSERT INTO copy_bands (band, key, id) VALUES ({m}, {m}, {m})", band_rows
            )

    def _store_new_facets(self, items: Sequence[tuple[str, Any, CopyFacet | None]]) -> None:
        """After an insert (inside its transaction): the facets of the traces just stored."""
        if not self._copies_ready:
            self._ensure_copies(len(items))  # fills every stored trace's, these included
            return
        wanted = {trace_id: (trace, facet) for trace_id, trace, facet in items}
        m = self.dialect.mark
        ids = list(wanted)
        have: set[str] = set()
        for start in range(0, len(ids), _PAGE):
            chunk = ids[start : start + _PAGE]
            marks = ",".join([m] * len(chunk))
            have.update(
                row[0]
                for row in self._select(f"SELECT id FROM copy_facets WHERE id IN ({marks})", chunk)
            )
        self._store_facets([(i, t, f) for i, (t, f) in wanted.items() if i not in have])

    # -- queries ------------------------------------------------------------------------------

    def stored_copy(
        self,
        facet: CopyFacet,
        similarity: float,
        readable: Callable[[str], bool] | None = None,
    ) -> CopyMatch | None:
        """The stored trace ``facet``'s trace is a copy of: an exact copy first (the smallest
        id), else the near copy of highest estimated similarity ≥ ``similarity`` (ties: the
        smallest id); None when there is none (or the trace has no word). ``readable``: only
        stored traces (by row id) it accepts count."""
        found = self.stored_copies(facet, similarity, 1, readable)
        return found[0] if found else None

    def stored_copies(
        self,
        facet: CopyFacet,
        similarity: float,
        k: int = 10,
        readable: Callable[[str], bool] | None = None,
    ) -> list[CopyMatch]:
        """Up to ``k`` stored copies of ``facet``'s trace: exact copies (by id), then near
        copies, most similar first (ties: by id)."""
        if facet.signature is None:
            return []
        if not self._copies_ready:
            with self._write():
                self._ensure_copies()
        m = self.dialect.mark
        keys = _signed(band_keys(facet.signature.reshape(1, -1), SCHEME)[0])
        where = " OR ".join([f"(band = {m} AND key = {m})"] * len(keys))
        params: list[Any] = [value for band, key in enumerate(keys) for value in (band, key)]
        rows = self._select(
            f"SELECT f.id, f.digest, f.signature, f.steps, f.messages FROM copy_facets f WHERE "
            f"f.digest = {m} OR f.steps = {m} OR "
            f"f.id IN (SELECT id FROM copy_bands WHERE {where})",
            [facet.digest, facet.steps, *params],
        )
        found: list[CopyMatch] = []
        for trace_id, digest, signature, steps, messages in rows:
            if signature is None or (readable is not None and not readable(str(trace_id))):
                continue
            if bytes(digest) == facet.digest:
                found.append(CopyMatch(str(trace_id), 1.0, EXACT))
                continue
            stored = np.frombuffer(bytes(signature), dtype=np.uint16)
            estimate = float(estimated_similarity(facet.signature, stored))
            # Same steps, at most a few messages verbatim alike: a reworded copy.
            reworded = (
                steps is not None
                and bytes(steps) == facet.steps
                and verbatim_share(bytes(messages or b""), facet.messages)
                <= SCHEME.reworded_verbatim
            )
            if estimate >= similarity or (reworded and estimate >= SCHEME.reworded):
                found.append(CopyMatch(str(trace_id), estimate, NEAR_COPY))
        found.sort(key=lambda match: (match.relation != EXACT, -match.similarity, match.id))
        return found[:k]

    def _forget_copies(self) -> None:
        """Every trace was deleted (inside the caller's transaction)."""
        if self._copies_ready:
            self._execute("DELETE FROM copy_bands")
            self._execute("DELETE FROM copy_facets")
