"""Reading cases from JSONL and resolving rubrics by name or import path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from knowledgepulse import TraceValidationError
from knowledgepulse.rubrics import (
    BUILTIN_RUBRICS,
    SCHEDULING_RUBRIC,
    Case,
    Criterion,
    Rubric,
    load_cases,
    register_rubric,
    resolve_rubric,
)

from .conftest import build_trace

ROOT = Path(__file__).resolve().parents[2]


def write_lines(path: Path, *lines: str) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_load_cases_names_cases_by_id_or_line(tmp_path: Path) -> None:
    trace = build_trace((("tool_call", "search"),))
    path = write_lines(
        tmp_path / "cases.jsonl",
        json.dumps({"id": "first", "final_state": {"x": 1}}),
        "",
        json.dumps({"ground_truth": {"y": 2}, "trace": trace.to_dict()}),
        json.dumps({"id": 42}),
    )
    cases = list(load_cases(path))
    assert [case.case_id for case in cases] == ["first", "3", "42"]
    assert cases[0].final_state == {"x": 1}
    assert cases[1].trace == trace
    assert cases[1].ground_truth == {"y": 2}


def test_load_cases_is_lazy(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "c.jsonl", "{}", "not json")
    cases = load_cases(path)
    assert next(cases).case_id == "1"
    with pytest.raises(ValueError, match=r"c\.jsonl:2: invalid JSON"):
        next(cases)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("[1, 2]", r":1: a case must be a JSON object, got an array"),
        ('{"final_state": 3}', r":1: final_state must be a JSON object, got int"),
        ('{"conversation_trace": {"a": 1}}', r":1: conversation_trace must be a list"),
    ],
)
def test_load_cases_locates_bad_lines(tmp_path: Path, line: str, message: str) -> None:
    path = write_lines(tmp_path / "bad.jsonl", line)
    with pytest.raises(ValueError, match=message):
        list(load_cases(path))


def test_load_cases_locates_bad_traces(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "t.jsonl", "{}", json.dumps({"trace": {"id": "nope"}}))
    with pytest.raises(TraceValidationError) as error:
        list(load_cases(path))
    assert error.value.line == 2
    assert str(error.value).startswith(f"{path}:2: invalid ReasoningTrace")


def test_load_cases_uses_the_rubric_case_factory(tmp_path: Path) -> None:
    def factory(data: object, case_id: str | None) -> Case:
        return Case(case_id=f"custom-{case_id}")

    rubric = Rubric("f", [Criterion("a", 1.0, lambda case: True)], case_factory=factory)
    path = write_lines(tmp_path / "c.jsonl", "{}")
    assert [c.case_id for c in load_cases(path, rubric)] == ["custom-1"]


def test_resolve_builtin_and_import_paths() -> None:
    assert "scheduling" in BUILTIN_RUBRICS
    assert resolve_rubric("scheduling") is SCHEDULING_RUBRIC
    assert resolve_rubric("knowledgepulse.rubrics.scheduling:SCHEDULING_RUBRIC") is (
        SCHEDULING_RUBRIC
    )
    assert resolve_rubric(SCHEDULING_RUBRIC) is SCHEDULING_RUBRIC


def test_resolve_a_file_path_and_a_factory(tmp_path: Path) -> None:
    module = tmp_path / "my_rubrics.py"
    module.write_text(
        "from knowledgepulse.rubrics import Criterion, Rubric\n"
        "RUBRIC = Rubric('file', [Criterion('a', 1.0, lambda case: True)])\n"
        "def make():\n"
        "    return Rubric('made', [Criterion('b', 1.0, lambda case: False)])\n"
        "class Holder:\n"
        "    inner = RUBRIC\n"
        "NOT_A_RUBRIC = 3\n",
        encoding="utf-8",
    )
    assert resolve_rubric(f"{module}:RUBRIC").name == "file"
    assert resolve_rubric(f"{module}:make").name == "made"
    assert resolve_rubric(f"{module}:Holder.inner").name == "file"
    with pytest.raises(ValueError, match="is a int, not a Rubric"):
        resolve_rubric(f"{module}:NOT_A_RUBRIC")
    with pytest.raises(ValueError, match="has no attribute 'MISSING'"):
        resolve_rubric(f"{module}:MISSING")
    with pytest.raises(ValueError, match="no rubric file"):
        resolve_rubric(f"{tmp_path / 'absent.py'}:RUBRIC")


def test_resolve_the_example_custom_rubrics() -> None:
    path = ROOT / "examples" / "rubrics" / "custom_rubric.py"
    assert resolve_rubric(f"{path}:refunds").name == "refunds"
    assert resolve_rubric(f"{path}:trace_quality").name == "trace_quality"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nonsense", r"unknown rubric 'nonsense': use a rubric name \(agent, scheduling\)"),
        ("no_such_module_xyz:R", "cannot import 'no_such_module_xyz'"),
        ("knowledgepulse.rubrics:", "unknown rubric"),
    ],
)
def test_resolve_errors(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        resolve_rubric(spec)


def test_register_rubric() -> None:
    rubric = Rubric("registered", [Criterion("a", 1.0, lambda case: True)])
    register_rubric("my-rubric", rubric)
    assert resolve_rubric("my-rubric") is rubric
    with pytest.raises(TypeError, match="expected a Rubric"):
        register_rubric("bad", object())  # type: ignore[arg-type]
