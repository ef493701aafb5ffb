"""The batch verbs as library calls: each returns a RunReport whose counts, rejections (file,
line, field, reason), summary and stop are exact, which renders what ``kp`` prints and
round-trips to JSON."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import knowledgepulse
from _helpers import make_trace
from knowledgepulse import RejectedRecord, RunReport, convert_files, redact_files, validate_files
from knowledgepulse.runs import (
    ConvertSummary,
    OutputOverwritesInput,
    RedactSummary,
    RunCounts,
    ValidateSummary,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
INVALID = str(EXAMPLES / "invalid_traces.jsonl")
TRACES = str(EXAMPLES / "traces.jsonl")
TAU_BENCH = str(EXAMPLES / "tau-bench" / "gpt-4o-airline.json.gz")


def kp_stderr(*args: str) -> str:
    """What ``kp ARGS`` writes on stderr (a pipe, 80 columns wide)."""
    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": str(ROOT / "src")}
    command = [sys.executable, "-m", "knowledgepulse", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, check=False).stderr


def round_trips(report: RunReport) -> bool:
    return bool(RunReport.model_validate_json(report.model_dump_json()) == report)


def test_the_verbs_are_importable_from_the_package() -> None:
    for name in ("validate_files", "convert_files", "redact_files", "RunReport"):
        assert name in knowledgepulse.__all__


def test_validate_reports_every_problem_with_file_line_and_field() -> None:
    report = validate_files([INVALID])
    assert report.verb == "validate"
    assert report.inputs == [INVALID]
    assert report.counts == RunCounts(records_in=7, processed=4, rejected=3)
    assert report.rejections == [
        RejectedRecord(
            file=INVALID, line=2, reason="invalid JSON: Expecting ',' delimiter (column 944)"
        ),
        RejectedRecord(
            file=INVALID, line=4, field="metadata.success", reason="required field is missing"
        ),
        RejectedRecord(
            file=INVALID,
            line=4,
            field="steps[0].type",
            reason="expected one of 'thought', 'tool_call', 'observation', 'error_recovery' "
            "(got 'plan')",
        ),
        RejectedRecord(
            file=INVALID,
            line=4,
            field="outcome.confidence",
            reason="input should be less than or equal to 1 (got 1.4)",
        ),
        RejectedRecord(file=INVALID, line=6, reason="expected a JSON object, got an array"),
    ]
    assert str(report.rejections[1]) == f"{INVALID}:4: metadata.success: required field is missing"
    assert report.summary == ValidateSummary()
    assert report.stopped_by is None
    assert report.exit_code() == 1
    assert report.render() == "records in: 7 = processed 4 + rejected 3: 4 valid, 3 invalid\n"
    assert set(report.timings) == {"total"}
    assert round_trips(report)


def test_validate_lists_the_problems_where_asked_as_they_are_found() -> None:
    class Lines:
        def __init__(self) -> None:
            self.printed: list[str] = []

        def print(self, text: str, **_: Any) -> None:
            self.printed.append(text)

    lines = Lines()
    report = validate_files([INVALID], problems_to=lines)
    assert lines.printed == [str(rejection) for rejection in report.rejections]


def test_validate_counts_a_record_rejected_for_some_of_its_traces_once(tmp_path: Path) -> None:
    # One OTLP export of two traces, the second's messages broken: the record is rejected
    # (its good trace still converts), never also counted as processed.
    path = tmp_path / "spans.jsonl"
    path.write_text(json.dumps(_export_of_two_traces_one_broken()) + "\n")
    report = validate_files([str(path)], source_format="otel")
    assert report.counts == RunCounts(records_in=1, processed=0, rejected=1)
    assert report.accounting() == "records in: 1 = processed 0 + rejected 1"
    assert report.rejections == [
        RejectedRecord(
            file=str(path),
            line=1,
            field="resourceSpans[0].scopeSpans[0].spans[1].attributes[gen_ai.input.messages]",
            reason="not valid JSON",
        )
    ]


def test_validate_stopped_by_max_errors() -> None:
    report = validate_files([INVALID], max_errors=1)
    assert report.counts == RunCounts(records_in=2, processed=1, rejected=1)
    assert report.stopped_by == "max_errors"
    assert report.render() == (
        "records in: 2 = processed 1 + rejected 1 (stopped by --max-errors: the rest of the "
        "input was not read): 1 valid, 1 invalid\n"
    )
    assert round_trips(report)


class InterruptedStdin:
    """Standard input that delivers ``lines`` and then Ctrl-C."""

    def __init__(self, lines: list[bytes]) -> None:
        self._lines = lines

    def __iter__(self) -> Iterator[bytes]:
        yield from self._lines
        raise KeyboardInterrupt

    def read(self) -> bytes:
        raise KeyboardInterrupt


def test_validate_interrupted_returns_its_report_and_puts_the_handlers_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lines = [json.dumps(make_trace(trace_id=f"kp:trace:{n}")).encode() + b"\n" for n in (1, 2)]
    monkeypatch.setattr(sys, "stdin", InterruptedStdin([*lines, b"{broken\n"]))
    handler = signal.getsignal(signal.SIGINT)
    report = validate_files(["-"])
    assert report.counts == RunCounts(records_in=3, processed=2, rejected=1)
    assert report.stopped_by == "interrupted"
    assert report.stop_signal is None  # Ctrl-C raised in-process, not a signal
    assert report.exit_code() == 130
    assert report.accounting() == (
        "records in: 3 = processed 2 + rejected 1 (interrupted: the rest of the input was not read)"
    )
    assert report.rejections == [
        RejectedRecord(
            file="<stdin>",
            line=3,
            reason="invalid JSON: Expecting property name enclosed in double quotes (column 2)",
        )
    ]
    assert signal.getsignal(signal.SIGINT) is handler  # a library run leaves no handler behind
    assert round_trips(report)


def test_convert_writes_the_traces_and_counts_them(tmp_path: Path) -> None:
    output = tmp_path / "traces.jsonl.gz"
    report = convert_files([TAU_BENCH], source_format="openai", output=str(output))
    assert report.counts == RunCounts(records_in=200, processed=200, outputs=200)
    assert report.summary == ConvertSummary(traces_written=200)
    lines = gzip.decompress(output.read_bytes()).decode().splitlines()
    assert len(lines) == 200
    assert report.render() == "records in: 200 = processed 200 + rejected 0; traces written: 200\n"
    assert report.exit_code() == 0
    assert round_trips(report)


def test_convert_writes_rejects_and_refuses_to_overwrite_an_input(tmp_path: Path) -> None:
    rejects = tmp_path / "rejects.jsonl"
    report = convert_files(
        [INVALID], source_format="trace", output=str(tmp_path / "out.jsonl"), rejects=str(rejects)
    )
    assert report.counts == RunCounts(records_in=7, processed=4, rejected=3, outputs=4)
    assert [json.loads(line)["line"] for line in rejects.read_text().splitlines()] == [2, 4, 6]
    with pytest.raises(OutputOverwritesInput) as refused:
        convert_files([INVALID], source_format="trace", output=INVALID)
    assert str(refused.value) == f"output {INVALID} is also an input file: refusing to overwrite it"


def test_redact_counts_what_it_replaced(tmp_path: Path) -> None:
    output = tmp_path / "redacted.jsonl"
    report = redact_files([TRACES], output=str(output))
    assert report.counts == RunCounts(records_in=30, processed=30, outputs=30)
    assert report.summary == RedactSummary(traces_written=30, redacted={"email": 1})
    assert len(output.read_text().splitlines()) == 30
    assert report.render() == (
        "records in: 30 = processed 30 + rejected 0; traces written: 30\nredacted: email 1\n"
    )
    assert round_trips(report)


def test_a_field_is_a_path_before_the_first_colon_never_words() -> None:
    from knowledgepulse.runs import LocatedProblem

    def field(problem: str) -> str | None:
        rejected: RejectedRecord = RejectedRecord.of(LocatedProblem("f.jsonl", 1, None, problem))
        return rejected.field

    assert field("@context: required field is missing") == "@context"
    assert field("[17].run_type: unknown") == "[17].run_type"
    assert field("traj[3].tool_calls[0].function.arguments: not valid JSON") == (
        "traj[3].tool_calls[0].function.arguments"
    )
    assert field("invalid JSON: Expecting value (column 1)") is None
    assert field("not valid UTF-8 at byte 4") is None


def _export_of_two_traces_one_broken() -> dict[str, Any]:
    def attributes(messages: str) -> list[dict[str, Any]]:
        values = {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": messages,
            "gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": "Pinging."}]}]
            ),
        }
        return [{"key": key, "value": {"stringValue": value}} for key, value in values.items()]

    user = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "Ping the host."}]}])
    spans = [
        {
            "traceId": trace_id,
            "spanId": "1",
            "name": "chat",
            "startTimeUnixNano": "1000",
            "endTimeUnixNano": "2000",
            "attributes": attributes(messages),
        }
        for trace_id, messages in (("aa", user), ("bb", "{not json"))
    ]
    return {"resourceSpans": [{"scopeSpans": [{"scope": {"name": "t"}, "spans": spans}]}]}


def test_kp_validate_counts_a_partly_broken_record_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from knowledgepulse.cli import main

    path = tmp_path / "spans.jsonl"
    path.write_text(json.dumps(_export_of_two_traces_one_broken()) + "\n")
    assert main(["validate", "--from", "otel", str(path)]) == 1
    err = capsys.readouterr().err
    assert err == "records in: 1 = processed 0 + rejected 1: 0 valid, 1 invalid\n"


SCHEDULING = str(EXAMPLES / "scheduling.jsonl")


def test_evaluate_grades_every_case_and_reports_the_failed_gates(tmp_path: Path) -> None:
    from knowledgepulse.runs import EvaluateSummary, evaluate_files

    output, report_json = tmp_path / "results.jsonl", tmp_path / "report.json"
    report = evaluate_files(
        [SCHEDULING],
        "scheduling",
        output=str(output),
        report_json=str(report_json),
        fail_under=0.99,
        min_pass_rates={"correct_time": 0.4},
    )
    assert report.verb == "evaluate"
    assert report.counts == RunCounts(records_in=28, processed=28, outputs=28)
    assert isinstance(report.summary, EvaluateSummary)
    evaluation = report.summary.evaluation
    assert (report.summary.rubric, evaluation.count, evaluation.mean_score) == (
        "scheduling",
        28,
        0.526785714286,
    )
    assert report.gates == [
        "mean score 0.5268 is below the minimum 0.99",
        "criterion 'correct_time': pass rate 39% (11/28) is below the minimum 40%",
    ]
    assert report.exit_code() == 1
    assert len(output.read_text().splitlines()) == 28
    assert json.loads(report_json.read_text())["count"] == 28
    text = report.render()
    assert text.startswith("Rubric 'scheduling'\n")
    assert text == kp_stderr(
        "eval",
        SCHEDULING,
        "--rubric",
        "scheduling",
        "-o",
        str(tmp_path / "kp.jsonl"),
        "--fail-under",
        "0.99",
        "--min-pass-rate",
        "correct_time=0.4",
    )
    assert text.endswith(
        "records in: 28 = processed 28 + rejected 0\n"
        "gate failed: mean score 0.5268 is below the minimum 0.99\n"
        "gate failed: criterion 'correct_time': pass rate 39% (11/28) is below the minimum 40%\n"
    )
    assert round_trips(report)


def test_evaluate_rejects_with_file_line_and_the_sink_hears_of_it(tmp_path: Path) -> None:
    from contextlib import nullcontext

    from knowledgepulse.runs import evaluate_files

    class Sink:
        def __init__(self) -> None:
            self.rejected: list[str] = []
            self.added = 0

        def reject(self, where: str, messages: Any) -> None:
            self.rejected.append(where)

        def timed(self) -> Any:
            return nullcontext()

        def label(self, line: Any, data: Any) -> Any:
            return line

        def add_eval(self, record: Any, case: Any, line: Any) -> None:
            self.added += 1

    sink = Sink()
    report = evaluate_files(
        [INVALID], "agent", output=str(tmp_path / "out.jsonl"), sink=sink, max_errors=2
    )
    assert report.counts == RunCounts(records_in=4, processed=2, rejected=2, outputs=2)
    assert report.stopped_by == "max_errors"
    assert [(r.line, r.field) for r in report.rejections] == [
        (2, None),
        (4, "metadata.success"),
        (4, "steps[0].type"),
        (4, "outcome.confidence"),
    ]
    assert sink.rejected == [f"{INVALID}:2", f"{INVALID}:4"]
    assert sink.added == 2
    assert report.gates == []
    assert round_trips(report)


def test_score_writes_a_line_per_trace_and_summarises_them(tmp_path: Path) -> None:
    from knowledgepulse import Scorer, score_files
    from knowledgepulse.runs import ScoreDomain, ScoreRunSummary

    output, accepted = tmp_path / "scores.jsonl", tmp_path / "accepted.jsonl"
    seen: list[str] = []
    report = score_files(
        [TRACES],
        Scorer(embedder=None, threshold=0.5),
        output=str(output),
        accepted=str(accepted),
        on_line=lambda line, _record: seen.append(line),
    )
    assert report.counts == RunCounts(records_in=30, processed=30, outputs=30)
    summary = report.summary
    assert isinstance(summary, ScoreRunSummary)
    assert (summary.traces_scored, summary.passed, summary.threshold) == (30, 26, 0.5)
    assert (summary.minimum, summary.median, summary.mean, summary.maximum) == (
        0.1,
        0.694,
        0.6474977172706,
        0.9005,
    )
    assert summary.histogram == [0, 1, 0, 1, 2, 5, 7, 11, 2, 1]
    assert summary.domains[0] == ScoreDomain(
        domain="code", count=7, mean=0.6612111744878572, passed=6
    )
    assert seen == output.read_text().splitlines()
    assert len(accepted.read_text().splitlines()) == 26
    text = report.render()
    assert text.startswith(
        "records in: 30 = processed 30 + rejected 0\n"
        "traces scored: 30   score min 0.100  median 0.694  mean 0.647  max 0.900\n"
    )
    assert "passed threshold 0.5: 26 of 30 (87%)\n" in text
    assert text.splitlines()[-1].startswith("took ")
    kp_text = kp_stderr(
        "score", "--no-embed", TRACES, "--threshold", "0.5", "-o", str(tmp_path / "kp.jsonl")
    )
    assert kp_text.splitlines()[:-1] == text.splitlines()[:-1]  # all but the timing
    assert round_trips(report)


def test_score_with_a_sink_makes_each_record_once_and_never_reads_a_line_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sink labels the record the scorer's fields make; the line written is that record,
    once: no score line is parsed back into a record (it was, before, for every trace)."""
    from knowledgepulse import Scorer, score_files
    from knowledgepulse.records import ScoreRecord

    def parsed_back(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("a score line was parsed back")

    monkeypatch.setattr(ScoreRecord, "model_validate_json", parsed_back)

    class Sink:
        active = True

        def __init__(self) -> None:
            self.records: list[ScoreRecord] = []

        def label(self, line: ScoreRecord, data: Any) -> ScoreRecord:
            return line.model_copy(update={"group": {"task": f"g-{data['id']}"}})

        def add_score(self, trace: Any, score: Any, line: ScoreRecord) -> None:
            self.records.append(line)

    sink, seen = Sink(), []
    output = tmp_path / "scores.jsonl"
    report = score_files(
        [TRACES],
        Scorer(embedder=None, threshold=0.5),
        output=str(output),
        sink=sink,
        on_line=lambda line, record: seen.append((line, record)),
    )
    assert report.counts == RunCounts(records_in=30, processed=30, outputs=30)
    lines = output.read_text().splitlines()
    assert [json.loads(line)["group"]["task"] for line in lines] == [
        f"g-{record.id}" for record in sink.records
    ]
    assert [record.to_json() for record in sink.records] == lines
    assert seen == list(zip(lines, sink.records))
    plain = tmp_path / "plain.jsonl"
    score_files([TRACES], Scorer(embedder=None, threshold=0.5), output=str(plain))
    for labelled, unlabelled in zip(lines, plain.read_text().splitlines()):
        assert {**json.loads(unlabelled), "group": json.loads(labelled)["group"]} == json.loads(
            labelled
        )


def test_score_refuses_workers_for_a_run_that_cannot_use_them() -> None:
    from knowledgepulse import Scorer, score_files
    from knowledgepulse.runs import WorkersRefused

    with pytest.raises(WorkersRefused):
        score_files([TRACES], Scorer(embedder=None), source_format="auto", workers=2)
