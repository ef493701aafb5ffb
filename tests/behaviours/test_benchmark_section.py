"""The benchmark's agent-rubric section, run on the tau-bench sample instead of the corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "tests" / "data" / "tau_bench_sample.json"


def test_the_agent_rubric_section_reports_agreement_and_ranked_criteria(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks._agent_rubric import bench_agent_rubric
    from benchmarks._figures import FIGURES

    FIGURES.clear()
    bench_agent_rubric(SAMPLE)
    out = capsys.readouterr().out
    agreement = FIGURES[0]
    assert agreement.name == "agent rubric: successful_completion agrees with tau-bench reward"
    assert (agreement.value, agreement.target, agreement.status) == (1.0, 0.93, "met")
    assert agreement.note == "4/4 conversations"
    assert "successful_completion                    2         0" in out
    assert "other outcome                            0         2" in out
    assert "expected_actions           0.40      2/4         50.0%             0" in out
    assert (
        "first failing step on the 2 failed conversations: where a write matching no expected "
        "action was made (2 conversations): exact 2/2, within 3 2/2; expected writes left out "
        "(0): a step named in 0/0"
    ) in out
    located = next(f for f in FIGURES if "first wrong write" in f.name)
    assert (located.value, located.note) == (1.0, "2/2 conversations, within 3: 2/2")
    # Without the expected actions the two failed runs show no sign of failure in themselves
    # (task 0 trial 0 booked with the wrong bags, then answered): the trace alone cannot tell.
    assert "without expected actions (info hidden), rewarded 1 (2): successful_completion 2" in out
    assert "without expected actions (info hidden), rewarded 0 (2): successful_completion 2" in out
    assert "openai_chat.json" in out


def test_the_first_wrong_write_is_read_from_the_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """Construction truth on the airline excerpt (tests/data/tau_bench_airline, MIT): the
    first write, not refused, that equals no expected action; a run whose only writes were
    refused or expected has none."""
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks._agent_rubric import first_wrong_write

    records = json.loads((ROOT / "tests" / "data" / "tau_bench_airline" / "runs.json").read_text())
    truth = {(r["task_id"], r["trial"]): first_wrong_write(r) for r in records}
    assert truth == {(46, 3): None, (2, 1): None, (0, 1): 20, (1, 0): None}
    # Task 0 trial 1: the book_reservation at 16 was refused; the one at 20 paid otherwise.
    wrong = records[2]["traj"][20]["tool_calls"][0]["function"]["name"]
    assert wrong == "book_reservation"
    assert records[2]["traj"][17]["content"].startswith("Error: payment amount")


def test_a_missing_tau_bench_file_is_reported_as_skipped(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks._agent_rubric import bench_agent_rubric
    from benchmarks._figures import FIGURES

    FIGURES.clear()
    bench_agent_rubric(tmp_path / "absent.json")
    assert FIGURES[0].status == "skipped"
    assert "no file" in FIGURES[0].note
    capsys.readouterr()
