"""kp eval / kp score --junit (checked against the common JUnit schema) and --otel-endpoint."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
import xmlschema

from knowledgepulse.cli import main

from ._otlp_receiver import otlp_receiver

ROOT = Path(__file__).parents[2]
OTEL_GENAI = ROOT / "tests" / "data" / "importers" / "otel_genai.json"

# The constraints of the Apache Ant JUnit schema that CI reporters read (Jenkins, GitLab,
# GitHub test reporters): every attribute it requires, the order of a suite's children, at
# most one outcome per test case, a time-zone-free timestamp.
JUNIT_XSD = """<?xml version="1.0" encoding="UTF-8"?>
<xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema" elementFormDefault="qualified">
  <xs:simpleType name="stamp">
    <xs:restriction base="xs:dateTime">
      <xs:pattern value="[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}"/>
    </xs:restriction>
  </xs:simpleType>
  <xs:simpleType name="name">
    <xs:restriction base="xs:token"><xs:minLength value="1"/></xs:restriction>
  </xs:simpleType>
  <xs:complexType name="outcome">
    <xs:simpleContent>
      <xs:extension base="xs:string">
        <xs:attribute name="message" type="xs:string"/>
        <xs:attribute name="type" type="xs:string" use="required"/>
      </xs:extension>
    </xs:simpleContent>
  </xs:complexType>
  <xs:complexType name="testcase">
    <xs:choice minOccurs="0">
      <xs:element name="skipped"/>
      <xs:element name="error" type="outcome"/>
      <xs:element name="failure" type="outcome"/>
    </xs:choice>
    <xs:attribute name="name" type="xs:token" use="required"/>
    <xs:attribute name="classname" type="xs:token" use="required"/>
    <xs:attribute name="time" type="xs:decimal" use="required"/>
  </xs:complexType>
  <xs:complexType name="testsuite">
    <xs:sequence>
      <xs:element name="properties">
        <xs:complexType>
          <xs:sequence>
            <xs:element name="property" minOccurs="0" maxOccurs="unbounded">
              <xs:complexType>
                <xs:attribute name="name" type="name" use="required"/>
                <xs:attribute name="value" type="xs:string" use="required"/>
              </xs:complexType>
            </xs:element>
          </xs:sequence>
        </xs:complexType>
      </xs:element>
      <xs:element name="testcase" type="testcase" minOccurs="0" maxOccurs="unbounded"/>
      <xs:element name="system-out" type="xs:string"/>
      <xs:element name="system-err" type="xs:string"/>
    </xs:sequence>
    <xs:attribute name="name" type="name" use="required"/>
    <xs:attribute name="timestamp" type="stamp" use="required"/>
    <xs:attribute name="hostname" type="name" use="required"/>
    <xs:attribute name="tests" type="xs:int" use="required"/>
    <xs:attribute name="failures" type="xs:int" use="required"/>
    <xs:attribute name="errors" type="xs:int" use="required"/>
    <xs:attribute name="skipped" type="xs:int"/>
    <xs:attribute name="time" type="xs:decimal" use="required"/>
    <xs:attribute name="package" type="xs:token" use="required"/>
    <xs:attribute name="id" type="xs:int" use="required"/>
  </xs:complexType>
  <xs:element name="testsuites">
    <xs:complexType>
      <xs:sequence>
        <xs:element name="testsuite" type="testsuite" minOccurs="0" maxOccurs="unbounded"/>
      </xs:sequence>
      <xs:attribute name="tests" type="xs:int"/>
      <xs:attribute name="failures" type="xs:int"/>
      <xs:attribute name="errors" type="xs:int"/>
      <xs:attribute name="time" type="xs:decimal"/>
    </xs:complexType>
  </xs:element>
</xs:schema>
"""
SCHEMA = xmlschema.XMLSchema(JUNIT_XSD)

RUBRIC = """
from knowledgepulse.rubrics import Rubric
RUBRIC = Rubric("answers")

@RUBRIC.criterion(weight=0.7)
def answered(case):
    '''The agent answered.'''
    return bool(case.final_state.get("answer"))

@RUBRIC.criterion(weight=0.3)
def polite(case):
    '''The agent was polite.'''
    if case.final_state.get("boom"):
        raise KeyError("tone\\x01")
    return bool(case.final_state.get("polite"))
"""


def kp(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _setup(tmp_path: Path, cases: list[Any]) -> tuple[Path, str]:
    (tmp_path / "rubric.py").write_text(RUBRIC)
    path = tmp_path / "cases.jsonl"
    path.write_text("".join((c if isinstance(c, str) else json.dumps(c)) + "\n" for c in cases))
    return path, f"{tmp_path / 'rubric.py'}:RUBRIC"


CASES: list[Any] = [
    {"id": "good", "final_state": {"answer": "42", "polite": True}},
    {"id": "rude", "final_state": {"answer": "42"}},
    {"id": "crash", "final_state": {"answer": "42", "boom": True}},
    {"id": "typo", "final_sate": {}},
]


def test_junit_has_a_case_per_case_and_the_gates_and_fits_the_schema(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    cases, rubric = _setup(tmp_path, CASES)
    junit = tmp_path / "junit.xml"
    code, _, err = kp(
        capsys, "eval", str(cases), "--rubric", rubric, "-o", str(tmp_path / "out.jsonl"),
        "--junit", str(junit), "--fail-under", "0.5", "--min-pass-rate", "polite=0.5",
    )  # fmt: skip
    assert code == 1  # a rejected case and a check error
    SCHEMA.validate(str(junit))
    root = ElementTree.parse(junit).getroot()
    assert {k: root.get(k) for k in ("tests", "failures", "errors")} == {
        "tests": "7",
        "failures": "3",
        "errors": "2",
    }
    suite, gates = root.findall("testsuite")
    assert {k: suite.get(k) for k in ("name", "tests", "failures", "errors", "skipped")} == {
        "name": "answers",
        "tests": "4",
        "failures": "1",
        "errors": "2",
        "skipped": "0",
    }
    good, rude, crash, typo = suite.findall("testcase")
    assert (good.get("name"), good.get("classname"), list(good)) == ("good", "rubric.answers", [])
    failure = rude.find("failure")
    assert failure is not None
    assert failure.get("type") == "graceful_failure"
    assert failure.get("message") == "score 0.7 (graceful_failure); failed: polite"
    assert failure.text == (
        "Score 0.70 (graceful_failure). Passed: answered (0.70). Failed: polite (0.30)."
    )
    error = crash.find("error")
    assert error is not None
    assert (error.get("type"), error.get("message")) == (
        "KeyError",
        "polite: KeyError: 'tone\\x01'",
    )
    rejected = typo.find("error")
    assert rejected is not None and rejected.get("type") == "CaseError"
    assert (typo.get("name") or "").endswith("cases.jsonl:4")
    assert "did you mean 'final_state'" in (rejected.text or "")
    assert [
        (case.get("name"), [child.tag for child in case]) for case in gates.findall("testcase")
    ] == [
        ("mean score >= 0.5", []),
        ("polite pass rate >= 0.5", ["failure"]),
        ("no check raised", ["failure"]),
    ]
    assert "gate failed" in err


def test_kp_score_junit_fails_traces_below_the_threshold(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    junit = tmp_path / "junit.xml"
    code, _, _ = kp(
        capsys, "score", str(ROOT / "examples" / "traces.jsonl"), "--no-embed", "--threshold", "0.6",
        "-o", str(tmp_path / "scores.jsonl"), "--junit", str(junit), "-q",
    )  # fmt: skip
    assert code == 0
    SCHEMA.validate(str(junit))
    scores = [json.loads(line) for line in (tmp_path / "scores.jsonl").read_text().splitlines()]
    suite = ElementTree.parse(junit).getroot().find("testsuite")
    assert suite is not None
    failed = [
        case.get("name") for case in suite.findall("testcase") if case.find("failure") is not None
    ]
    assert failed == [s["id"] for s in scores if not s["passed"]]
    assert suite.get("failures") == str(len(failed))
    assert suite.get("tests") == str(len(scores))


def test_junit_refuses_to_overwrite_an_input(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    cases, rubric = _setup(tmp_path, CASES[:1])
    code, _, err = kp(capsys, "eval", str(cases), "--rubric", rubric, "--junit", str(cases))
    assert code == 2
    assert "--junit" in err and "is also an input file" in err


def test_kp_score_sends_one_event_per_trace_parented_to_its_span(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with otlp_receiver() as receiver:
        code, _, err = kp(
            capsys, "score", "--from", "otel", str(OTEL_GENAI), "--no-embed", "--threshold", "0.5",
            "-o", str(tmp_path / "scores.jsonl"), "--otel-endpoint", receiver.url,
        )  # fmt: skip
    assert code == 0
    scores = [json.loads(line) for line in (tmp_path / "scores.jsonl").read_text().splitlines()]
    assert len(receiver.events) == len(scores) >= 2
    first = receiver.events[0]
    assert (first.trace_id, first.span_id) == (
        "4bf92f3577b34da6a3ce929d0e0e4736",
        "a000000000000001",
    )
    assert [e.attributes["gen_ai.evaluation.score.value"] for e in receiver.events] == [
        s["score"] for s in scores
    ]
    assert [e.attributes["gen_ai.evaluation.score.label"] for e in receiver.events] == [
        "pass" if s["passed"] else "fail" for s in scores
    ]
    assert {e.attributes["gen_ai.evaluation.name"] for e in receiver.events} == {
        "knowledgepulse.value"
    }
    assert f"sent {len(scores)} evaluation events to {receiver.url}/v1/logs" in err


def test_kp_eval_events_carry_outcome_and_error_type(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    cases, rubric = _setup(tmp_path, CASES[:3])
    with otlp_receiver() as receiver:
        code, _, _ = kp(
            capsys, "eval", str(cases), "--rubric", rubric, "-o", str(tmp_path / "out.jsonl"),
            "--otel-endpoint", receiver.url, "--allow-check-errors",
        )  # fmt: skip
    assert code == 0
    assert [
        (
            e.attributes["gen_ai.evaluation.score.label"],
            e.attributes["gen_ai.evaluation.score.value"],
            e.attributes.get("error.type"),
        )
        for e in receiver.events
    ] == [
        ("successful_completion", 1.0, None),
        ("graceful_failure", 0.7, None),
        ("graceful_failure", 0.7, "KeyError"),
    ]


def test_an_endpoint_that_refuses_makes_the_run_fail(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    cases, rubric = _setup(tmp_path, CASES[:1])
    with otlp_receiver() as receiver:
        receiver.status = 400
        code, _, err = kp(
            capsys, "eval", str(cases), "--rubric", rubric, "-o", str(tmp_path / "out.jsonl"),
            "--otel-endpoint", receiver.url,
        )  # fmt: skip
    assert code == 1
    assert "1 of 1 evaluation events were not accepted" in err


def test_a_bad_endpoint_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    cases, rubric = _setup(tmp_path, CASES[:1])
    code, _, err = kp(
        capsys, "eval", str(cases), "--rubric", rubric, "--otel-endpoint", "localhost:4318"
    )
    assert code == 2
    assert "--otel-endpoint" in err and "expected an http(s):// URL" in err


def test_control_characters_do_not_break_the_xml(tmp_path: Path) -> None:
    from knowledgepulse.integrations._junit import JUnitReport
    from knowledgepulse.rubrics import Case, Rubric

    rubric = Rubric("r")

    @rubric.criterion(weight=1.0)
    def never(case: Case) -> bool:
        """Never passes."""
        return False

    report = JUnitReport("r")
    report.add(rubric.evaluate(Case(case_id="bell\x07case")))
    report.write(tmp_path / "junit.xml")
    SCHEMA.validate(str(tmp_path / "junit.xml"))
    case = ElementTree.parse(tmp_path / "junit.xml").getroot().find("testsuite/testcase")
    assert case is not None and case.get("name") == "bell\ufffdcase"


class StdoutInterruptedAtLine:
    """Standard output on which Ctrl-C arrives as line ``n`` is written (it is not written)."""

    def __init__(self, n: int) -> None:
        self._n = n
        self.lines: list[str] = []

    def write(self, text: str) -> int:
        if len(self.lines) + 1 == self._n:
            raise KeyboardInterrupt
        self.lines.append(text)
        return len(text)

    def flush(self) -> None:
        pass


def _junit_case_names(junit: Path) -> list[str | None]:
    suite = ElementTree.parse(junit).getroot().find("testsuite")
    assert suite is not None
    return [case.get("name") for case in suite.findall("testcase")]


def test_kp_score_sinks_take_a_record_only_once_it_is_written(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stdout = StdoutInterruptedAtLine(3)
    monkeypatch.setattr("sys.stdout", stdout)
    junit = tmp_path / "junit.xml"
    code = main(
        ["score", str(ROOT / "examples" / "traces.jsonl"), "--no-embed", "--threshold", "0.6",
         "--junit", str(junit), "-q"]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 130
    assert "records in: 30 = processed 2 + rejected 0 + not processed 28 (interrupted)" in err
    written = [json.loads(line)["id"] for line in stdout.lines]
    assert written == ["kp:trace:550e8400-e29b-41d4-a716-446655440000", "kp:trace:finance-demo-001"]
    assert _junit_case_names(junit) == written  # the third, not written, is not reported


def test_kp_eval_sinks_take_a_case_only_once_it_is_written(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cases, rubric = _setup(tmp_path, CASES[:3])
    stdout = StdoutInterruptedAtLine(2)
    monkeypatch.setattr("sys.stdout", stdout)
    junit = tmp_path / "junit.xml"
    code = main(["eval", str(cases), "--rubric", rubric, "--junit", str(junit), "-q"])
    err = capsys.readouterr().err
    assert code == 130
    assert "records in: 2 = processed 1 + rejected 0 + not processed 1 (interrupted)" in err
    assert [json.loads(line)["case_id"] for line in stdout.lines] == ["good"]
    assert _junit_case_names(junit) == ["good"]  # "rude", not written, is not reported
