"""``kp_import.objective_from`` is one of the documented names, in every importer's output.

The names are the ``FROM_*`` constants of ``importers/_objective.py`` (``template:<name>`` for a
known template's extracted task) and the rows of the table in docs/importers.md ("The task
objective"); the two must agree, and every golden result under tests/data/importers may use
only them, so a format cannot invent its own wording ("user prompt", "sample.input").
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from knowledgepulse.importers import _objective

from ._util import DATA

DOCS = Path(__file__).parents[2] / "docs" / "importers.md"


def _documented() -> set[str]:
    """The names in the first column of the `objective_from` table of docs/importers.md."""
    text = DOCS.read_text(encoding="utf-8")
    section = text.split("## The task objective", 1)[1].split("\n## ", 1)[0]
    table = section.split("| `objective_from` | rule |", 1)[1].split("\n\n", 1)[0]
    names: set[str] = set()
    for row in table.splitlines()[2:]:
        first_cell = row.split("|")[1]
        names.update(re.findall(r"`([^`]+)`", first_cell))
    return names


def _values(data: Any) -> Iterator[str]:
    if isinstance(data, dict):
        for key, value in data.items():
            if key == "objective_from" and isinstance(value, str):
                yield value
            else:
                yield from _values(value)
    elif isinstance(data, list):
        for item in data:
            yield from _values(item)


def _golden_values() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in sorted(DATA.rglob("expected/*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        for value in _values(data):
            found.setdefault(value, set()).add(str(path.relative_to(DATA)))
    return found


def test_the_constants_are_the_documented_names() -> None:
    constants = set(_objective.OBJECTIVE_FROM_NAMES)
    templates = {_objective.TEMPLATE_PREFIX + name for name in _objective.TEMPLATES}
    assert _documented() == constants | templates


def test_every_golden_result_uses_only_documented_names() -> None:
    found = _golden_values()
    # The goldens are read at all (a wrong glob would pass vacuously): 58 of the 63 golden
    # files hold a trace (the other five, rejected records only); more come with new fixtures.
    assert len(set().union(*found.values())) >= 58
    undocumented = {value: sorted(files) for value, files in found.items()}
    for name in _documented():
        undocumented.pop(name, None)
    assert undocumented == {}
