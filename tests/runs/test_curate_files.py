"""``curate_files``, the verb behind ``kp curate``: its report's counts, rejections (file, line,
field), curation summary and stop are exact, it renders what ``kp curate`` prints and it
round-trips to JSON, whichever way the traces are grouped."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

import knowledgepulse
from _helpers import TAU_BENCH, HashingEmbedder
from knowledgepulse import RejectedRecord, RunReport, convert_files, curate_files
from knowledgepulse.runs import CurateSummary, OutputOverwritesInput, RunCounts

ROOT = Path(__file__).resolve().parents[2]


def kp_stderr(*args: str) -> str:
    """What ``kp ARGS`` writes on stderr (a pipe, 80 columns wide)."""
    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": str(ROOT / "src")}
    command = [sys.executable, "-m", "knowledgepulse", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, check=False).stderr


def without_took(text: str) -> str:
    return re.sub(r"took [0-9.]+ s \([0-9,]+ traces/s\).*", "took ...", text)


@pytest.fixture(scope="module")
def tau_lines(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The first tau-bench conversations as ReasoningTrace lines."""
    out = tmp_path_factory.mktemp("tau") / "traces.jsonl"
    convert_files([str(TAU_BENCH)], source_format="openai", output=str(out))
    return out.read_text(encoding="utf-8").splitlines()[:6]


@pytest.fixture
def source(tmp_path: Path, tau_lines: list[str]) -> Path:
    """Four conversations, an exact copy of the first under another id, the second read twice,
    a broken line (7) and a record with no trace in it (8)."""
    copy = json.loads(tau_lines[0])
    copy["id"] += ":copy-0"
    lines = [*tau_lines[:4], json.dumps(copy), tau_lines[1]]
    lines += ['{"broken json', '{"id": "x1", "steps": "nope"}']
    path = tmp_path / "pile.jsonl"
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_curate_files_is_importable_from_the_package() -> None:
    assert "curate_files" in knowledgepulse.__all__


def test_copies_counts_rejections_and_summary_are_exact(source: Path, tmp_path: Path) -> None:
    kept, groups, rejects = tmp_path / "kept.jsonl", tmp_path / "g.jsonl", tmp_path / "r.jsonl"
    report = curate_files([str(source)], output=str(kept), groups=str(groups), rejects=str(rejects))
    assert report.verb == "curate"
    assert report.counts == RunCounts(records_in=8, processed=6, rejected=2)
    assert report.rejections[0] == RejectedRecord(
        file=str(source), line=7, reason="invalid JSON: Unterminated string starting at (column 2)"
    )
    assert (
        RejectedRecord(
            file=str(source),
            line=8,
            field="steps",
            reason="input should be a valid list (got 'nope')",
        )
        in report.rejections
    )
    assert report.summary == CurateSummary(
        by="copies",
        similarity=0.6,
        traces=5,
        kept=4,
        dropped=1,
        groups=1,
        by_relation={"exact": 1},
        repeated=1,
        work_dir=str(tmp_path / ".kept.jsonl.kp-curate"),
    )
    assert set(report.timings) == {"read", "hash", "group", "write", "total"}
    assert report.exit_code() == 1
    assert len(kept.read_text().splitlines()) == 4
    (group,) = [json.loads(line) for line in groups.read_text().splitlines()]
    assert group["relation"] == "exact"
    assert [d["id"] for d in group["duplicates"]] != [group["kept"]]
    assert len(rejects.read_text().splitlines()) == 2
    assert not (tmp_path / ".kept.jsonl.kp-curate").exists()  # the work directory is gone
    assert RunReport.model_validate_json(report.model_dump_json()) == report


def test_the_report_renders_what_kp_curate_prints(source: Path, tmp_path: Path) -> None:
    kept, groups = tmp_path / "kept.jsonl", tmp_path / "g.jsonl"
    report = curate_files([str(source)], output=str(kept), groups=str(groups))
    rendered = report.render()
    assert rendered.splitlines()[-5:-1] == [
        "records in: 8 = processed 6 + rejected 2",
        "traces: 5   kept 4   dropped 1 as copies in 1 groups (exact, or estimated Jaccard ≥ 0.6)",
        "dropped by relation: exact 1",
        "repeated ids: 1 traces read twice counted once",
    ]
    printed = kp_stderr("curate", str(source), "-o", str(kept), "--groups", str(groups))
    # kp prints the rejections as they come, then the report.
    assert without_took(printed).endswith(without_took(rendered))


def test_tau_bench_conversations_are_all_kept(tmp_path: Path) -> None:
    """The 200 tau-bench conversations hold no copy of one another."""
    report = curate_files(
        [str(TAU_BENCH)],
        source_format="openai",
        output=str(tmp_path / "kept.jsonl"),
        groups=str(tmp_path / "g.jsonl"),
    )
    assert report.counts == RunCounts(records_in=200, processed=200)
    assert isinstance(report.summary, CurateSummary)
    assert (report.summary.traces, report.summary.kept, report.summary.groups) == (200, 200, 0)


def test_embedding_and_task_curation_report_their_embedder(source: Path, tmp_path: Path) -> None:
    kept, groups = tmp_path / "kept.jsonl", tmp_path / "g.jsonl"
    report = curate_files(
        [str(source)],
        output=str(kept),
        groups=str(groups),
        by="embedding",
        similarity=0.9,
        embedder=HashingEmbedder(),
    )
    summary = report.summary
    assert isinstance(summary, CurateSummary)
    # The exact copy is the one near-duplicate; its text was embedded once, with the first's.
    assert (summary.traces, summary.kept, summary.dropped, summary.groups) == (5, 4, 1, 1)
    assert (summary.embedder, summary.embedded, summary.reused) == ("HashingEmbedder", 4, 0)
    assert summary.by_relation == {}
    assert set(report.timings) == {"read", "embed", "search", "write", "total"}
    assert RunReport.model_validate_json(report.model_dump_json()) == report

    report = curate_files(
        [str(source)],
        output=str(kept),
        groups=str(groups),
        by="task",
        embedder=HashingEmbedder(),
        keep_per_task=2,
    )
    summary = report.summary
    assert isinstance(summary, CurateSummary)
    assert (summary.by, summary.similarity, summary.traces, summary.repeated) == (
        "task",
        0.65,
        5,
        1,
    )
    assert summary.kept + summary.dropped == 5
    assert summary.work_dir is None  # read into memory
    assert report.render().splitlines()[-2].startswith("traces: 5   kept ")


class _Stopping(HashingEmbedder):
    """Ctrl-C on the first embedding call."""

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        raise KeyboardInterrupt


def test_a_stop_while_embedding_writes_nothing_and_says_what_was_kept(
    source: Path, tmp_path: Path
) -> None:
    kept, groups, work = tmp_path / "kept.jsonl", tmp_path / "g.jsonl", tmp_path / "work"
    report = curate_files(
        [str(source)],
        output=str(kept),
        groups=str(groups),
        by="embedding",
        embedder=_Stopping(),
        work_dir=work,
    )
    assert report.stopped_by == "interrupted"
    assert report.counts == RunCounts(records_in=8, processed=0, rejected=2, not_processed=6)
    assert isinstance(report.summary, CurateSummary)
    assert report.summary.stopped_while == "reading"
    assert report.summary.stored_vectors == 0
    assert report.exit_code() == 130
    assert report.closing()[-1] == (
        f"interrupted before curating: nothing was written; 0 embeddings are kept in {work} "
        "for the next run"
    )
    assert not kept.exists() and not groups.exists()

    report = curate_files(
        [str(source)], output=str(kept), groups=str(groups), by="task", embedder=_Stopping()
    )
    assert report.counts.not_processed == 6
    assert report.closing()[-1] == "interrupted while curating: nothing was written"
    assert RunReport.model_validate_json(report.model_dump_json()) == report


def test_settings_that_do_not_combine_are_refused_before_reading(
    source: Path, tmp_path: Path
) -> None:
    kept, groups = str(tmp_path / "kept.jsonl"), str(tmp_path / "g.jsonl")
    with pytest.raises(ValueError, match="curation by task compares embeddings"):
        curate_files([str(source)], output=kept, groups=groups, by="task")
    with pytest.raises(ValueError, match="keep_per_task goes with by='task'"):
        curate_files([str(source)], output=kept, groups=groups, keep_per_task=2)
    with pytest.raises(OutputOverwritesInput, match=r"groups .* is also an input file"):
        curate_files([str(source)], output=kept, groups=str(source))
    assert not Path(kept).exists()
