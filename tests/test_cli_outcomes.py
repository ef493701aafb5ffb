"""Exit statuses and messages for what kp used to get silently wrong: records that give no
trace, options that did nothing, check errors, broken model directories, bad embedders,
rubric files with mistakes, and raw logs read without --from."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import knowledgepulse as kp
from _helpers import approx_float, make_trace
from knowledgepulse.cli import main

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
TAU = ROOT / "examples" / "tau-bench" / "gpt-4o-airline.json.gz"


@pytest.fixture(autouse=True)
def _no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KNOWLEDGEPULSE_EMBEDDER", "none")


def kp_run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def rows(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_a_record_that_gives_no_trace_is_processed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("[]\n")
    code, out, err = kp_run(capsys, "import", "--from", "atif", str(empty))
    assert (code, out) == (0, "")
    assert "records in: 1 = processed 1 + rejected 0; traces written: 0" in err


def test_override_options_apply_to_reasoning_traces(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = kp_run(
        capsys,
        "score",
        str(EXAMPLES / "traces.jsonl"),
        "-q",
        "--domain",
        "finance",
        "--failure",
        "--confidence",
        "0.5",
    )
    assert code == 0
    scored = rows(out)
    assert len(scored) == 30
    assert {(r["domain"], r["profile"], r["success"], r["outcome"]) for r in scored} == {
        ("finance", "finance", False, 0.15)
    }


def test_check_errors_fail_kp_eval_unless_allowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rubric = tmp_path / "r.py"
    rubric.write_text(
        "from knowledgepulse.rubrics import Rubric, Criterion\n"
        "def boom(case):\n    raise RuntimeError('no')\n"
        "RUBRIC = Rubric('r', [Criterion('ok', 0.5, lambda c: True), Criterion('boom', 0.5, boom)])\n"
    )
    cases = tmp_path / "c.jsonl"
    cases.write_text(json.dumps({"id": "a", "final_state": {}}) + "\n")
    code, _, err = kp_run(capsys, "eval", str(cases), "--rubric", f"{rubric}:RUBRIC", "-q")
    assert code == 1
    assert "gate failed: 1 check(s) raised an error" in err
    code, _, _ = kp_run(
        capsys, "eval", str(cases), "--rubric", f"{rubric}:RUBRIC", "-q", "--allow-check-errors"
    )
    assert code == 0


def test_fail_under_and_min_pass_rate_gate_kp_eval(capsys: pytest.CaptureFixture[str]) -> None:
    cases = str(EXAMPLES / "scheduling.jsonl")
    assert kp_run(capsys, "eval", cases, "--rubric", "scheduling", "-q")[0] == 0
    code, _, err = kp_run(
        capsys, "eval", cases, "--rubric", "scheduling", "-q", "--fail-under", "0.6"
    )
    assert code == 1
    assert "gate failed: mean score 0.5268 is below the minimum 0.60" in err
    code, _, err = kp_run(
        capsys, "eval", cases, "--rubric", "scheduling", "-q", "--min-pass-rate", "correct_time=0.4"
    )
    assert code == 1
    assert "correct_time" in err and "39% (11/28)" in err
    code, _, err = kp_run(
        capsys, "eval", cases, "--rubric", "scheduling", "--min-pass-rate", "correct_time"
    )
    assert code == 2 and "CRITERION=RATE" in err


def test_kp_eval_grades_kp_import_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    traces = tmp_path / "traces.jsonl"
    traces.write_text(json.dumps(make_trace(trace_id="kp:trace:imported")) + "\n")
    rubric = tmp_path / "r.py"
    rubric.write_text(
        "from knowledgepulse.rubrics import Rubric, Criterion, checks\n"
        "RUBRIC = Rubric('t', [Criterion('succeeded', 1.0, checks.succeeded())])\n"
    )
    code, out, _ = kp_run(capsys, "eval", str(traces), "--rubric", f"{rubric}:RUBRIC", "-q")
    assert code == 0
    (result,) = rows(out)
    assert (result["case_id"], result["score"], result["errors"]) == ("kp:trace:imported", 1.0, {})


def test_a_broken_model_directory_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("KNOWLEDGEPULSE_EMBEDDER")
    monkeypatch.setenv("KNOWLEDGEPULSE_MODEL_DIR", "/nonexistent/model")
    code, out, err = kp_run(capsys, "score", str(EXAMPLES / "traces.jsonl"), "-q")
    assert (code, out) == (2, "")
    assert err.startswith("kp: error: MiniLM model directory /nonexistent/model: does not exist")
    assert err.count("\n") == 1 and "Warning" not in err


def test_a_rubric_file_with_a_mistake_is_a_usage_error_with_pythons_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rubric = tmp_path / "r.py"
    rubric.write_text(
        "from knowledgepulse.rubrics import Rubric, Criterion, checks\n"
        "RUBRIC = Rubric('t', [Criterion('x', 1.0, checks.succeded)])\n"
    )
    code, _, err = kp_run(
        capsys, "eval", str(EXAMPLES / "scheduling.jsonl"), "--rubric", f"{rubric}:RUBRIC"
    )
    assert code == 2
    assert f"{rubric}:2" in err and "Did you mean: 'succeeded'?" in err
    fixed = tmp_path / "fixed.py"
    fixed.write_text(rubric.read_text().replace("succeded", "succeeded"))
    code, _, err = kp_run(
        capsys, "eval", str(EXAMPLES / "scheduling.jsonl"), "--rubric", str(fixed)
    )
    assert code == 2 and "add :ATTRIBUTE" in err and "RUBRIC" in err


class _OneRowShort:
    name = "one-row-short"
    dimensions = 8

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return np.ones((max(0, len(texts) - 1), 8), dtype=np.float32)


class _Wide:
    name = "wide"
    dimensions = 768

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = np.zeros((len(texts), 768), dtype=np.float32)
        out[:, 0] = 1.0
        return out


def test_an_embedder_returning_too_few_rows_is_an_error() -> None:
    scorer = kp.Scorer(embedder=_OneRowShort())
    traces = [make_trace(trace_id=f"kp:trace:{i}") for i in range(5)]
    with pytest.raises(
        ValueError, match=r"returned an array of shape 4x8 for 5 texts; expected 5x8"
    ):
        scorer.score_many(traces)


def test_the_cache_is_sized_from_the_embedder() -> None:
    scorer = kp.Scorer(embedder=_Wide())
    assert scorer.cache.dimensions == 768  # read before the first score
    first, second = scorer.score_many([make_trace(trace_id="kp:trace:a"), make_trace()])
    assert first.novelty_source == "empty_cache"
    assert second.nearest == kp.Nearest("kp:trace:a", approx_float(1.0))


@pytest.mark.skipif(not TAU.exists(), reason="the tau-bench corpus is not beside the repository")
def test_raw_logs_without_from_get_one_hint_and_every_problem(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = kp_run(capsys, "validate", str(TAU))
    assert code == 1
    assert err.count("hint: these records look like openai logs: use --from openai") == 1
    listed = out.splitlines()
    assert len(listed) == 200 * 7  # 200 records of 7 problems each, none folded
    assert len({line.split(": ")[0] for line in listed}) == 200  # every record, by its line
    assert sum(": @context: required field is missing" in line for line in listed) == 200
    assert "records in: 200 = processed 0 + rejected 200" in err


def test_kp_import_without_from_says_the_option_is_missing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = kp_run(capsys, "import", str(EXAMPLES / "traces.jsonl"))
    assert code == 2
    assert "Missing option '--from'" in err
