"""Full-text search over each stored trace's task, run by the database's own engine.

Vectors find what a task is about; words find its entities (a reservation code, a user id, a
city), which a sentence vector blurs. Recall (:mod:`._recall`) fuses both. Each stored trace's
indexed text is its task text (:func:`knowledgepulse.tasks.task_text`: the objective, weighed
2.5 times the rest, then the user's turns) and its domain, kept in a table beside ``traces``
keyed by the row's ``seq``:

- SQLite: ``trace_text``, an FTS5 table (``unicode61`` tokenizer), ranked by ``bm25``, and
  ``trace_text_words``, its vocabulary (``fts5vocab``);
- PostgreSQL: ``trace_text`` (seq, a ``tsvector`` of the ``simple`` configuration) with a GIN
  index, ranked by ``ts_rank``.

Words are indexed as they are (lower case, no stemming) in both.

A query matches a trace holding any of its words (stop words left out: an ``OR`` of the rest),
the more and rarer the better. The index's scheme is recorded in ``kb_meta`` as
``text_index``; a base made before it, or with another scheme, is indexed the first time it is
written to or searched (a log line says how many stored traces were indexed). Where SQLite
was built without FTS5, recall is by vector alone and the log says so once.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from .._errors import KnowledgePulseError
from ._frame import SQLFrame
from ._keys import Viewer, visibility_clause

__all__ = [
    "FTS5",
    "POSTGRES_TEXT",
    "STOP_WORDS",
    "TEXT_SCHEME",
    "FullTextMixin",
    "TextEngine",
    "indexed_text",
    "query_terms",
]

logger = logging.getLogger("knowledgepulse")

#: What the index holds and how it is made: recorded in ``kb_meta`` as ``text_index``;
#: another value there means the index is made anew.
TEXT_SCHEME = "objective+task-text/1"
#: The most words of a query that are searched (a task description, not a document).
MAX_TERMS = 64
#: The most index entries one text search ranks (see :meth:`FullTextMixin.search_text`):
#: FTS5 ranks ~3 µs an entry on 2 busy cores, so 5,000 keep a search near 15 ms.
POSTINGS = 5_000
#: The most candidates a text search looks through for hits that pass the filters.
_SEARCH_WINDOW = 10_000
#: Stored traces indexed per page while migrating.
_PAGE = 500
#: Ids per ``IN (...)`` list.
_CHUNK = 500

#: English stop words (the Snowball list PostgreSQL's ``english`` configuration uses): a
#: query of nothing else asks for nothing, and these words match nearly every trace.
_STOP_WORDS = """i me my myself we our ours ourselves you your yours yourself yourselves he him his
    himself she her hers herself it its itself they them their theirs themselves what which
    who whom this that these those am is are was were be been being have has had having do
    does did doing a an the and but if or because as until while of at by for with about
    against between into through during before after above below to from up down in out on
    off over under again further then once here there when where why how all any both each
    few more most other some such no nor not only own same so than too very s t can will
    just don should now d ll m o re ve y ain aren couldn didn doesn hadn hasn haven isn ma
    mightn mustn needn shan shouldn wasn weren won wouldn"""
STOP_WORDS = frozenset(_STOP_WORDS.split())
_WORD = re.compile(r"\w+")


def query_terms(text: str) -> list[str]:
    """The words of ``text`` a full-text search looks for: lower case, each once, stop words
    and lone underscores left out, at most :data:`MAX_TERMS` (empty: nothing to look for)."""
    terms: dict[str, None] = {}
    for word in _WORD.findall(text.lower()):
        word = word.strip("_")
        if word and word not in STOP_WORDS:
            terms[word] = None
            if len(terms) == MAX_TERMS:
                break
    return list(terms)


def indexed_text(trace: Any) -> tuple[str, str]:
    """What is indexed of a stored trace (a mapping, as stored): its objective, and the rest of
    its task text (the user's turns) with its domain. A row that is no valid trace gives its
    objective alone; one without, empty texts."""
    from .._schema import ReasoningTrace
    from ..tasks import task_text

    if not isinstance(trace, dict):
        return "", ""
    metadata = trace.get("metadata")
    domain = metadata.get("task_domain") if isinstance(metadata, dict) else None
    task = trace.get("task")
    objective = task.get("objective") if isinstance(task, dict) else None
    objective = objective if isinstance(objective, str) else ""
    try:
        text = task_text(ReasoningTrace.model_validate(trace)).text
    except (ValueError, KnowledgePulseError):  # pydantic's ValidationError is a ValueError
        text = objective
    rest = text[len(objective) :] if text.startswith(objective) else text
    return objective[: len(text)], f"{rest}\n{domain}" if isinstance(domain, str) else rest


@dataclass(frozen=True)
class TextEngine:
    """How one database indexes and searches text."""

    #: A label for logs and docs.
    name: str
    #: The statements creating the index (``IF NOT EXISTS``), and dropping it.
    create: tuple[str, ...]
    drop: tuple[str, ...]
    #: The index's column holding the row's ``traces.seq``.
    key: str
    #: Inserting one row's text: (seq, objective, rest) parameters.
    insert: str
    #: How many indexed traces hold a word: (word,) parameters, one row of one count.
    frequency: str
    #: The best matches: (match, k) parameters; rows (id, rank), best first (ties: the
    #: older first).
    search: str
    #: The best matches by the index alone: (match, k) parameters; rows (the row's
    #: ``traces.seq``, rank), best first, as :attr:`search` orders them.
    search_keys: str = ""
    #: How many indexed traces hold each of several words, in one statement (``{marks}``:
    #: one placeholder a word); rows (word, count), none for a word no trace holds. Empty:
    #: :attr:`frequency` is asked word by word.
    frequencies: str = ""

    def match(self, terms: Sequence[str]) -> str:
        """The match expression for any of ``terms`` (words of word characters only)."""
        raise NotImplementedError

    def word(self, term: str) -> str:
        """The match expression for one word."""
        return self.match([term])


class _Fts5(TextEngine):
    def match(self, terms: Sequence[str]) -> str:
        return " OR ".join(f'"{term}"' for term in terms)

    def word(self, term: str) -> str:
        return term  # fts5vocab holds the words as the tokenizer made them


class _PostgresText(TextEngine):
    def match(self, terms: Sequence[str]) -> str:
        return " | ".join(f"'{term}'" for term in terms)


# Words as they are, no stemming, in both databases: on the tau-bench conversations the
# stemmed index found fewer same-task attempts (docs/mcp.md), and a word's count is then one
# look-up in the index's vocabulary. A query is a task description, so a word of the
# objective weighs 2.5 times one of the rest (PostgreSQL's weights A and B: 1.0 and 0.4).
FTS5 = _Fts5(
    name="SQLite FTS5",
    create=(
        "CREATE VIRTUAL TABLE IF NOT EXISTS trace_text USING fts5(objective, body, "
        "tokenize = 'unicode61')",
        "CREATE VIRTUAL TABLE IF NOT EXISTS trace_text_words USING fts5vocab(trace_text, row)",
    ),
    drop=("DROP TABLE IF EXISTS trace_text_words", "DROP TABLE IF EXISTS trace_text"),
    key="rowid",
    insert="INSERT INTO trace_text (rowid, objective, body) VALUES (?, ?, ?)",
    frequency="SELECT doc FROM trace_text_words WHERE term = ?",
    frequencies="SELECT term, doc FROM trace_text_words WHERE term IN ({marks})",
    # bm25 is lower for a better match. The best are taken from the index alone, then named.
    search="SELECT t.id, -x.rank FROM (SELECT rowid AS seq, bm25(trace_text, 2.5, 1.0) AS rank "
    "FROM trace_text WHERE trace_text MATCH ? ORDER BY rank, rowid LIMIT ?) AS x "
    "JOIN traces t ON t.seq = x.seq ORDER BY x.rank, x.seq",
    search_keys="SELECT rowid, -bm25(trace_text, 2.5, 1.0) FROM trace_text "
    "WHERE trace_text MATCH ? ORDER BY bm25(trace_text, 2.5, 1.0), rowid LIMIT ?",
)
POSTGRES_TEXT = _PostgresText(
    name="PostgreSQL full-text search",
    create=(
        "CREATE TABLE IF NOT EXISTS trace_text (seq bigint PRIMARY KEY, body tsvector NOT NULL)",
        "CREATE INDEX IF NOT EXISTS trace_text_body ON trace_text USING gin (body)",
    ),
    drop=("DROP TABLE IF EXISTS trace_text",),
    key="seq",
    insert="INSERT INTO trace_text (seq, body) VALUES (%s, "
    "setweight(to_tsvector('simple', %s), 'A') || setweight(to_tsvector('simple', %s), 'B')) "
    "ON CONFLICT (seq) DO NOTHING",
    frequency="SELECT count(*) FROM trace_text WHERE body @@ to_tsquery('simple', %s)",
    # Normalisation 1: the rank divided by 1 + log(the text's length), as bm25 prefers the
    # shorter of two texts holding the same words.
    search="SELECT t.id, x.rank FROM (SELECT seq, ts_rank(body, q.q, 1) AS rank "
    "FROM trace_text, to_tsquery('simple', %s) AS q(q) WHERE body @@ q.q "
    "ORDER BY rank DESC, seq LIMIT %s) AS x "
    "JOIN traces t ON t.seq = x.seq ORDER BY x.rank DESC, x.seq",
)


class FullTextMixin(SQLFrame):
    """Task texts indexed beside the traces (used by :class:`~._sql.SQLKnowledgeBase`)."""

    #: The backend's engine; None: the database has none.
    text_engine: ClassVar[TextEngine | None] = None
    _text_ready: bool = False
    #: Why there is no full-text search here (None: there is).
    _text_missing: str | None = None

    def _create_text_index(self, engine: TextEngine) -> str | None:
        """Create the index's tables; why they cannot be (None: made). Inside a write."""
        for statement in engine.create:
            self._execute(statement)
        return None

    # -- the index ----------------------------------------------------------------------------

    @property
    def full_text(self) -> str | None:
        """The engine that searches the stored tasks' words; None where the database has
        none (recall is then by vector alone)."""
        engine = self.text_engine
        if engine is None or self._text_missing is not None:
            return None
        return engine.name

    def _ensure_text(self, fresh: int = 0) -> None:
        """Create the text index and fill it for stored traces it lacks (all of them when
        another scheme made it); ``fresh`` of them were stored by the caller just now. Runs
        inside the caller's write transaction."""
        engine = self.text_engine
        if self._text_ready or engine is None:
            return
        recorded = self._meta().get("text_index")
        if recorded is not None and recorded != TEXT_SCHEME:
            logger.warning(
                "%s: the text index was made as %s; remaking it as %s",
                self.location,
                recorded,
                TEXT_SCHEME,
            )
            # Dropped before it is made: another scheme's tables may lack a column of this one.
            for statement in engine.drop:
                self._execute(statement)
        missing_reason = self._create_text_index(engine)
        if missing_reason is not None:
            self._text_missing = missing_reason
            logger.warning(
                "%s: no full-text search (%s); recall is by vector alone", self.location,
                missing_reason,
            )  # fmt: skip
            self._text_ready = True
            return
        missing = self._select(
            f"SELECT COUNT(*) FROM traces WHERE seq NOT IN (SELECT {engine.key} FROM trace_text)"
        )[0][0]
        if missing:
            if missing > fresh:
                logger.warning(
                    "%s: indexing the task text of %d stored traces for full-text search (%s)",
                    self.location,
                    missing - fresh,
                    engine.name,
                )
            self._index_missing(engine)
        if recorded != TEXT_SCHEME:
            m = self.dialect.mark
            self._execute(
                f"INSERT INTO kb_meta (key, value) VALUES ({m}, {m}) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                ["text_index", TEXT_SCHEME],
            )
        self._text_ready = True

    def _index_missing(self, engine: TextEngine) -> None:
        m = self.dialect.mark
        after = -1
        while True:
            rows = self._select(
                f"SELECT seq, trace FROM traces WHERE seq > {m} AND seq NOT IN "
                f"(SELECT {engine.key} FROM trace_text) ORDER BY seq LIMIT {_PAGE}",
                [after],
            )
            if not rows:
                return
            self._executemany(
                engine.insert,
                [(seq, *indexed_text(self.dialect.json_in(trace))) for seq, trace in rows],
            )
            after = rows[-1][0]

    def _store_new_texts(self, ids: Sequence[str]) -> None:
        """After an insert (inside its transaction): index the traces of ``ids`` just stored."""
        engine = self.text_engine
        if engine is None:
            return
        if not self._text_ready:
            self._ensure_text(len(ids))  # indexes every stored trace, these included
            return
        if self._text_missing is not None:
            return
        m = self.dialect.mark
        wanted = list(dict.fromkeys(ids))
        for start in range(0, len(wanted), _CHUNK):
            chunk = wanted[start : start + _CHUNK]
            marks = ",".join([m] * len(chunk))
            rows = self._select(
                f"SELECT seq, trace FROM traces WHERE id IN ({marks}) AND seq NOT IN "
                f"(SELECT {engine.key} FROM trace_text)",
                chunk,
            )
            self._executemany(
                engine.insert,
                [(seq, *indexed_text(self.dialect.json_in(trace))) for seq, trace in rows],
            )

    def _forget_texts(self) -> None:
        """Every trace was deleted (inside the caller's transaction)."""
        if self._text_ready and self._text_missing is None:
            self._execute("DELETE FROM trace_text")

    # -- searching ----------------------------------------------------------------------------

    def search_text(
        self,
        terms: Sequence[str],
        k: int,
        viewer: Viewer | None = None,
        *,
        success_only: bool = False,
        domain: str | None = None,
        min_value: float | None = None,
    ) -> list[tuple[str, float]]:
        """Up to ``k`` (id, rank) of the stored traces whose task holds any of ``terms``
        (:func:`query_terms`' words), best first, among those that ``viewer`` may see and that
        pass the filters (as :func:`~._recall.search_similar` takes them). Empty where the
        database has no full-text search.

        The index ranks every trace holding a word it is asked for, so the words asked for are
        the rarest whose traces add up to at most :data:`POSTINGS` (always the rarest one): a
        word in most traces weighs next to nothing in the rank and would cost the most. The
        search widens (from 2k, 4x at a time) until ``k`` pass the filters or the index has no
        more.
        """
        engine = self.text_engine
        if engine is None or not terms:
            return []
        if not self._text_ready:
            with self._write():
                self._ensure_text()
        if self._text_missing is not None:
            return []
        match = engine.match(self._affordable(engine, terms))
        width = 2 * k  # filters usually leave most: one query, seldom two
        while True:
            rows = self._text_hits(engine, match, width)
            passing = self.passing(
                [str(row[0]) for row in rows],
                viewer,
                success_only=success_only,
                domain=domain,
                min_value=min_value,
            )
            kept = [(str(i), float(rank)) for i, rank in rows if str(i) in passing]
            if len(kept) >= k or len(rows) < width or width >= _SEARCH_WINDOW:
                return kept[:k]
            width *= 4

    def _text_hits(self, engine: TextEngine, match: str, width: int) -> list[tuple[Any, Any]]:
        """The index's best ``width`` (id, rank) for ``match``, best first."""
        return self._select(engine.search, [match, width])

    def _affordable(self, engine: TextEngine, terms: Sequence[str]) -> list[str]:
        """The rarest of ``terms`` whose traces add up to at most :data:`POSTINGS` (at least
        the rarest one), in the query's order."""
        counts: dict[str, int] = dict.fromkeys(terms, 0)
        if engine.frequencies:
            words = {engine.word(term): term for term in terms}
            marks = ",".join([self.dialect.mark] * len(words))
            for word, count in self._select(engine.frequencies.format(marks=marks), list(words)):
                if word in words and count is not None:
                    counts[words[word]] = int(count)
        else:
            for term in terms:
                rows = self._select(engine.frequency, [engine.word(term)])
                counts[term] = int(rows[0][0]) if rows and rows[0][0] is not None else 0
        kept: set[str] = set()
        total = 0
        for term in sorted(terms, key=lambda t: (counts[t], terms.index(t))):
            if kept and total + counts[term] > POSTINGS:
                break
            kept.add(term)
            total += counts[term]
        return [term for term in terms if term in kept]

    def passing(
        self,
        ids: Sequence[str],
        viewer: Viewer | None = None,
        *,
        success_only: bool = False,
        domain: str | None = None,
        min_value: float | None = None,
    ) -> dict[str, tuple[float | None, bool]]:
        """Of ``ids``, those ``viewer`` may see that pass the filters: id -> (stored value,
        whether the run succeeded). One query per 500 ids, no trace read."""
        where, params = self._recall_filter(viewer, success_only, domain, min_value)
        m = self.dialect.mark
        found: dict[str, tuple[float | None, bool]] = {}
        wanted = list(dict.fromkeys(ids))
        for start in range(0, len(wanted), _CHUNK):
            chunk = wanted[start : start + _CHUNK]
            marks = ",".join([m] * len(chunk))
            rows = self._select(
                f"SELECT id, value, {self.dialect.success_sql} FROM traces "
                f"WHERE id IN ({marks}) AND {where}",
                [*chunk, *params],
            )
            for trace_id, value, succeeded in rows:
                found[str(trace_id)] = (None if value is None else float(value), bool(succeeded))
        return found

    def _recall_filter(
        self,
        viewer: Viewer | None,
        success_only: bool,
        domain: str | None,
        min_value: float | None,
    ) -> tuple[str, list[Any]]:
        """Recall's filters as an SQL condition on ``traces`` and its parameters."""
        m = self.dialect.mark
        where, params = visibility_clause(viewer, m)
        if success_only:
            where += f" AND {self.dialect.success_sql}"
        if domain is not None:
            where += f" AND domain = {m}"
            params.append(domain)
        if min_value is not None:
            where += f" AND value >= {m}"
            params.append(min_value)
        return where, params
