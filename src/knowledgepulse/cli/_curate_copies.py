"""``kp curate`` (``--by copies``, the default): the runs of the copy curation.

The options are read and checked in :mod:`._curate_cmd`; here the run reads, hands each trace
to :class:`~knowledgepulse.scoring._copy_curation.CopyCuration` (locally) or to Ray, and writes
the kept traces and the groups, keeping the accounting true however the run ends.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from typing import Any

from ..runs import open_writer, phase_progress, signals_held
from ._curate_run import read_into, stopped

__all__ = [
    "curate_copies_in_memory",
    "curate_copies_streaming",
    "curate_in_memory",
    "curate_tasks_in_memory",
]


def _say(job: Any, line: str) -> None:
    job.console.print(line, highlight=False, markup=False)


def _result_lines(
    job: Any,
    distinct: int,
    kept: int,
    dropped: int,
    groups: int,
    by_relation: dict[str, int],
    what: str = "copies",
    measure: str = "estimated Jaccard",
) -> list[str]:
    relations = ", ".join(f"{name} {count}" for name, count in sorted(by_relation.items()))
    how = (
        f"exact, or {measure} ≥ {job.threshold:g}"
        if what == "copies"
        else (f"{measure} ≥ {job.threshold:g}")
    )
    line = (
        f"traces: {distinct}   kept {kept}   dropped {dropped} as {what} in {groups} groups ({how})"
    )
    lines = [line]
    if relations:
        lines.append(f"dropped by relation: {relations}")
    return lines


#: From this much input, one process hashes while this one reads (when there are 2+ CPUs).
HASHER_FROM_BYTES = 8 << 20


def hashers_for(workers: int | None, files: list[str]) -> int:
    """Processes that hash beside this one, which reads: ``--workers N`` counts this one
    (0 or 1: it hashes too; N: N - 1 beside it); by default one beside it for inputs of
    8 MiB or more on a machine with two CPUs or more. Never changes the output."""
    import os

    if workers is not None:
        return max(0, workers - 1) if workers > 1 else 0
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    size = 0
    for name in files:
        try:
            size += os.path.getsize(name) if name != "-" else HASHER_FROM_BYTES
        except OSError:
            continue
    return 1 if (cpus or 1) >= 2 and size >= HASHER_FROM_BYTES else 0


def curate_copies_streaming(job: Any) -> int:
    """Read once; a few numbers and a signature per trace in memory, the lines on disk."""
    from ..scoring._copy_curation import CopyCuration

    with ExitStack() as stack:
        curation = CopyCuration(
            job.work_dir,
            similarity=job.threshold,
            kb=job.open_base(stack),
            profiles=job.registry,
            hashers=hashers_for(job.workers, job.files),
        )
        stack.callback(curation.close)
        run = read_into(job, stack, curation.add, curation.finish_reading, phase="hashing")
        tally = run.tally
        # Until the outputs are written, every record read counts as not processed.
        read, tally.processed = tally.processed, 0
        if tally.interrupted:
            curation.remove_files()
            return stopped(job, tally, "interrupted before curating: nothing was written")
        run.stop_display()
        with run, phase_progress(job.console, not job.quiet, {"group": "grouping copies"}) as shown:
            curation.decide(progress=shown)
        if tally.interrupted:
            curation.remove_files()
            return stopped(job, tally, "interrupted while curating: nothing was written")
        kept_out = open_writer(stack, job.output)
        groups_out = open_writer(stack, job.groups)
        with signals_held():
            curation.write(kept_out.write_line, groups_out.write_line)
            tally.processed = read
    curation.remove_files()
    if not job.quiet:
        tally.print_folded()
        job.console.print(tally.accounting(), highlight=False)
        for line in _result_lines(
            job,
            len(curation),
            curation.kept_count,
            curation.dropped,
            curation.groups,
            curation.by_relation,
        ):
            _say(job, line)
        if curation.wordless:
            _say(job, f"not compared: {curation.wordless} traces with no word (all kept)")
        if curation.repeated:
            _say(job, f"repeated ids: {curation.repeated} traces read twice counted once")
        _say(job, _took_line(curation.timings, len(curation)))
    return int(tally.exit_code())


def _took_line(timings: Any, traces: int) -> str:
    """``took 12.3 s (812 traces/s): read 2.0 s, hash 8.1 s, group 1.9 s, write 0.3 s``."""
    total = time.perf_counter() - timings.started
    rate = traces / total if total > 0 else 0.0
    return (
        f"took {total:.1f} s ({rate:,.0f} traces/s): read {timings.read:.1f} s, hash "
        f"{timings.hash:.1f} s, group {timings.search:.1f} s, write {timings.write:.1f} s"
    )


def curate_copies_in_memory(job: Any) -> int:
    """``--engine ray``: every trace is read into memory, the facets made by Ray Data."""
    from ..distributed._cli import ray_curate_copies

    def decide(stack: ExitStack, pile: list[Any], base: Any) -> Any:
        return ray_curate_copies(
            stack, pile, job.address, job.workers, similarity=job.threshold, kb=base,
            profiles=job.registry,
        )  # fmt: skip

    return curate_in_memory(job, decide)


def curate_tasks_in_memory(job: Any, keep_per_task: int) -> int:
    """``--by task``: every trace is read into memory, its task text embedded, the attempts
    at one task grouped (:func:`~knowledgepulse.scoring._task_curation.curate_tasks`)."""
    from ..scoring._task_curation import curate_tasks

    def decide(stack: ExitStack, pile: list[Any], base: Any) -> Any:
        job.say_embedder()
        return curate_tasks(
            pile,
            embedder=job.chosen.embedder,
            similarity=job.threshold,
            keep_per_task=keep_per_task,
            profiles=job.registry,
            batch_size=job.batch_size,
        )

    return curate_in_memory(job, decide, what="attempts at one task", measure="task cosine")


def curate_in_memory(
    job: Any,
    decide: Any,
    what: str = "copies",
    measure: str = "estimated Jaccard",
) -> int:
    """Read every trace into memory, ``decide(stack, pile, base)``, write the outputs."""
    pile: list[Any] = []
    with ExitStack() as stack:
        base = job.open_base(stack)
        run = read_into(job, stack, pile.append)
        tally = run.tally
        if tally.interrupted:
            return stopped(job, tally, "interrupted before curating: nothing was written")
        read, tally.processed = tally.processed, 0
        with run:
            result = decide(stack, pile, base)
            tally.processed = read
        if tally.interrupted:
            return stopped(job, tally, "interrupted while curating: nothing was written")
        kept_out = open_writer(stack, job.output)
        groups_out = open_writer(stack, job.groups)
        with signals_held():
            for trace in result.kept:
                kept_out.write_line(trace.to_json())
            for group in result.groups:
                groups_out.write_json(group.to_dict())
    if not job.quiet:
        tally.print_folded()
        job.console.print(tally.accounting(), highlight=False)
        by_relation: dict[str, int] = {}
        for group in result.groups:
            for duplicate in group.duplicates:
                name = duplicate.relation or "near_copy"
                by_relation[name] = by_relation.get(name, 0) + 1
        distinct = len(result.values)
        for line in _result_lines(
            job,
            distinct,
            len(result.kept),
            result.dropped,
            len(result.groups),
            by_relation,
            what,
            measure,
        ):
            _say(job, line)
        if len(pile) > distinct:
            _say(job, f"repeated ids: {len(pile) - distinct} traces read twice counted once")
    return int(tally.exit_code())
