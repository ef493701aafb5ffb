"""Drive ``kp`` as a user would: real files, broken files, stdin, gzip, directories, exit codes."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from _helpers import WORKED_EXAMPLE, make_trace
from knowledgepulse.cli import main

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def kp(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def write_jsonl(path: Path, records: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_score_examples(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = kp(capsys, "score", str(EXAMPLES / "traces.jsonl"))
    assert code == 0
    rows = lines(out)
    assert len(rows) == 30
    first = rows[0]
    assert first["id"] == WORKED_EXAMPLE["id"]
    assert first["score"] == 0.66875
    assert first["source"].endswith("traces.jsonl") and first["line"] == 1
    for key in (
        "complexity",
        "novelty",
        "tool_diversity",
        "outcome",
        "profile",
        "rules",
        "novelty_source",
    ):
        assert key in first
    assert "records in: 30 = processed 30 + rejected 0" in err
    assert "median" in err and "traces/s" in err and "per domain" in err


def test_threshold_and_accepted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    accepted = tmp_path / "keep.jsonl"
    code, out, err = kp(
        capsys,
        "score",
        str(EXAMPLES / "traces.jsonl"),
        "--threshold",
        "0.7",
        "--accepted",
        str(accepted),
    )
    assert code == 0
    rows = lines(out)
    passing = [r for r in rows if r["score"] >= 0.7]
    assert [r["passed"] for r in rows] == [r["score"] >= 0.7 for r in rows]
    kept = lines(accepted.read_text())
    assert [k["id"] for k in kept] == [r["id"] for r in passing]
    assert [k["metadata"]["quality_score"] for k in kept] == [r["score"] for r in passing]
    assert f"passed threshold 0.7: {len(passing)} of 30" in err


def test_rejected_records_are_reported_and_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rejects = tmp_path / "bad.jsonl"
    output = tmp_path / "scores.jsonl"
    code, out, err = kp(
        capsys,
        "score",
        str(EXAMPLES / "invalid_traces.jsonl"),
        "--rejects",
        str(rejects),
        "-o",
        str(output),
    )
    assert code == 1
    assert out == ""
    assert len(lines(output.read_text())) == 4
    bad = lines(rejects.read_text())
    assert [b["line"] for b in bad] == [2, 4, 6]
    assert any("steps[0].type" in e for e in bad[1]["errors"])
    assert bad[1]["record"]["id"] == "kp:trace:invalid-multi-problem"
    assert bad[0]["errors"][0].startswith("invalid JSON")
    assert "invalid_traces.jsonl:4: steps[0].type: expected one of" in err
    assert "invalid_traces.jsonl:6: expected a JSON object, got an array" in err
    assert "records in: 7 = processed 4 + rejected 3" in err


def test_wrong_types_are_rejected_with_field_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = make_trace()
    bad["metadata"]["success"] = "yes"
    path = write_jsonl(tmp_path / "t.jsonl", [make_trace(), bad, "just a string", None])
    code, out, err = kp(capsys, "score", str(path))
    assert code == 1
    assert len(lines(out)) == 1
    assert f"{path}:2: metadata.success: input should be a valid boolean (got 'yes')" in err
    assert f"{path}:3: expected a JSON object, got a string" in err
    assert f"{path}:4: expected a JSON object, got null" in err


def test_json_list_gzip_and_directories(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "sub").mkdir()
    traces = [make_trace(trace_id=f"kp:trace:{i}") for i in range(3)]
    (tmp_path / "sub" / "list.json").write_text(json.dumps(traces, indent=2))
    (tmp_path / "one.json").write_text(json.dumps(make_trace(trace_id="kp:trace:one")))
    with gzip.open(tmp_path / "sub" / "more.jsonl.gz", "wt") as f:
        f.write(json.dumps(make_trace(trace_id="kp:trace:gz")) + "\n\n")
    (tmp_path / "notes.txt").write_text("not a record file")
    code, out, err = kp(capsys, "score", str(tmp_path))
    assert code == 0, err
    rows = lines(out)
    assert sorted(r["id"] for r in rows) == sorted(
        ["kp:trace:0", "kp:trace:1", "kp:trace:2", "kp:trace:one", "kp:trace:gz"]
    )
    by_id = {r["id"]: r for r in rows}
    assert by_id["kp:trace:1"]["line"] > by_id["kp:trace:0"]["line"] > 1  # elements located by line
    assert by_id["kp:trace:gz"]["source"].endswith("more.jsonl.gz")


def test_broken_json_list_element(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "l.json"
    path.write_text("[\n" + json.dumps(make_trace()) + ",\n{broken\n]")
    code, out, err = kp(capsys, "score", str(path))
    assert code == 1
    assert len(lines(out)) == 1
    assert f"{path}:3: invalid JSON" in err


def test_usage_errors_exit_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for args in (
        ["score", str(tmp_path / "missing.jsonl")],
        ["score", "--no-such-option", "x"],
        ["score", str(EXAMPLES / "traces.jsonl"), "--accepted", "x.jsonl"],
        ["score", str(EXAMPLES / "traces.jsonl"), "--threshold", "1.5"],
        ["score", str(EXAMPLES / "traces.jsonl"), "--profiles", str(tmp_path / "nope.toml")],
        ["nonsense"],
    ):
        code, _, err = kp(capsys, *args)
        assert code == 2, args
        assert err.startswith("kp: error: ") and err.count("\n") == 1, err
        assert "Traceback" not in err


def test_custom_profiles(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", [make_trace(domain="security")])
    code, out, _ = kp(capsys, "score", str(path), "--profiles", str(EXAMPLES / "profiles.toml"))
    assert code == 0
    row = lines(out)[0]
    assert row["profile"] == "security"
    assert row["weights"] == {
        "complexity": 0.3,
        "novelty": 0.3,
        "tool_diversity": 0.2,
        "outcome": 0.2,
    }
    bad = tmp_path / "bad.toml"
    bad.write_text("[profiles.x]\ncomplexity=0.5\nnovelty=0.5\ntool_diversity=0.5\noutcome=0.5\n")
    code, _, err = kp(capsys, "score", str(path), "--profiles", str(bad))
    assert code == 2 and "must sum to 1.0" in err


def test_validate_lists_every_problem(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = kp(capsys, "validate", str(EXAMPLES / "invalid_traces.jsonl"))
    assert code == 1
    listed = out.splitlines()
    assert len(listed) == 5
    assert all(line.startswith(str(EXAMPLES / "invalid_traces.jsonl") + ":") for line in listed)
    assert any(":4: metadata.success: required field is missing" in line for line in listed)
    assert any(":4: outcome.confidence:" in line for line in listed)
    assert "3 invalid" in err
    code, out, _ = kp(capsys, "validate", str(EXAMPLES / "traces.jsonl"))
    assert code == 0 and out == ""


def test_validate_lists_every_invalid_record_unfolded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 200 records broken the same way: validate lists all 200 (score and import fold them).
    missing = make_trace()
    del missing["metadata"]["success"]
    source = write_jsonl(tmp_path / "t.jsonl", [missing] * 100 + [[1]] * 100)
    code, out, err = kp(capsys, "validate", str(source))
    assert code == 1
    assert out.splitlines() == [
        f"{source}:{n}: metadata.success: required field is missing" for n in range(1, 101)
    ] + [f"{source}:{n}: expected a JSON object, got an array" for n in range(101, 201)]
    assert "more records like these" not in out + err
    assert "records in: 200 = processed 0 + rejected 200: 0 valid, 200 invalid" in err
    code, _, err = kp(capsys, "score", "--no-embed", str(source))
    assert code == 1
    assert err.count(f"{source}:") == 6
    assert "… and 97 more records like these (metadata.success: required field is" in err


def test_concatenated_pretty_printed_traces_are_read_one_by_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # What `jq . traces.jsonl` writes, with one trace cut short in the middle.
    pretty = [json.dumps(make_trace(trace_id=f"kp:trace:{n}"), indent=2) for n in range(3)]
    cut = pretty[1][: len(pretty[1]) // 2]
    source = tmp_path / "t.jsonl"
    source.write_text("\n".join([pretty[0], cut, *pretty[1:]]) + "\n")
    starts = [1]
    for text in [pretty[0], cut, pretty[1]]:
        starts.append(starts[-1] + text.count("\n") + 1)
    code, out, err = kp(capsys, "validate", str(source))
    assert code == 1, err
    assert "internal error" not in err
    assert "records in: 4 = processed 3 + rejected 1: 3 valid, 1 invalid" in err
    (problem,) = out.splitlines()
    assert problem.startswith(f"{source}:") and ": invalid JSON: " in problem
    code, out, err = kp(capsys, "score", "--no-embed", str(source))
    assert code == 1, err
    assert [(r["id"], r["line"]) for r in lines(out)] == [
        ("kp:trace:0", starts[0]),
        ("kp:trace:1", starts[2]),
        ("kp:trace:2", starts[3]),
    ]


def test_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = kp(capsys, "--version")
    assert code == 0 and out.startswith("kp (knowledgepulse) ")
    for command in ("score", "validate"):
        code, out, _ = kp(capsys, command, "--help")
        assert code == 0 and "Examples:" in out


def run_kp(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KNOWLEDGEPULSE_EMBEDDER": "none"}
    return subprocess.run(
        [sys.executable, "-m", "knowledgepulse", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def test_stdin_jsonl_and_json_document() -> None:
    text = (EXAMPLES / "traces.jsonl").read_text()
    result = run_kp("score", "-", "-q", stdin=text)
    assert result.returncode == 0, result.stderr
    assert len(lines(result.stdout)) == 30
    assert result.stderr == ""
    pretty = json.dumps(
        [make_trace(trace_id="kp:trace:a"), make_trace(trace_id="kp:trace:b")], indent=2
    )
    result = run_kp("score", "-", "-q", stdin=pretty)
    assert result.returncode == 0, result.stderr
    assert [r["id"] for r in lines(result.stdout)] == ["kp:trace:a", "kp:trace:b"]
    assert all(r["source"] == "<stdin>" for r in lines(result.stdout))


def test_python_m_usage_error_has_no_traceback() -> None:
    result = run_kp("score", "/nonexistent/file.jsonl")
    assert result.returncode == 2
    assert (
        result.stderr.strip()
        == "kp: error: no such file or directory: /nonexistent/file.jsonl (see 'kp score --help')"
    )


def test_table_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)  # not a terminal: the whole table
    code, out, _ = kp(
        capsys, "score", str(EXAMPLES / "traces.jsonl"), "-o", str(tmp_path / "s.jsonl"), "--table"
    )
    assert code == 0
    assert "value scores" in out and "finance-demo-001" in out and "single_thought" in out
    assert len(lines((tmp_path / "s.jsonl").read_text())) == 30


@pytest.mark.parametrize(
    ("columns", "left_out"),
    [
        (80, "profile, rules fired, tools, outcome"),
        (60, "profile, rules fired, tools, outcome, complexity"),
        (150, None),
    ],
)
def test_table_fits_the_terminal_saying_what_it_left_out(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    columns: int,
    left_out: str | None,
) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))  # what a terminal of that width sets
    monkeypatch.setenv("KNOWLEDGEPULSE_EMBEDDER", "none")
    output = tmp_path / "s.jsonl"
    code, out, _ = kp(capsys, "score", str(EXAMPLES / "traces.jsonl"), "-o", str(output), "--table")
    assert code == 0
    table = out.splitlines()
    assert max(len(line.rstrip()) for line in table) <= columns
    rows = [line for line in table if line.startswith("│")]
    assert [int(row.split("│")[1]) for row in rows] == list(range(1, 31))  # one row per trace
    assert ("│ finance-demo-001 " in out) == (columns >= 80)  # a short id whole where it fits
    long_id = {80: "│ 550e8400-e29b-41d4… │", 60: "│ 550e8400-e2… │"}
    assert long_id.get(columns, "│ 550e8400-e29b-41d4-a716-446655440000 │") in out
    assert "│  0.500* │" in out
    notes = table[table.index(next(line for line in table if line.startswith("└"))) + 1 :]
    assert notes[0] == "novelty: * no embedder (0.5)"
    if left_out is None:
        assert notes == ["novelty: * no embedder (0.5)"]
        assert "code-review → default" in out
    else:
        assert " ".join(note.strip() for note in notes[1:]) == (
            f"left out to fit {columns} columns: {left_out} (the -o file has every figure)"
        )


def test_table_in_a_file_is_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    output = tmp_path / "s.jsonl"
    code, out, _ = kp(capsys, "score", str(EXAMPLES / "traces.jsonl"), "-o", str(output), "--table")
    assert code == 0
    assert "left out" not in out and "0.500 (no embedder)" in out and "rules fired" in out
    assert all(
        line.startswith(("value scores", "┏", "┃", "┡", "│", "└")) for line in out.splitlines()
    )


def test_eval_scheduling(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "report.json"
    code, out, err = kp(
        capsys,
        "eval",
        str(EXAMPLES / "scheduling.jsonl"),
        "--rubric",
        "scheduling",
        "--report-json",
        str(report),
    )
    assert code == 0, err
    rows = lines(out)
    cases = [
        json.loads(line)
        for line in (EXAMPLES / "scheduling.jsonl").read_text().splitlines()
        if line.strip()
    ]
    assert len(rows) == len(cases)
    assert [r["case_id"] for r in rows] == [c["id"] for c in cases]
    assert {r["outcome_type"] for r in rows} == {
        "successful_completion",
        "graceful_failure",
        "partial_failure",
        "hard_failure",
    }
    assert all(r["source"].endswith("scheduling.jsonl") for r in rows)
    data = json.loads(report.read_text())
    assert data["count"] == len(cases)
    assert sum(data["outcome_counts"].values()) == len(cases)
    rates = [c["pass_rate"] for c in data["criteria"]]
    assert rates == sorted(rates)  # weakest first
    assert (
        "weakest first" in err
        and f"records in: {len(cases)} = processed {len(cases)} + rejected 0" in err
    )


def test_eval_rejects_bad_cases_and_unknown_rubric(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = json.loads((EXAMPLES / "scheduling.jsonl").read_text().splitlines()[0])
    bad_trace = {**good, "id": "with-bad-trace", "trace": {"@type": "ReasoningTrace"}}
    path = tmp_path / "cases.jsonl"
    path.write_text(json.dumps(good) + "\n{oops\n[1]\n" + json.dumps(bad_trace) + "\n")
    code, out, err = kp(capsys, "eval", str(path), "--rubric", "scheduling")
    assert code == 1
    assert len(lines(out)) == 1
    assert f"{path}:2: invalid JSON" in err
    assert f"{path}:3: a case must be a JSON object, got an array" in err
    assert f"{path}:4: " in err and "@context" in err
    assert "records in: 4 = processed 1 + rejected 3" in err
    code, _, err = kp(capsys, "eval", str(path), "--rubric", "no_such_module.x:RUBRIC")
    assert code == 2 and err.startswith("kp: error: Invalid value for --rubric")


def test_eval_custom_rubric_from_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rubric_file = tmp_path / "my_rubric.py"
    rubric_file.write_text(
        "from knowledgepulse.rubrics import Rubric, Criterion\n"
        "RUBRIC = Rubric('answered', [\n"
        "    Criterion('has_answer', 0.6, lambda c: bool(c.final_state.get('answer'))),\n"
        "    Criterion('polite', 0.4, lambda c: 'thanks' in c.conversation_trace[-1]['response']),\n"
        "])\n"
    )
    cases = tmp_path / "c.jsonl"
    cases.write_text(
        json.dumps(
            {
                "id": "a",
                "final_state": {"answer": 42},
                "conversation_trace": [{"response": "thanks!"}],
            }
        )
        + "\n"
        + json.dumps({"id": "b", "final_state": {}, "conversation_trace": []})
        + "\n"
    )
    code, out, err = kp(
        capsys, "eval", str(cases), "--rubric", f"{rubric_file}:RUBRIC", "--allow-check-errors"
    )
    assert code == 0, err
    a, b = lines(out)
    assert (a["score"], a["outcome_type"]) == (1.0, "successful_completion")
    assert (b["score"], b["outcome_type"]) == (0.0, "hard_failure")
    assert "polite" in b["errors"]  # the raising check is recorded, the run goes on


def test_report_from_score_and_eval_outputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib")
    scores, evals, html = tmp_path / "s.jsonl", tmp_path / "e.jsonl", tmp_path / "r.html"
    assert (
        kp(
            capsys,
            "score",
            str(EXAMPLES / "traces.jsonl"),
            "--threshold",
            "0.6",
            "-o",
            str(scores),
            "-q",
        )[0]
        == 0
    )
    assert (
        kp(
            capsys,
            "eval",
            str(EXAMPLES / "scheduling.jsonl"),
            "--rubric",
            "scheduling",
            "-o",
            str(evals),
            "-q",
        )[0]
        == 0
    )
    code, _, err = kp(capsys, "report", str(scores), str(evals), "-o", str(html))
    assert code == 0, err
    page = html.read_text()
    assert page.count("<svg") >= 5 and "threshold 0.6" in page
    assert "30 score records, 28 evaluation records, 0 lines skipped" in err
    code, _, err = kp(
        capsys, "report", str(EXAMPLES / "invalid_traces.jsonl"), "-o", str(tmp_path / "x.html")
    )
    assert code == 1 and "no kp score or kp eval records" in err


IMPORT_DATA = ROOT / "tests" / "data" / "importers"


def test_import_openai_tau_sample(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sample = ROOT / "tests" / "data" / "tau_bench_sample.json"
    out_file = tmp_path / "traces.jsonl"
    code, _, err = kp(capsys, "import", "--from", "openai", str(sample), "-o", str(out_file))
    assert code == 0, err
    records = json.loads(sample.read_text())
    traces = lines(out_file.read_text())
    assert len(traces) == len(records)
    assert [t["metadata"]["success"] for t in traces] == [r["reward"] == 1.0 for r in records]
    assert "traces written: " + str(len(records)) in err
    code, out, err = kp(
        capsys, "score", "--from", "openai", str(sample), "--domain", "customer_service"
    )
    assert code == 0, err
    assert [r["profile"] for r in lines(out)] == ["customer_service"] * len(records)


def test_import_reports_unconvertible_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rejects = tmp_path / "bad.jsonl"
    code, out, err = kp(
        capsys,
        "import",
        "--from",
        "openai",
        str(IMPORT_DATA / "openai_malformed.json"),
        "--rejects",
        str(rejects),
    )
    assert code == 1 and out == ""
    assert (
        "openai_malformed.json:1: traj[3].tool_calls[0].function.arguments: not valid JSON" in err
    )
    assert lines(rejects.read_text())[0]["line"] == 1
    code, _, err = kp(capsys, "import", "--from", "nosuch", str(IMPORT_DATA / "openai_chat.json"))
    assert code == 2 and "unknown format 'nosuch'" in err


@pytest.mark.parametrize(
    "name", sorted(p.name for p in IMPORT_DATA.glob("*.json") if "malformed" not in p.name)
)
def test_import_auto_detects_every_fixture(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = kp(capsys, "import", "--from", "auto", str(IMPORT_DATA / name), "-q")
    assert code == 0, err
    assert all(t["@type"] == "ReasoningTrace" for t in lines(out)) and lines(out)


def test_ctrl_c_stops_cleanly_keeping_whole_lines(tmp_path: Path) -> None:
    import signal
    import time

    big = tmp_path / "big.jsonl"
    line = json.dumps(make_trace())
    big.write_text(
        "".join(line.replace("kp:trace:test", f"kp:trace:{i}") + "\n" for i in range(60_000))
    )
    out_file = tmp_path / "out.jsonl"
    env = {**os.environ, "KNOWLEDGEPULSE_EMBEDDER": "none"}
    process = subprocess.Popen(
        [sys.executable, "-m", "knowledgepulse", "score", str(big), "-o", str(out_file)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (
        not out_file.exists() or out_file.stat().st_size < 100_000
    ):
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    written = out_file.read_text()
    assert written.endswith("\n")
    rows = lines(written)
    assert 0 < len(rows) < 60_000
    assert [r["id"] for r in rows] == [f"kp:trace:{i}" for i in range(len(rows))]


@pytest.mark.parametrize("choice", ["onnx", "bf16"])
def test_embedder_choice(choice: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from knowledgepulse.embedding import embedder_available

    if not embedder_available():
        pytest.skip("the embedder is not installed")
    if choice == "bf16":
        pytest.importorskip("torch")
    monkeypatch.delenv("KNOWLEDGEPULSE_EMBEDDER")
    out_file = tmp_path / "s.jsonl"
    assert (
        main(
            [
                "score",
                str(EXAMPLES / "traces.jsonl"),
                "--embedder",
                choice,
                "-o",
                str(out_file),
                "-q",
            ]
        )
        == 0
    )
    rows = {r["id"]: r for r in lines(out_file.read_text())}
    assert rows["kp:trace:7c9e6679-7425-40de-944b-e07fc1f90ae7"]["novelty"] < 0.01  # a content copy
    assert all(r["novelty_source"] in {"embedding", "empty_cache"} for r in rows.values())
