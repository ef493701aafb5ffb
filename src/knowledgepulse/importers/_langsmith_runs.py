"""LangSmith runs linked into trees: :func:`plant_trees`.

A LangSmith export is a run tree (a root with nested ``child_runs``) or a flat list of runs
(``list_runs()``, one per line or in a list), each naming its ``parent_run_id`` and ``trace_id``.
The runs of a flat list are linked to their parents. Runs of one trace whose parent is not in
the input (a filtered ``list_runs()``, a lost line) stay one trace: they are put under the
trace's root when it is there, else under a stand-in root named by the ``trace_id``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from knowledgepulse.io._reader import json_type_name

from ._values import ConversionError

__all__ = ["RunTree", "is_langsmith_batch", "plant_trees", "trace_key"]

# The fields of a run that say a batch element is a LangSmith run (a patch may hold only its
# id and what completes the run).
_RUN_KEYS = frozenset(
    {"run_type", "trace_id", "dotted_order", "parent_run_id", "end_time", "outputs"}
)


@dataclass
class RunTree:
    """A root run with its descendants, and where each of its runs is in the input."""

    root: dict[str, Any]
    path: str
    # Runs of one trace share it: the root's trace_id, else its id.
    key: str
    # The input documents (numbered by the caller) its runs came from, in order.
    origins: list[int]
    # id() of each run placed under its parent -> that run's path in the input.
    paths: dict[int, str]


@dataclass
class _Node:
    run: dict[str, Any]
    path: str
    origin: int
    children: list[_Node] = field(default_factory=list)


def plant_trees(
    runs: Iterable[tuple[Any, str, int]],
) -> tuple[list[RunTree], list[tuple[int, ConversionError]]]:
    """The run trees of a flat list of runs, each given with its path and origin.

    Runs are linked to their parent by ``parent_run_id``; a run whose parent is not in the
    list is a root (and so is one in a cycle of parents). Roots of one ``trace_id`` are one
    tree (:func:`_join_orphans`). A run that is not an object is a problem of its origin.
    Trees come in the order of their roots.
    """
    nodes: list[_Node] = []
    problems: list[tuple[int, ConversionError]] = []
    for run, path, origin in runs:
        if isinstance(run, Mapping):
            nodes.append(_Node(dict(run), path, origin))
        else:
            problems.append(
                (origin, ConversionError(path, f"expected an object, got {json_type_name(run)}"))
            )
    by_id: dict[str, _Node] = {}
    for node in nodes:
        if node.run.get("id") is not None:
            by_id.setdefault(str(node.run["id"]), node)
    parents: dict[int, _Node] = {}
    for node in nodes:
        parent_id = node.run.get("parent_run_id")
        parent = by_id.get(str(parent_id)) if parent_id is not None else None
        if parent is not None and parent is not node:
            parent.children.append(node)
            parents[id(node)] = parent
    roots = [node for node in nodes if id(node) not in parents]
    reached = {id(n) for root in roots for n in _descendants(root)}
    for node in nodes:
        if id(node) not in reached:  # a cycle of parents: cut it here
            parents[id(node)].children.remove(node)
            roots.append(node)
            reached.update(id(n) for n in _descendants(node))
    position = {id(node): n for n, node in enumerate(nodes)}
    roots.sort(key=lambda node: position[id(node)])
    trees: list[RunTree] = []
    for root in _join_orphans(roots):
        paths: dict[int, str] = {}
        run = _materialise(root, paths)
        origins = list(dict.fromkeys(n.origin for n in _descendants(root)))
        trees.append(RunTree(run, root.path, trace_key(run, len(trees)), origins, paths))
    return trees, problems


def _join_orphans(roots: list[_Node]) -> list[_Node]:
    """One root per ``trace_id``: runs whose parent is missing go under the trace's own root
    (the run without a parent) when it is there, else under a stand-in ``chain`` run whose
    ``id`` is the ``trace_id``. Roots without a ``trace_id`` stay as they are."""
    groups: dict[str, list[_Node]] = {}
    for root in roots:
        trace_id = root.run.get("trace_id")
        if trace_id is not None:
            groups.setdefault(str(trace_id), []).append(root)
    joined: list[_Node] = []
    placed: set[int] = set()
    for root in roots:
        trace_id = root.run.get("trace_id")
        group = groups.get(str(trace_id)) if trace_id is not None else None
        if group is None or len(group) == 1:
            joined.append(root)
            continue
        if id(group[0]) in placed:
            continue
        placed.add(id(group[0]))
        top = next((n for n in group if n.run.get("parent_run_id") is None), None)
        if top is None:
            first = group[0]
            stand_in = {"id": str(trace_id), "trace_id": trace_id, "run_type": "chain"}
            joined.append(_Node(stand_in, first.path, first.origin, children=group))
        else:
            top.children.extend(n for n in group if n is not top)
            joined.append(top)
    return joined


def _descendants(node: _Node) -> Iterator[_Node]:
    yield node
    for child in node.children:
        yield from _descendants(child)


def _materialise(node: _Node, paths: dict[int, str]) -> dict[str, Any]:
    """The node's run with its linked children appended to its ``child_runs``."""
    run = node.run
    if node.children:
        children = []
        for child in node.children:
            child_run = _materialise(child, paths)
            paths[id(child_run)] = child.path
            children.append(child_run)
        own = run.get("child_runs")
        if own is None or isinstance(own, list):
            run["child_runs"] = [*(own or []), *children]
    return run


def trace_key(root: Mapping[str, Any], position: int) -> str:
    """The key runs of one trace share: the root's ``trace_id``, else its ``id``, else its
    position (runs without either are never merged)."""
    for key in ("trace_id", "id"):
        if root.get(key) is not None:
            return str(root[key])
    return f"#{position}"


def is_langsmith_batch(record: Any) -> bool:
    """Whether ``record`` is a ``{post, patch}`` batch: an object whose keys are ``post`` and/or
    ``patch`` (nothing else), each a list, and whose first run has an ``id`` and a LangSmith run
    field (``run_type``, ``trace_id``, ``dotted_order``, ``parent_run_id``, ``end_time`` or
    ``outputs``)."""
    if not isinstance(record, Mapping) or not record or not set(record) <= {"post", "patch"}:
        return False
    if not all(isinstance(value, list) for value in record.values()):
        return False
    runs = [run for key in ("post", "patch") for run in record.get(key) or []]
    if not runs:
        return False
    first = runs[0]
    return isinstance(first, Mapping) and "id" in first and bool(_RUN_KEYS & set(first))
