"""How one SQL database spells what the shared knowledge-base SQL needs (:class:`Dialect`).

Below every module of the SQL frame (``_sql``, ``_keys``, ``_fulltext``, ``_copies``), which
all name it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["Dialect"]

FloatArray = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Dialect:
    """How one database spells what the shared SQL needs, and how values cross its driver."""

    #: The driver's placeholder: ``?`` or ``%s``.
    mark: str
    #: Case-insensitive ``LIKE``: ``LIKE`` in SQLite, ``ILIKE`` in PostgreSQL.
    like: str
    #: The expression for a stored trace's ``task.objective``.
    objective_sql: str
    #: The expression for a stored trace's own ``id``: the id as contributed, not the row's
    #: (which the service may have namespaced).
    trace_id_sql: str
    #: The ``traces`` column holding the vector.
    vector_column: str
    #: The statement inserting one ``traces`` row (id, trace, record, vector, value, domain,
    #: visibility, owner, org, source, added_at), skipping an id already stored.
    insert_trace: str
    #: A trace or record as the driver stores it, and back.
    json_out: Callable[[Any], Any]
    json_in: Callable[[Any], Any]
    #: A unit vector as the driver stores it, and back (float32).
    vector_out: Callable[[FloatArray], Any]
    vector_in: Callable[[Any], FloatArray]
    #: A stored time as ISO 8601 text (UTC, milliseconds, ``Z``).
    time_in: Callable[[Any], str]
    #: The column type of bytes (copy facets).
    blob_type: str = "BLOB"
    #: The condition that a stored trace's ``metadata.success`` is JSON ``true``.
    success_sql: str = "json_type(trace, '$.metadata.success') = 'true'"
