"""Attempts grouped by task: pass@k, field paths, kp score / kp eval / kp report --group-by."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from _helpers import TAU_BENCH
from knowledgepulse._grouping import MISSING, AttemptGrouper, field_value, group_label, pass_at_k
from knowledgepulse.cli import main

ROOT = Path(__file__).parents[2]
TAU_CORPUS = TAU_BENCH
TAU_SAMPLE = ROOT / "tests" / "data" / "tau_bench_sample.json"


def kp(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (4, 1, 1, 0.25),
        (4, 1, 2, 0.5),
        (4, 1, 3, 0.75),
        (4, 1, 4, 1.0),
        (4, 2, 2, 1 - 1 / 6),
        (4, 0, 4, 0.0),
        (4, 4, 1, 1.0),
        (10, 3, 5, 1 - 21 / 252),
    ],
)
def test_pass_at_k_is_the_unbiased_estimator(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-15)


@pytest.mark.parametrize(("n", "c", "k"), [(4, 5, 1), (4, 1, 0), (4, 1, 5), (3, -1, 1)])
def test_pass_at_k_refuses_impossible_counts(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError, match="pass@k needs"):
        pass_at_k(n, c, k)


def test_field_value_follows_dotted_paths() -> None:
    data = {"metadata": {"kp_import": {"task": 7}}, "steps": [{"type": "thought"}]}
    assert field_value(data, "metadata.kp_import.task") == 7
    assert field_value(data, "steps.0.type") == "thought"
    assert field_value(data, "steps.3.type") is MISSING
    assert field_value(data, "metadata.task_id") is MISSING
    assert [group_label(v) for v in (7, "a", None, MISSING, {"b": 1})] == [
        "7",
        "a",
        None,
        None,
        '{"b":1}',
    ]


def test_grouper_orders_tasks_naturally_and_counts_the_ungrouped() -> None:
    grouper = AttemptGrouper("task")
    for task, value, passed in [
        ("10", 0.5, True),
        ("2", 0.25, False),
        ("2", 0.75, True),
        (None, 1.0, True),
    ]:
        grouper.add(task, value, passed)
    groups = grouper.build()
    assert [(t.task, t.attempts, t.passed, t.best, t.mean, t.pass_at) for t in groups.tasks] == [
        ("2", 2, 1, 0.75, 0.5, (0.5, 1.0)),
        ("10", 1, 1, 0.5, 0.5, (1.0,)),
    ]
    assert groups.ungrouped == 1
    assert groups.pass_at(1) == 0.75
    assert groups.pass_at(2) == 1.0  # only task 2 has two attempts
    assert groups.pass_at(3) is None
    assert groups.summary_line() == (
        "2 tasks by task, 3 attempts: pass@1 0.750, pass@2 1.000 (1 attempts without task left out)"
    )


def test_tau_bench_sample_records_carry_task_and_trial(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "scores.jsonl"
    code, _, err = kp(
        capsys, "score", "--from", "openai", str(TAU_SAMPLE), "--no-embed",
        "--group-by", "metadata.kp_import.task", "-o", str(out),
    )  # fmt: skip
    assert code == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["group"] for r in records] == [
        {"metadata.kp_import.task": task} for task in ("12", "13", "0", "15")
    ]
    assert "4 tasks by metadata.kp_import.task, 4 attempts: pass@1 0.500" in err


@pytest.mark.skipif(
    not TAU_CORPUS.exists(), reason="the tau-bench corpus is not beside the repository"
)
def test_tau_bench_four_attempts_of_fifty_tasks(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    scores = tmp_path / "scores.jsonl"
    code, _, err = kp(
        capsys, "score", "--from", "openai", str(TAU_CORPUS), "--no-embed",
        "--group-by", "metadata.kp_import.task", "-o", str(scores),
    )  # fmt: skip
    assert code == 0
    # 84 of the 200 attempts were rewarded: pass@1 is 84/200.
    assert (
        "50 tasks by metadata.kp_import.task, 200 attempts: pass@1 0.420, pass@2 0.567, "
        "pass@3 0.660, pass@4 0.720"
    ) in err
    page = tmp_path / "report.html"
    code, _, _ = kp(
        capsys,
        "report",
        str(scores),
        "--group-by",
        "metadata.kp_import.task",
        "-o",
        str(page),
        "-q",
    )
    assert code == 0
    html = page.read_text()
    assert '<a href="#groups">Attempts by task</a>' in html
    assert '<div class="stat-value">0.720</div><div class="stat-label">pass@4</div>' in html
    section = html[html.index('<section id="groups">') :]
    assert section.count('<tr><td class="txt"><code>') == 50


def _cases(tmp_path: Path) -> Path:
    cases: list[dict[str, Any]] = [
        {
            "id": f"t{task}-a{attempt}",
            "metadata": {"task_id": f"t{task}"},
            "final_state": {"ok": ok},
        }
        for task, attempt, ok in [(1, 1, True), (1, 2, False), (2, 1, False), (2, 2, False)]
    ]
    cases.append({"id": "loose", "final_state": {"ok": True}})
    path = tmp_path / "cases.jsonl"
    path.write_text("".join(json.dumps(case) + "\n" for case in cases))
    (tmp_path / "rubric.py").write_text(
        "from knowledgepulse.rubrics import Rubric\n"
        "RUBRIC = Rubric('ok')\n"
        "@RUBRIC.criterion(weight=1.0)\n"
        "def ok(case):\n"
        "    '''The task was done.'''\n"
        "    return bool(case.final_state.get('ok'))\n"
    )
    return path


def test_kp_eval_groups_by_a_case_field_and_the_report_reads_it_back(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    cases = _cases(tmp_path)
    out = tmp_path / "evals.jsonl"
    code, _, err = kp(
        capsys, "eval", str(cases), "--rubric", f"{tmp_path / 'rubric.py'}:RUBRIC",
        "--group-by", "metadata.task_id", "-o", str(out),
    )  # fmt: skip
    assert code == 0
    assert "2 tasks by metadata.task_id, 4 attempts: pass@1 0.250, pass@2 0.500 (1 attempts" in err
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["group"]["metadata.task_id"] for r in records] == ["t1", "t1", "t2", "t2", None]
    page = tmp_path / "report.html"
    assert kp(capsys, "report", str(out), "--group-by", "metadata.task_id", "-o", str(page))[0] == 0
    html = page.read_text()
    assert "1 attempts have no metadata.task_id: left out." in html
    assert (
        '<tr><td class="txt"><code>t1</code></td><td class="num">2</td><td class="num">1</td>'
        in html
    )


def test_kp_report_groups_on_a_field_of_the_records_themselves(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    cases = _cases(tmp_path)
    out = tmp_path / "evals.jsonl"
    kp(capsys, "eval", str(cases), "--rubric", f"{tmp_path / 'rubric.py'}:RUBRIC", "-o", str(out))
    page = tmp_path / "report.html"
    assert kp(capsys, "report", str(out), "--group-by", "rubric", "-o", str(page))[0] == 0
    assert (
        '<tr><td class="txt"><code>ok</code></td><td class="num">5</td><td class="num">2</td>'
        in page.read_text()
    )
