"""LangSmith ingestion batches → runs: :func:`merge_batches`, :func:`langsmith_batch_traces`.

What the LangSmith SDK sends to ``POST /runs/batch`` (and what people save from it) is
``{"post": [run, ...], "patch": [run, ...]}``: a run is created by a ``post`` and completed
(``outputs``, ``end_time``, ``error``) by a ``patch`` with the same ``id``, in the same batch or
a later one. One file is one stream of batches: the posts and patches of all its batches are
merged by run ``id`` (patch fields win; a post field stays where the patch lacks it or holds
``null``), then the merged runs are linked into trees as a flat run list is
(:func:`~._langsmith_runs.plant_trees`) and each root run's tree becomes a trace.

A patch whose run was never posted in the file is rejected, naming the run id: without its post
the run has no type, name or inputs, so it cannot be placed in a trace (its post may have been
sent before the file was saved).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from knowledgepulse._schema import ReasoningTrace
from knowledgepulse.io._reader import json_type_name

from ._detect import detect_format
from ._langsmith_runs import RunTree, plant_trees
from ._options import ImportOptions, resolve_options
from ._values import ConversionError, at
from .langsmith import convert_tree

__all__ = [
    "MergedBatches",
    "batch_trees",
    "langsmith_batch_traces",
    "merge_batches",
]

_BATCH_KEYS = ("post", "patch")
_NOT_A_BATCH = (
    'not a LangSmith ingestion batch (expected {"post": [run, ...], "patch": [run, ...]})'
)


@dataclass
class MergedBatches:
    """The runs of a stream of batches, posts and patches merged by run ``id``."""

    # Each merged run in the order of its post, with its post's path and origin.
    runs: list[tuple[dict[str, Any], str, int]] = field(default_factory=list)
    # (origin of a post, origin of a patch of that run): records that hold one run.
    joins: list[tuple[int, int]] = field(default_factory=list)
    # Each problem with its origin.
    problems: list[tuple[int, ConversionError]] = field(default_factory=list)


def merge_batches(batches: Iterable[tuple[Any, str, int]]) -> MergedBatches:
    """The runs of a stream of batches, each batch given with its path and origin.

    Problems: a batch that is not a ``{post, patch}`` object, a run that is not an object or
    has no ``id``, a patch of a run never posted.
    """
    merged = MergedBatches()
    posted: dict[str, tuple[dict[str, Any], int]] = {}
    patches: list[tuple[Mapping[str, Any], str, int]] = []
    for batch, path, origin in batches:
        for key, run, run_path, problem in _batch_runs(batch, path):
            run_id = str(run.get("id"))
            if problem is not None:
                merged.problems.append((origin, problem))
            elif key == "patch" or run_id in posted:
                # A second post of one run (a retried batch) is applied as a patch.
                patches.append((run, run_path, origin))
            else:
                posted[run_id] = (dict(run), origin)
                merged.runs.append((posted[run_id][0], run_path, origin))
    # Patches are applied after every post is read: a patch may come before its post when
    # batches were saved out of order.
    for run, run_path, origin in patches:
        target = posted.get(str(run["id"]))
        if target is None:
            message = (
                f"patch of run {run['id']} that no post in this file created "
                "(its name, type and inputs are missing)"
            )
            merged.problems.append((origin, ConversionError(at(run_path, "id"), message)))
        else:
            _patch(target[0], run)
            merged.joins.append((target[1], origin))
    return merged


def _batch_runs(
    batch: Any, path: str
) -> Iterable[tuple[str, Mapping[str, Any], str, ConversionError | None]]:
    """The runs of one batch: (``post`` or ``patch``, run, its path, problem or None)."""
    if not isinstance(batch, Mapping):
        yield (
            "",
            {},
            path,
            ConversionError(
                path, f"expected a {{post, patch}} object, got {json_type_name(batch)}"
            ),
        )
        return
    if not any(key in batch for key in _BATCH_KEYS):
        yield "", {}, path, ConversionError(path, _NOT_A_BATCH + _hint(batch))
        return
    unknown = sorted(set(batch) - set(_BATCH_KEYS))
    if unknown:
        message = "unexpected field in a LangSmith batch (expected only 'post' and 'patch')"
        yield "", {}, path, ConversionError(at(path, unknown[0]), message)
    for key in _BATCH_KEYS:
        value = batch.get(key)
        if value is None:
            continue
        where = at(path, key)
        if not isinstance(value, list):
            yield (
                key,
                {},
                where,
                ConversionError(where, f"expected an array, got {json_type_name(value)}"),
            )
            continue
        for index, run in enumerate(value):
            run_path = at(where, index)
            if not isinstance(run, Mapping):
                problem = ConversionError(
                    run_path, f"expected an object, got {json_type_name(run)}"
                )
                yield key, {}, run_path, problem
            elif run.get("id") is None:
                problem = ConversionError(
                    at(run_path, "id"),
                    "expected the run's id (a patch is matched to its post by id)",
                )
                yield key, {}, run_path, problem
            else:
                yield key, run, run_path, None


def _hint(record: Any) -> str:
    """``; it looks like NAME: use --from NAME`` when another format fits the record."""
    detected = detect_format(record)
    if detected is None or detected == "langsmith-batch":
        return ""
    return f"; it looks like {detected}: use --from {detected}"


def _patch(target: dict[str, Any], patch: Mapping[str, Any]) -> None:
    """Patch fields win; a field the patch lacks or holds as ``null`` keeps the post's value."""
    for key, value in patch.items():
        if value is not None or key not in target:
            target[key] = value


def langsmith_batch_traces(
    record: Any, options: ImportOptions | None = None, **overrides: Any
) -> list[ReasoningTrace]:
    """The traces of one batch, or of a list of batches read as one stream: one per root run.

    Raises :class:`ConversionError` naming the offending field's path.
    """
    options = resolve_options(options, overrides)
    return [convert_tree(tree, options) for tree in batch_trees(record)]


def batch_trees(record: Any) -> list[RunTree]:
    """The run trees of one batch or of a list of batches. Raises :class:`ConversionError`."""
    if isinstance(record, (list, tuple)):
        batches = [(batch, at("", i), i) for i, batch in enumerate(record)]
    else:
        batches = [(record, "", 0)]
    merged = merge_batches(batches)
    trees, link_problems = plant_trees(merged.runs)
    errors = [error for _, error in [*merged.problems, *link_problems]]
    if errors:
        raise ConversionError.merged(errors)
    return trees
