"""The benchmark's agent-rubric section, run on the tau-bench sample instead of the corpus."""

from __future__ import annotations

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
    assert "openai_chat.json" in out


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
