"""``kp eval --rubric agent`` on the tau-bench sample, raw and imported, with its gates."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from knowledgepulse.cli import main

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "tau_bench_sample.json"


def kp(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_kp_eval_agent_on_raw_tau_bench_logs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "report.json"
    junit = tmp_path / "junit.xml"
    code, out, err = kp(
        capsys,
        "eval",
        str(SAMPLE),
        "--from",
        "openai",
        "--rubric",
        "agent",
        "--group-by",
        "task",
        "--report-json",
        str(report),
        "--junit",
        str(junit),
    )
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["case_id"] for line in lines] == [
        "kp:trace:openai:tau-bench:task-12:trial-3",
        "kp:trace:openai:tau-bench:task-13:trial-1",
        "kp:trace:openai:tau-bench:task-0:trial-0",
        "kp:trace:openai:tau-bench:task-15:trial-0",
    ]
    assert [line["outcome_type"] for line in lines] == [
        "successful_completion",
        "successful_completion",
        "graceful_failure",
        "graceful_failure",
    ]
    assert [line["group"] for line in lines] == [
        {"metadata.kp_import.task": task} for task in ("12", "13", "0", "15")
    ]
    assert lines[2]["verdicts"]["expected_actions"]["reasoning"] == (
        "step 26 book_reservation differs from the expected call in nonfree_baggages, "
        "payment_methods"
    )
    assert lines[3]["verdicts"]["expected_actions"]["reasoning"] == (
        "step 24 cancel_reservation(reservation_id=GV1N64) was not expected"
    )
    figures = json.loads(report.read_text())
    ranked = [(c["name"], c["passed"], c["failed"], c["undetermined"]) for c in figures["criteria"]]
    # Reported, not scored: each run that called tools had a call fail (recovered).
    assert ranked[0] == ("no_failed_calls", 0, 3, 1)
    assert ranked[1] == ("expected_actions", 2, 2, 0)
    assert ranked[-3:] == [
        ("known_tools", 0, 0, 4),
        ("valid_arguments", 0, 0, 4),
        ("expected_answer", 0, 0, 4),
    ]
    assert "Criteria, weakest first" in err
    assert "successful_completion vs the source's success: 4/4 agree (100.0%)" in err
    assert "records in: 4 = processed 4 + rejected 0" in err
    suite = ET.parse(junit).getroot()
    assert suite.iter("testcase") is not None
    assert len([case for case in suite.iter("testcase") if case.find("failure") is not None]) == 2


def test_kp_eval_agent_gates_fail_with_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = kp(
        capsys,
        "eval",
        str(SAMPLE),
        "--from",
        "openai",
        "--rubric",
        "agent",
        "-o",
        "-",
        "-q",
        "--min-pass-rate",
        "expected_actions=0.9",
    )
    assert code == 1
    assert (
        "gate failed: criterion 'expected_actions': pass rate 50% (2/4) is below the minimum 90%"
        in err
    )


def test_kp_eval_agent_on_imported_traces(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    imported = tmp_path / "traces.jsonl"
    code, _, err = kp(capsys, "import", str(SAMPLE), "--from", "openai", "-o", str(imported), "-q")
    assert code == 0, err
    code, out, err = kp(capsys, "eval", str(imported), "--rubric", "agent")
    assert code == 0, err
    assert [json.loads(line)["outcome_type"] for line in out.splitlines()].count(
        "successful_completion"
    ) == 2


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("[criteria.within_budget]\nmax_steps = 'ten'\n", "criteria.within_budget.max_steps"),
        ("[criteria.no_loop]\nweight = 0.1\n", "criteria.no_loop: unknown criterion"),
    ],
)
def test_kp_eval_refuses_bad_rubric_settings_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, named: str
) -> None:
    settings = tmp_path / "agent.toml"
    settings.write_text(text, encoding="utf-8")
    code, out, err = kp(capsys, "eval", str(SAMPLE), "--from", "openai", "--rubric", str(settings))
    assert code == 2
    assert out == ""
    assert named in " ".join(err.split())


def test_kp_eval_refuses_an_unknown_format_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = kp(capsys, "eval", str(SAMPLE), "--from", "nope", "--rubric", "agent")
    assert code == 2 and "--from" in err


def test_kp_eval_from_logs_rejects_a_bad_record_and_grades_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = [*json.loads(SAMPLE.read_text())[:1], {"task_id": 9, "traj": "not a list"}]
    logs = tmp_path / "logs.json"
    logs.write_text(json.dumps(records), encoding="utf-8")
    rejects = tmp_path / "rejects.jsonl"
    code, out, err = kp(
        capsys,
        "eval",
        str(logs),
        "--from",
        "openai",
        "--rubric",
        "agent",
        "--rejects",
        str(rejects),
    )
    assert code == 1
    assert len(out.splitlines()) == 1
    assert "records in: 2 = processed 1 + rejected 1" in err
    rejected = [json.loads(line) for line in rejects.read_text().splitlines()]
    assert len(rejected) == 1 and "traj" in json.dumps(rejected[0])


def test_kp_eval_agent_report_fits_80_columns_and_tells_failing_cases_apart(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 35 item 7: the criteria table was 98 columns wide and its failing-cases column
    # showed "kp:trace:openai:tau…" for every case.
    monkeypatch.setenv("COLUMNS", "80")
    code, _, err = kp(capsys, "eval", str(SAMPLE), "--from", "openai", "--rubric", "agent")
    assert code == 0, err
    assert max(len(line) for line in err.splitlines()) <= 80
    assert "Failing cases (ids after kp:trace:openai:tau-bench:)" in err
    assert "│ expected_actions       │ task-0:trial-0, task-15:trial-0                  │" in err
    # task-13:trial-1 pays with a gift card the user never named.
    assert "│ confirmed_before_write │ task-13:trial-1                                  │" in err
    assert "tau…" not in err
