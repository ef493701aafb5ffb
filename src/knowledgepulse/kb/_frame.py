"""What the SQL base provides to the mixins that store facets beside its traces
(:mod:`._copies`, :mod:`._fulltext`, :mod:`._openings`): declared once here, defined by
:class:`~._sql.SQLKnowledgeBase`, which comes first in their order of resolution."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar


class SQLFrame:
    """The SQL base's statements and facts, as the facet mixins call them."""

    location: str
    dialect: ClassVar[Any]

    def _select(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        raise NotImplementedError

    def _executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> int:
        raise NotImplementedError

    def _write(self) -> Any:
        raise NotImplementedError

    def _meta(self) -> dict[str, str]:
        raise NotImplementedError

    @property
    def dimensions(self) -> int:
        raise NotImplementedError
