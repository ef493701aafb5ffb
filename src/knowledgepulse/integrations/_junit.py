"""Rubric results and value scores as JUnit XML, so CI systems show each case as a test.

One ``<testsuite>`` holds one ``<testcase>`` per evaluated case: a case that did not reach
``successful_completion`` is a ``<failure>`` carrying its explanation; a case whose check (or
success gate) raised is an ``<error>``; a record that could not be read as a case is an
``<error>`` too. A second suite, ``quality gates``, holds one test case per gate asked for
(``--fail-under``, each ``--min-pass-rate``, check errors): the build's verdict is the gates',
not any single case's, and the gates suite shows which one decided it. For ``kp score``, each
trace is a test case, a ``<failure>`` when its value is below the threshold.

The document follows the common JUnit schema (Apache Ant's, as Jenkins, GitLab and GitHub
reporters read it): ``<testsuites>`` of ``<testsuite>`` elements with ``name``, ``id``,
``package``, ``timestamp`` (no time zone), ``hostname``, ``tests``, ``failures``, ``errors``,
``skipped`` and ``time``, each with ``<properties>``, its test cases, ``<system-out>`` and
``<system-err>``.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from xml.etree import ElementTree

from ..records import ScoreRecord
from ..rubrics import EvaluationResult, OutcomeType

__all__ = ["JUnitReport"]

# XML 1.0 cannot carry most control characters, even escaped; a check's message may hold them.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


_ERROR_TYPE = re.compile(r"^([A-Za-z_][\w.]*)(?::|$)")


def _text(value: str) -> str:
    return _NOT_XML.sub("\ufffd", value)


def _error_type(message: str) -> str:
    """``KeyError`` from ``"KeyError: 'fares'"``; ``CheckError`` for a message without one."""
    match = _ERROR_TYPE.match(message)
    return match.group(1) if match else "CheckError"


@dataclass
class _Case:
    name: str
    classname: str
    time: float
    kind: str | None = None  # None (passed), "failure" or "error"
    message: str = ""
    type: str = ""
    text: str = ""


@dataclass
class JUnitReport:
    """Collects evaluated cases and rejected records; :meth:`write` writes the XML.

    Args:
        suite: the test suite's name (the rubric's).
        properties: name/value pairs recorded in the suite (the rubric, the input files).
    """

    suite: str
    properties: dict[str, str] = field(default_factory=dict)
    _cases: list[_Case] = field(default_factory=list)
    _gates: list[_Case] = field(default_factory=list)
    _started: datetime = field(default_factory=lambda: datetime.now(timezone.utc))

    def add(self, result: EvaluationResult, *, seconds: float = 0.0, where: str = "") -> None:
        """Count one rubric result in; ``where`` (``file:line``) names a case that has no id."""
        name = result.case_id or where or f"#{len(self._cases) + 1}"
        case = _Case(name=name, classname=f"rubric.{result.rubric}", time=seconds)
        raised = dict(result.errors)
        if result.gate_error is not None:
            raised["success gate"] = result.gate_error
        if raised:
            case.kind, case.type = "error", _error_type(next(iter(raised.values())))
            case.message = "; ".join(f"{name}: {error}" for name, error in raised.items())
            case.text = result.explanation
        elif result.outcome_type is None:  # every judged criterion undetermined
            case.kind, case.type = "skipped", "undetermined"
            case.message = "no criterion could be determined"
            case.text = result.explanation
        elif result.outcome_type is not OutcomeType.SUCCESSFUL_COMPLETION:
            outcome = result.outcome_type.value
            case.kind, case.type = "failure", outcome
            failed = ", ".join(result.failed) or "none"
            case.message = f"score {result.score:g} ({outcome}); failed: {failed}"
            case.text = result.explanation
        self._cases.append(case)

    def add_score(self, record: ScoreRecord, *, seconds: float = 0.0) -> None:
        """Count one value score in: a ``<failure>`` when it is below its threshold."""
        case = _Case(name=record.id, classname=f"value.{record.profile}", time=seconds)
        if record.passed is False:
            case.kind, case.type = "failure", "below_threshold"
            case.message = f"value {record.score:.4f} is below the threshold {record.threshold:g}"
            case.text = record.explanation
        self._cases.append(case)

    def reject(self, where: str, messages: Sequence[str]) -> None:
        """Count in a record that could not be evaluated (an ``<error>``)."""
        self._cases.append(
            _Case(
                name=where,
                classname=f"rubric.{self.suite}",
                time=0.0,
                kind="error",
                type="CaseError",
                message=messages[0] if messages else "invalid case",
                text="\n".join(messages),
            )
        )

    def gate(self, name: str, failure: str | None) -> None:
        """Record a quality gate: ``failure`` is its message, ``None`` when it held."""
        case = _Case(name=name, classname="quality_gates", time=0.0)
        if failure is not None:
            case.kind, case.type, case.message, case.text = "failure", "gate", failure, failure
        self._gates.append(case)

    def to_xml(self) -> str:
        """The document as text (UTF-8 declaration included)."""
        root = ElementTree.Element("testsuites")
        elapsed = (datetime.now(timezone.utc) - self._started).total_seconds()
        suites = [(self.suite, self._cases, elapsed)]
        if self._gates:
            suites.append(("quality gates", self._gates, 0.0))
        totals = {"tests": 0, "failures": 0, "errors": 0}
        for index, (name, cases, seconds) in enumerate(suites):
            suite = self._suite(root, index, name, cases, seconds)
            for key in totals:
                totals[key] += int(suite.get(key, "0"))
        root.attrib.update({key: str(value) for key, value in totals.items()})
        root.set("time", f"{elapsed:.3f}")
        ElementTree.indent(root)
        body = ElementTree.tostring(root, encoding="unicode")
        return f'<?xml version="1.0" encoding="UTF-8"?>\n{body}\n'

    def write(self, path: str | Path) -> None:
        Path(path).write_text(self.to_xml(), encoding="utf-8")

    def _suite(
        self,
        root: ElementTree.Element,
        index: int,
        name: str,
        cases: list[_Case],
        seconds: float,
    ) -> ElementTree.Element:
        failures = sum(case.kind == "failure" for case in cases)
        errors = sum(case.kind == "error" for case in cases)
        skipped = sum(case.kind == "skipped" for case in cases)
        suite = ElementTree.SubElement(
            root,
            "testsuite",
            {
                "name": _text(name) or "knowledgepulse",
                "id": str(index),
                "package": "knowledgepulse",
                "timestamp": self._started.strftime("%Y-%m-%dT%H:%M:%S"),
                "hostname": socket.gethostname() or "localhost",
                "tests": str(len(cases)),
                "failures": str(failures),
                "errors": str(errors),
                "skipped": str(skipped),
                "time": f"{seconds:.3f}",
            },
        )
        properties = ElementTree.SubElement(suite, "properties")
        for key, value in self.properties.items():
            ElementTree.SubElement(properties, "property", {"name": key, "value": _text(value)})
        for case in cases:
            element = ElementTree.SubElement(
                suite,
                "testcase",
                {"name": _text(case.name), "classname": case.classname, "time": f"{case.time:.6f}"},
            )
            if case.kind == "skipped":  # undetermined: the schema's skipped has no type
                ElementTree.SubElement(element, "skipped", {"message": _text(case.message)})
            elif case.kind is not None:
                outcome = ElementTree.SubElement(
                    element, case.kind, {"message": _text(case.message), "type": case.type}
                )
                outcome.text = _text(case.text)
        ElementTree.SubElement(suite, "system-out").text = ""
        ElementTree.SubElement(suite, "system-err").text = ""
        return suite
