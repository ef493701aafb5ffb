"""Speed on the path users take: start-up, validation from bytes, and ``kp score --no-embed``.

Start-up is measured against ``import pydantic`` in the same run, in fresh processes taken in
turn (so a busy machine slows both alike); validation against ``json.loads`` followed by the
same checks; ``kp score`` on a generated file of realistic traces, with the time of each stage
of its path.
"""

from __future__ import annotations

import gzip
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import _corpus
from ._figures import Figure, report

__all__ = ["bench_speed"]

#: ``import knowledgepulse`` and ``kp --help`` may take this many times ``import pydantic``.
STARTUP_TARGET = 1.5
#: ``kp score --no-embed`` on realistic traces, 2 cores.
KP_SCORE_TARGET = 20_000


def bench_speed(quick: bool) -> None:
    bench_startup(5 if quick else 15)
    with tempfile.TemporaryDirectory() as tmp:
        size = 2_000 if quick else 20_000
        path = _corpus.write_trace_file(Path(tmp) / f"traces-{size}.jsonl.gz", size)
        bench_validation(path, 1_000 if quick else 5_000)
        bench_score_stages(path, 1_000 if quick else 5_000)
        bench_kp_score(path, size, 1 if quick else 3)


# -- start-up ------------------------------------------------------------------------------

_IMPORT = "import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
_HELP = (
    "import io, sys, time; t = time.perf_counter(); from knowledgepulse.cli import main; "
    "out, sys.stdout = sys.stdout, io.StringIO(); main(['--help']); sys.stdout = out; "
    "print(time.perf_counter() - t)"
)


def _seconds(code: str) -> float:
    return float(subprocess.check_output([sys.executable, "-c", code], text=True).split()[-1])


def bench_startup(rounds: int) -> None:
    """``import knowledgepulse`` and ``kp --help`` against ``import pydantic``, in turn."""
    samples: dict[str, list[float]] = {"pydantic": [], "knowledgepulse": [], "help": []}
    for _ in range(rounds):
        samples["pydantic"].append(_seconds(_IMPORT.format(module="pydantic")))
        samples["knowledgepulse"].append(_seconds(_IMPORT.format(module="knowledgepulse")))
        samples["help"].append(_seconds(_HELP))
    pydantic_ms, package_ms, help_ms = (
        statistics.median(samples[key]) * 1e3 for key in ("pydantic", "knowledgepulse", "help")
    )
    note = f"median of {rounds} fresh processes each, taken in turn"
    report(Figure("import pydantic", pydantic_ms, "ms", None, note=note))
    report(
        Figure(
            "import knowledgepulse / import pydantic",
            package_ms / pydantic_ms,
            "×",
            STARTUP_TARGET,
            note=f"{package_ms:.0f} ms vs {pydantic_ms:.0f} ms",
        )
    )
    report(
        Figure(
            "kp --help / import pydantic",
            help_ms / pydantic_ms,
            "×",
            STARTUP_TARGET,
            note=f"{help_ms:.0f} ms (imports and help) vs {pydantic_ms:.0f} ms",
        )
    )


# -- validation -----------------------------------------------------------------------------


def _lines(path: Path, count: int) -> list[bytes]:
    with gzip.open(path, "rb") as handle:
        return [line.rstrip(b"\n") for _, line in zip(range(count), handle)]


def _per_item_us(function: Callable[[Any], Any], items: list[Any], repeat: int = 3) -> float:
    """Best CPU time per item over ``repeat`` passes (each result dropped at once, as a run
    does). CPU time, not wall time: on a shared machine, waiting for a core is not the code's."""
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        for item in items:
            function(item)
        best = min(best, time.process_time() - start)
    return best / len(items) * 1e6


def bench_validation(path: Path, count: int) -> None:
    """One step from bytes (what ``kp score`` does) against ``json.loads`` + the same checks."""
    from knowledgepulse import ReasoningTrace
    from knowledgepulse.importers._options import ImportOptions
    from knowledgepulse.importers._stream import _trace_from_bytes
    from knowledgepulse.io._reader import InputRecord

    lines = _lines(path, count)
    options = ImportOptions()
    records = [InputRecord(str(path), n + 1, json=line) for n, line in enumerate(lines)]
    ReasoningTrace.model_validate_json(lines[0])  # the schema is built on first use

    def two_step(line: bytes) -> Any:
        return ReasoningTrace.model_validate(json.loads(line))

    baseline = _per_item_us(two_step, lines)
    ours = _per_item_us(lambda record: _trace_from_bytes(record, options), records)
    steps = statistics.mean(len(json.loads(line)["steps"]) for line in lines)
    size = statistics.mean(len(line) for line in lines) / 1024
    note = f"{steps:.0f} steps, {size:.1f} KiB per trace"
    report(Figure("json.loads + ReasoningTrace checks, per trace", baseline, "µs", note=note))
    report(Figure("ReasoningTrace validated from bytes, per trace", ours, "µs", note=note))
    report(
        Figure(
            "  from bytes vs json.loads + checks (speed-up)",
            baseline / ours,
            "×",
            1.0,
            lower_is_better=False,
        )
    )


def bench_score_stages(path: Path, count: int) -> None:
    """What one trace costs at each stage of ``kp score --no-embed`` (one core)."""
    from knowledgepulse import ReasoningTrace, Scorer
    from knowledgepulse.io._reader import iter_records
    from knowledgepulse.io._writers import dumps
    from knowledgepulse.records import ScoreRecord

    def read() -> None:
        for _ in iter_records([str(path)], parse=False):
            pass

    start = time.process_time()
    read()
    read_seconds = time.process_time() - start
    with gzip.open(path, "rb") as handle:
        total = sum(1 for _ in handle)
    read_us = read_seconds / total * 1e6
    lines = _lines(path, count)
    traces = [ReasoningTrace.model_validate_json(line) for line in lines]
    scorer = Scorer(embedder=None)
    validate_us = _per_item_us(ReasoningTrace.model_validate_json, lines)
    score_us = _per_item_us(lambda trace: scorer.score_many([trace]), traces)
    scores = scorer.score_many(traces)
    pairs = list(zip(scores, traces))
    line_us = _per_item_us(
        lambda pair: dumps(ScoreRecord.data_of(pair[0], pair[1], source="f", line=1)), pairs
    )
    validated_line_us = _per_item_us(
        lambda pair: ScoreRecord.of(pair[0], pair[1], source="f", line=1).to_json(), pairs
    )
    for name, value in (
        ("kp score stage: read and decompress a line", read_us),
        ("kp score stage: validate from bytes", validate_us),
        ("kp score stage: score (no embedder)", score_us),
        ("kp score stage: build and serialise the score line", line_us),
        ("  (the same line through the validated ScoreRecord)", validated_line_us),
    ):
        report(Figure(name, value, "µs"))


# -- kp score ------------------------------------------------------------------------------


def bench_kp_score(path: Path, size: int, rounds: int) -> None:
    """``kp score --no-embed`` end to end, on one worker per CPU and in one process, taken in
    turn: the best of ``rounds`` runs each, wall time and the CPU time of every process of
    the run (workers included)."""
    from knowledgepulse.scoring._parallel import AUTO_MAX_WORKERS, choose_workers

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    workers = min(cpus or 1, AUTO_MAX_WORKERS)
    default = choose_workers(None, [str(path)])  # what kp would choose now (it heeds the load)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    args = [sys.executable, "-m", "knowledgepulse", "score", str(path), "-q"]
    args += ["-o", os.devnull, "--no-embed"]
    best: dict[str, tuple[float, float]] = {}
    for _ in range(rounds):
        for name in ("workers", "in process"):
            count = workers if name == "workers" else 0
            wall, cpu = _timed_run([*args, "--workers", str(count)])
            old_wall, old_cpu = best.get(name, (float("inf"), float("inf")))
            best[name] = (min(wall, old_wall), min(cpu, old_cpu))
    wall, cpu = best["workers"]
    one_wall, one_cpu = best["in process"]
    report(
        Figure(
            f"kp score --no-embed, {size:,} realistic traces",
            size / wall,
            "traces/s",
            KP_SCORE_TARGET,
            lower_is_better=False,
            note=f"--workers {workers} on {cpus} CPUs (kp's choice now: {default}; load "
            f"average {load:.1f}); {size / cpu:,.0f} traces per CPU second, every process "
            "counted; start-up included",
        )
    )
    report(
        Figure(
            "  the same in one process (--workers 0)",
            size / one_wall,
            "traces/s",
            note=f"{size / one_cpu:,.0f} traces per CPU second",
        )
    )
    report(
        Figure(
            "  workers vs one process (speed-up)",
            one_wall / wall,
            "×",
            note=f"CPU per trace {cpu / one_cpu:.2f}× one process's",
        )
    )


def _timed_run(args: list[str]) -> tuple[float, float]:
    """Wall seconds of ``args`` and the CPU seconds of it and of every process it started.

    Its worker processes are not its children (a fork server starts them) and are not waited
    for by it, so their CPU time is read from /proc while they run, every 20 ms; the last
    reading of each counts (a few ms may be missed per process).
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    process = subprocess.Popen(args)
    others: dict[int, float] = {}
    while process.poll() is None:
        others.update(_descendants_cpu(process.pid))
        time.sleep(0.02)
    wall = time.perf_counter() - start
    if process.returncode != 0:
        raise RuntimeError(f"kp score exited {process.returncode}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return wall, own + sum(others.values())


def _descendants_cpu(root: int) -> dict[int, float]:
    """CPU seconds so far of every process below ``root`` (not ``root`` itself)."""
    ticks = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry)
        parents[pid] = int(fields[1])
        cpu[pid] = (int(fields[11]) + int(fields[12])) / ticks
    found: dict[int, float] = {}
    for pid in cpu:
        parent = parents.get(pid, 0)
        while parent > 1 and parent != root:
            parent = parents.get(parent, 0)
        if parent == root:
            found[pid] = cpu[pid]
    return found
