"""Each set of values is spelled once: no two ``Literal[...]`` of the same strings in the package.

A second spelling drifts from the first (a value added to one and not the other), so a set of
values used in two places is one named type (``NoveltySource``, ``Visibility``, ``Preference``)
that both import; a tuple of its values for a runtime check is ``typing.get_args`` of it.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "knowledgepulse"


def _literal_values(node: ast.Subscript) -> tuple[str, ...] | None:
    """The strings of a ``Literal["a", "b", ...]`` of two or more strings, else None."""
    if not (isinstance(node.value, ast.Name) and node.value.id == "Literal"):
        return None
    items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    values = [
        item.value
        for item in items
        if isinstance(item, ast.Constant) and isinstance(item.value, str)
    ]
    return tuple(values) if len(values) >= 2 and len(values) == len(items) else None


def literal_spellings(root: Path) -> dict[tuple[str, ...], list[str]]:
    """Every ``Literal`` of two or more strings under ``root``: its values -> file:line of each."""
    found: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Subscript) and (values := _literal_values(node)):
                found[values].append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_every_set_of_literal_values_is_spelled_once() -> None:
    twice = {
        values: places for values, places in literal_spellings(PACKAGE).items() if len(places) > 1
    }
    assert twice == {}


def test_a_second_spelling_is_found(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text('Kind = Literal["x", "y"]\n', encoding="utf-8")
    (tmp_path / "b.py").write_text(
        'def f(kind: Literal["x", "y"], flag: Literal[True]) -> Literal["z"]: ...\n',
        encoding="utf-8",
    )
    assert literal_spellings(tmp_path) == {("x", "y"): ["a.py:1", "b.py:1"]}
