"""The shape holds: no package imports one above it, and docs/architecture.md names every one.

The layers (docs/architecture.md), bottom to top; a package may import its own layer and the
layers below it. Imports inside functions count too: they are how a lower layer would reach up.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "knowledgepulse"
ARCHITECTURE = ROOT / "docs" / "architecture.md"

LAYERS: list[set[str]] = [
    {"_errors", "_lazy", "_schema", "io"},  # contracts
    {"embedding", "copies", "tasks"},
    {"memory", "kb"},
    {
        "scoring",
        "importers",
        "rubrics",
        "behaviours",
        "compare",
        "redaction",
        "records",
        "api_models",
    },
    {"integrations", "reporting"},
    {"cli", "service", "viewer", "mcp_server", "distributed", "__main__"},  # shells
]
# The package's face and two re-exports kept for their public module paths.
FACES = {"__init__", "otel_events", "pytest_plugin"}
_RELATIVE = re.compile(r"^\s*from (\.+)([\w.]*) import", re.M)


def _entries() -> set[str]:
    return {
        path.name.removesuffix(".py")
        for path in PACKAGE.iterdir()
        if (path.is_dir() and (path / "__init__.py").exists()) or path.suffix == ".py"
    }


def _layer(entry: str) -> int:
    return next(n for n, layer in enumerate(LAYERS) if entry in layer)


def _imports() -> set[tuple[str, str, str]]:
    """(importing entry, imported entry, file) for every relative import across entries."""
    found = set()
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE).parent.parts)
        entry = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
        for match in _RELATIVE.finditer(path.read_text(encoding="utf-8")):
            up = len(match.group(1)) - 1
            target = parts[: len(parts) - up] + [p for p in match.group(2).split(".") if p]
            if target and target[0] != entry:
                found.add((entry, target[0].removesuffix(".py"), str(path.relative_to(ROOT))))
    return found


def test_every_entry_has_a_layer() -> None:
    placed = set().union(*LAYERS) | FACES
    assert sorted(_entries() - placed) == []
    assert sorted(placed - _entries()) == []


def test_no_package_imports_one_above_it() -> None:
    upward = sorted(
        f"{where}: {entry} (layer {_layer(entry)}) imports {target} (layer {_layer(target)})"
        for entry, target, where in _imports()
        if entry not in FACES and target not in FACES and _layer(target) > _layer(entry)
    )
    assert upward == []


@pytest.mark.parametrize("entry", sorted(_entries() - {"__init__"}))
def test_architecture_page_names_every_package(entry: str) -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    is_package = (PACKAGE / entry).is_dir()
    name = f"`{entry}/`" if is_package else f"`{entry}.py`"
    assert name in text or f"knowledgepulse.{entry}" in text, f"docs/architecture.md: {name}"
