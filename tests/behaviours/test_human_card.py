"""The human-agreement card of ``python -m benchmarks agent`` on excerpts: two Who&When runs
(MIT, tests/data/who_and_when/SOURCE.md) and an AgentRx-shaped folder made of the tau-bench
sample with labels written here."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WHO = ROOT / "tests" / "data" / "who_and_when"
SAMPLE = ROOT / "tests" / "data" / "tau_bench_sample.json"


@pytest.fixture
def holdout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(ROOT))
    for folder, name in (
        ("Hand-Crafted", "hand-crafted-24"),
        ("Algorithm-Generated", "algorithm-generated-47"),
    ):
        (tmp_path / "who-and-when" / folder).mkdir(parents=True)
        shutil.copy(WHO / f"{name}.json", tmp_path / "who-and-when" / folder / f"{name[-2:]}.json")
    records = json.loads(SAMPLE.read_text(encoding="utf-8"))
    (tmp_path / "agentrx").mkdir()
    (tmp_path / "agentrx" / "tau_dataset_full.json").write_text(json.dumps(records))
    failed = [r for r in records if r["reward"] < 1]
    # task 0 trial 0 booked with the wrong bags at traj[28] (step 26 of the trace); the
    # people's step is 1-based, the system message first: 29.
    labels = [
        {
            "trajectory_id": failed[0]["task_id"],
            "failures": [{"failure_id": 1, "step_number": 29}, {"failure_id": 2, "step_number": 3}],
            "root_cause": {"failure_id": 1},
        },
        {
            "trajectory_id": failed[1]["task_id"],
            "failures": [
                {
                    "failure_id": 1,
                    "step_number": 4,
                    "failure_category": "Instruction Adherence Failure",
                    "step_reason": "The agent did not ask the user for confirmation.",
                }
            ],
            "root_cause": {"failure_id": 1},
        },
    ]
    (tmp_path / "agentrx" / "tau_ground_truth.json").write_text(json.dumps(labels))
    return tmp_path


def test_the_card_on_who_and_when_and_an_agentrx_folder(
    holdout: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from benchmarks._figures import FIGURES
    from benchmarks._human_agreement import agentrx_runs, bench_human_agreement

    runs = agentrx_runs(holdout / "agentrx")
    assert [(run.failed, run.step, run.unconfirmed) for run in runs] == [
        (False, None, False),
        (False, None, False),
        (True, 28, False),
        (True, 3, True),
    ]
    # The openai importer's step 26 came from traj[28].
    assert runs[2].message_of[26] == 28
    FIGURES.clear()
    bench_human_agreement(holdout, ("who-and-when", "agentrx"))
    out = capsys.readouterr().out
    assert "human agreement on who-and-when: 2 runs, 2 failed by the labels" in out
    # Hand-Crafted 24's plan states no figure (its "orchestrator.py:216" is a log line's
    # source); the plan is named by expected_answer, its answer being wrong.
    assert "grounded_statements           1     100.0%    50.0%     0.0%   100.0%" in out
    assert "expected_answer               2     100.0%   100.0%    50.0%   100.0%" in out
    # Each part of the set, and each half, graded apart: the rules' figures on runs of
    # another kind (here one run each).
    assert "Algorithm-Generated        1      0/1 0.0%    1/1 100.0%             -" in out
    assert "Hand-Crafted               1    1/1 100.0%    1/1 100.0%             -" in out
    assert "odd runs                   1    1/1 100.0%    1/1 100.0%             -" in out
    assert "human agreement on agentrx: 4 runs, 2 failed by the labels" in out
    assert "expected_actions              2     100.0%   100.0%    50.0%    50.0%" in out
    assert "outcome (successful_completion vs the labels): 4/4 agree; 2/2 failed runs" in out
    # Task 15 trial 0 had the user's yes before each write: people's label is not caught.
    assert "runs people label 'did not confirm': 0/1 fail confirmed_before_write" in out
    figures = {figure.name: figure for figure in FIGURES}
    consent = "agent rubric vs people on agentrx: 'did not confirm' runs failing"
    assert (
        figures[consent + " confirmed_before_write"].value,
        figures[consent + " confirmed_before_write"].note,
    ) == (0.0, "0/1 runs")
    exact = figures["agent rubric vs people on agentrx: first failing step exact"]
    assert (exact.value, exact.note) == (0.5, "1/2 runs")
    who = figures["agent rubric vs people on who-and-when: first failing step exact"]
    assert (who.value, who.note) == (0.5, "1/2 runs")


def test_the_card_prints_the_agent_confusion_and_the_runs_without_their_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two multi-agent runs people blame on WebSurfer (step 12) and Validation_Expert (step 5).
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks._human_agreement import (
        agent_confusion,
        bench_human_agreement,
        human_card,
        who_and_when_runs,
    )

    for folder, name in (
        ("Hand-Crafted", "hand-crafted-1"),
        ("Algorithm-Generated", "algorithm-generated-10"),
    ):
        (tmp_path / "who-and-when" / folder).mkdir(parents=True)
        shutil.copy(WHO / f"{name}.json", tmp_path / "who-and-when" / folder / f"{name}.json")
    card = human_card("who-and-when", who_and_when_runs(tmp_path / "who-and-when"))
    assert (card.multi_agent, card.agent_right, card.step_exact, card.located) == (2, 2, 2, 2)
    assert agent_confusion(card, least=1) == [
        ("Validation_Expert", 1, 1, ""),
        ("WebSurfer", 1, 1, ""),
    ]
    assert agent_confusion(card) == [("(other agents)", 2, 2, "")]
    blind = human_card(
        "who-and-when", who_and_when_runs(tmp_path / "who-and-when", with_answer=False)
    )
    # Without the expected answer both are still located; neither is then called failed.
    assert (blind.agent_right, blind.step_exact, blind.not_successful) == (2, 2, 0)
    bench_human_agreement(tmp_path, ("who-and-when",))
    out = capsys.readouterr().out
    assert "people blame            runs  named  named instead" in out
    assert "(other agents)             2      2  -" in out
    assert (
        "without the expected answer (ground_truth hidden): first failing step exact 2/2, "
        "within 3 2/2; agent 2/2; 0/2 failed runs not called successful"
    ) in out
