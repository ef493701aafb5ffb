"""``kp score`` on worker processes: the same bytes as in one process, and nothing lost."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
from pathlib import Path

import pytest

from _helpers import make_trace
from knowledgepulse.cli import main
from knowledgepulse.importers import ImportOptions
from knowledgepulse.io._reader import iter_records
from knowledgepulse.scoring import _parallel
from knowledgepulse.scoring._parallel import (
    WORKERS_ENV,
    ScoringSettings,
    WorkerPlan,
    choose_workers,
    plan_workers,
    score_records,
    score_records_in_workers,
)
from knowledgepulse.scoring._profiles import ProfileRegistry


def mixed_lines(count: int) -> str:
    """Traces of several domains and outcomes, with a broken record every 7th line."""
    lines = []
    for n in range(1, count + 1):
        if n % 7 == 0:
            lines.append('{"@type": "ReasoningTrace", "id": 3}' if n % 2 else "{broken")
            continue
        trace = make_trace(trace_id=f"kp:trace:{n}")
        trace["metadata"]["task_domain"] = ["code", "finance", "default", "legal"][n % 4]
        trace["metadata"]["success"] = n % 3 != 0
        trace["outcome"]["confidence"] = (n % 10) / 10
        lines.append(json.dumps(trace))
    return "\n".join(lines) + "\n"


@pytest.fixture
def inputs(tmp_path: Path) -> list[str]:
    jsonl = tmp_path / "a.jsonl"
    jsonl.write_text(mixed_lines(700))
    listed = tmp_path / "b.json"
    listed.write_text(json.dumps([make_trace(trace_id=f"kp:trace:list{n}") for n in range(5)]))
    return [str(jsonl), "examples/traces.jsonl", str(listed)]


def run_score(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], inputs: list[str], workers: str, *extra: str
) -> tuple[int, str, str, dict[str, bytes]]:
    folder = tmp_path / f"workers-{workers}"
    folder.mkdir()
    outputs = {name: folder / name for name in ("scores.jsonl", "accepted.jsonl", "rejects.jsonl")}
    code = main(
        [
            "score",
            *inputs,
            "--no-embed",
            "--workers",
            workers,
            "-o",
            str(outputs["scores.jsonl"]),
            "--threshold",
            "0.5",
            "--accepted",
            str(outputs["accepted.jsonl"]),
            "--rejects",
            str(outputs["rejects.jsonl"]),
            *extra,
        ]
    )
    out, err = capsys.readouterr()
    err = "\n".join(line for line in err.splitlines() if not line.startswith("took "))
    return code, out, err, {name: path.read_bytes() for name, path in outputs.items()}


@pytest.mark.parametrize(
    "extra",
    [[], ["--table"], ["--domain", "legal", "--confidence", "0.9", "--max-errors", "40"]],
    ids=str,
)
def test_workers_write_the_same_bytes_as_one_process(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], inputs: list[str], extra: list[str]
) -> None:
    one = run_score(tmp_path, capsys, inputs, "0", *extra)
    two = run_score(tmp_path, capsys, inputs, "2", *extra)
    assert two == one
    code, _, err, outputs = one
    assert code == 1
    assert outputs["scores.jsonl"].count(b"\n") > 200
    assert outputs["accepted.jsonl"] and outputs["rejects.jsonl"]
    assert "records in: " in err


def settings() -> ScoringSettings:
    registry = ProfileRegistry()
    return ScoringSettings(ImportOptions(), tuple(registry[name] for name in registry), 0.5)


def test_a_worker_killed_mid_run_loses_no_record(tmp_path: Path) -> None:
    source = tmp_path / "t.jsonl"
    source.write_text(mixed_lines(3 * _parallel.BATCH_RECORDS * 2))
    expected = score_records(iter_records([str(source)], parse=False), settings())
    lost: list[str] = []
    conversions = score_records_in_workers(
        iter_records([str(source)], parse=False), settings(), 2, on_worker_lost=lost.append
    )
    got = [next(conversions)]
    for child in multiprocessing.active_children():
        if child.name == "kp-score-worker":
            os.kill(child.pid or 0, signal.SIGKILL)
            break
    got.extend(conversions)
    assert lost == ["killed by signal 9"]
    assert [c.traces for c in got] == [c.traces for c in expected]
    assert [c.problems for c in got] == [c.problems for c in expected]
    assert sum(len(c.records) for c in got) == 3 * _parallel.BATCH_RECORDS * 2


def test_kp_says_when_a_worker_is_lost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "t.jsonl"
    source.write_text(mixed_lines(600))  # three batches: one alone is scored in process
    monkeypatch.setattr(_parallel, "_serve", _exit_at_once)
    code = main(["score", str(source), "--no-embed", "--workers", "2", "-o", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 1
    assert (
        "a worker process ended (exit status 3): its records and the rest are scored in this "
        "process" in err
    )
    assert "records in: 600 = processed 515 + rejected 85" in err
    assert len((tmp_path / "o").read_text().splitlines()) == 515


def _exit_at_once(*_: object) -> None:
    os._exit(3)


def test_one_batch_is_scored_without_starting_workers(tmp_path: Path) -> None:
    source = tmp_path / "t.jsonl"
    source.write_text(mixed_lines(_parallel.BATCH_RECORDS))
    before = set(multiprocessing.active_children())
    records = iter_records([str(source)], parse=False)
    got = list(score_records_in_workers(records, settings(), 2))
    assert set(multiprocessing.active_children()) == before
    expected = score_records(iter_records([str(source)], parse=False), settings())
    assert [c.traces for c in got] == [c.traces for c in expected]


@pytest.mark.parametrize(("requested", "expected"), [(0, 0), (1, 0), (2, 2), (5, 5)])
def test_workers_asked_for(requested: int, expected: int) -> None:
    assert choose_workers(requested, ["-"]) == expected


def test_workers_chosen_by_size_and_cpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(WORKERS_ENV, raising=False)
    small, packed = tmp_path / "small.jsonl", tmp_path / "big.jsonl.gz"
    small.write_bytes(b"x" * 1000)
    packed.write_bytes(b"x" * 1000)
    monkeypatch.setattr(_parallel, "AUTO_MIN_BYTES", 5000)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1, 2}, raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (4.4, 0.0, 0.0))
    assert choose_workers(None, [str(small)]) == 0
    assert choose_workers(None, [str(packed)]) == 3  # a .gz counts 6 times its size
    assert choose_workers(None, [str(packed), "-"]) == 0  # standard input: never
    monkeypatch.setattr(os, "getloadavg", lambda: (4.5, 0.0, 0.0))  # 1.5 per CPU: busy
    assert choose_workers(None, [str(packed)]) == 0
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0}, raising=False)
    assert choose_workers(None, [str(packed)]) == 0
    monkeypatch.setenv(WORKERS_ENV, "4")
    assert choose_workers(None, [str(small)]) == 4
    assert choose_workers(0, [str(small)]) == 0


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        (["--from", "openai"], "--workers 2 with --engine local: it reads ReasoningTrace records"),
        (["--junit", "j.xml"], "--workers 2 with --engine local: it cannot be used with --junit"),
    ],
)
def test_workers_where_they_cannot_be_used_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], extra: list[str], problem: str
) -> None:
    code = main(["score", "examples/traces.jsonl", "--no-embed", "--workers", "2", *extra])
    assert code == 2
    assert problem in capsys.readouterr().err


EMBEDDED = (
    "--workers 2: traces are embedded in this process (the embedder uses every core itself); "
    "worker processes serve runs with --no-embed"
)


@pytest.mark.parametrize(
    ("requested", "engine", "embedding", "source_format", "sinks", "plan"),
    [
        (2, "local", False, "trace", False, WorkerPlan(2)),
        (1, "local", False, "trace", False, WorkerPlan(0)),
        (None, "local", False, "trace", False, WorkerPlan(0)),  # standard input: never
        (4, "ray", False, "trace", False, WorkerPlan(0)),  # Ray has its own workers
        (2, "local", True, "trace", False, WorkerPlan(0, note=EMBEDDED)),
        (None, "local", True, "trace", False, WorkerPlan(0)),
        (
            2,
            "local",
            False,
            "auto",
            False,
            WorkerPlan(
                0,
                refusal="--workers 2 with --engine local: it reads ReasoningTrace records, "
                "not --from auto",
            ),
        ),
        (
            3,
            "local",
            False,
            "trace",
            True,
            WorkerPlan(
                0,
                refusal="--workers 3 with --engine local: it cannot be used with --junit, "
                "--group-by or --otel-endpoint",
            ),
        ),
        (1, "local", False, "auto", True, WorkerPlan(0)),  # asked for none: nothing to refuse
    ],
)
def test_plan_workers_says_why_a_run_stays_in_process(
    monkeypatch: pytest.MonkeyPatch,
    requested: int | None,
    engine: str,
    embedding: bool,
    source_format: str,
    sinks: bool,
    plan: WorkerPlan,
) -> None:
    monkeypatch.delenv(WORKERS_ENV, raising=False)
    made = plan_workers(
        requested,
        ["-"],
        engine=engine,
        embedding=embedding,
        source_format=source_format,
        sinks=sinks,
    )
    assert made == plan
