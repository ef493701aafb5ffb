"""The read stage on Ray Data: files (or a Dataset's records) read and validated in parallel.

Each file is read by its own task, as a local run reads it (importers, grouping over the file,
problems rendered the same), so every record lands in the same conversion with the same
problems; the driver receives the conversions in input order and accounts for them exactly as
a local run. Inputs that only make sense together are read by one task: standard input, and a
Harbor job directory (its trials are recognised over the whole file list).
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

from ._cluster import import_ray

__all__ = ["conversions_of_dataset", "read_conversions_parallel"]

#: Conversions per block a read task yields (blocks stream to the driver as they are made).
UNITS_PER_BLOCK = 256


def read_conversions_parallel(
    files: Sequence[str], source_format: str, options: Any
) -> Iterator[Any]:
    """The conversions of ``files``, in input order, read by parallel Ray Data tasks.

    Args:
        files: input files (as :func:`~knowledgepulse.io._reader.expand_paths` lists them).
        source_format: the ``--from`` format.
        options: :class:`~knowledgepulse.importers.ImportOptions` applied to every trace.
    """
    from ..importers import read_traces_from_paths

    read_traces_from_paths([], source_format, options)  # an unknown format fails here, at once
    return _read_parallel(files, source_format, options)


def _read_parallel(files: Sequence[str], source_format: str, options: Any) -> Iterator[Any]:
    from ..importers import read_traces_from_paths

    if "-" in files or _has_harbor_trials(files, source_format):
        yield from read_traces_from_paths(files, source_format, options)
        return
    if not files:
        return
    ray = import_ray()
    _preserve_order(ray)
    items = [{"path": name} for name in files]
    ds = ray.data.from_items(items, override_num_blocks=len(items))
    reader = _FileReader(source_format, options)
    # The embedding actors hold the CPUs; reading is light and bounded by its concurrency.
    converted = ds.map_batches(
        reader,
        batch_size=1,
        batch_format="pandas",
        num_cpus=0,
        compute=ray.data.TaskPoolStrategy(size=max(1, min(len(items), _cpus(ray)))),
    )
    yield from _unpickled(converted)


def conversions_of_dataset(
    ds: Any, source_format: str, options: Any, column: str = "text"
) -> Iterator[Any]:
    """The conversions of a Dataset with one JSON record per row, in row order.

    Args:
        ds: a Ray Dataset; ``column`` holds each record's JSON text (``ray.data.read_text``
            names it ``text``); optional ``source`` and ``line`` columns say where it came from
            (default: ``<dataset>`` and the row's position, counted from 1).
        source_format: the format of the records (``trace``, ``openai``…). Each row is one
            unit: formats grouped over a file (spans, runs) need :func:`read_conversions_parallel`.
        options: :class:`~knowledgepulse.importers.ImportOptions`.
        column: the column holding the JSON text.
    """
    ray = import_ray()
    _preserve_order(ray)
    # The Dataset carries the context it was made with: order is asked for on it too.
    ds.context.execution_options.preserve_order = True
    converted = ds.map_batches(
        _RecordConverter(source_format, options, column),
        batch_format="pandas",
        num_cpus=0,
        compute=ray.data.TaskPoolStrategy(size=_cpus(ray)),
    )
    for row, conversion in enumerate(_unpickled(converted), start=1):
        if conversion.records[0].line == 0:
            # No line column: the row's position (only the driver sees the whole order).
            records = [replace(record, line=row) for record in conversion.records]
            conversion = replace(conversion, records=records)
        yield conversion


def _cpus(ray: Any) -> int:
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def _preserve_order(ray: Any) -> None:
    ray.data.DataContext.get_current().execution_options.preserve_order = True


def _unpickled(ds: Any) -> Iterator[Any]:
    for batch in ds.iter_batches(batch_format="pandas", prefetch_batches=4):
        for blob in batch["conversion"]:
            yield pickle.loads(blob)


class _FileReader:
    """Reads one file per call, yielding its conversions block by block."""

    def __init__(self, source_format: str, options: Any) -> None:
        self.source_format = source_format
        self.options = options

    def __call__(self, batch: Any) -> Iterator[Any]:
        import pandas as pd

        from ..importers import read_traces_from_paths

        blobs: list[bytes] = []
        for path in batch["path"]:
            for conversion in read_traces_from_paths([path], self.source_format, self.options):
                blobs.append(pickle.dumps(conversion, protocol=pickle.HIGHEST_PROTOCOL))
                if len(blobs) >= UNITS_PER_BLOCK:
                    yield pd.DataFrame({"conversion": blobs})
                    blobs = []
        if blobs:
            yield pd.DataFrame({"conversion": blobs})


class _RecordConverter:
    """Converts each row's JSON record, as a local run converts one record of a file."""

    def __init__(self, source_format: str, options: Any, column: str) -> None:
        self.source_format = source_format
        self.options = options
        self.column = column

    def __call__(self, batch: Any) -> Any:
        import pandas as pd

        from ..importers import read_traces
        from ..io._reader import InputRecord, parse_json_bytes

        records = []
        for n, text in enumerate(batch[self.column]):
            source = str(batch["source"].iloc[n]) if "source" in batch else "<dataset>"
            line = int(batch["line"].iloc[n]) if "line" in batch else 0
            raw = text if isinstance(text, bytes) else str(text).encode("utf-8")
            data, error = parse_json_bytes(raw)
            records.append(
                InputRecord(
                    source,
                    line,
                    data=data,
                    error=error,
                    raw=raw.decode("utf-8", "replace") if error else None,
                )
            )
        blobs = [
            pickle.dumps(conversion, protocol=pickle.HIGHEST_PROTOCOL)
            for record in records
            for conversion in read_traces([record], self.source_format, self.options)
        ]
        return pd.DataFrame({"conversion": blobs})


def _has_harbor_trials(files: Sequence[str], source_format: str) -> bool:
    from ..importers._harbor import harbor_layout
    from ..importers._registry import AUTO_FORMAT

    if source_format not in ("atif", AUTO_FORMAT):
        return False
    return bool(harbor_layout(files).trials)
