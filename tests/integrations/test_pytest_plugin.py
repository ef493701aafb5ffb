"""The pytest plugin, run inside pytester: fixtures, assert_rubric's message, the gates."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from _helpers import WORKED_EXAMPLE
from knowledgepulse.integrations.pytest_plugin import assert_rubric
from knowledgepulse.rubrics import SCHEDULING_RUBRIC, Case, Rubric, build_report

pytest_plugins = ["pytester"]

ROOT = Path(__file__).parents[2]
SCHEDULING = ROOT / "examples" / "scheduling.jsonl"


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    # The plugin is loaded by name: an installed copy of its entry point must not load it twice.
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    # The subprocess imports this checkout's knowledgepulse, whatever is installed.
    paths = [str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(paths))
    return pytester


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "-p", "knowledgepulse.integrations.pytest_plugin", "-p", "no:cacheprovider", *args
    )


def test_entry_point_is_declared() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    entry_points = project["project"]["entry-points"]["pytest11"]
    assert entry_points == {"knowledgepulse": "knowledgepulse.integrations.pytest_plugin"}


def test_gate_on_an_aggregate_passes_and_fails_with_readable_message(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_agent=f"""
        from knowledgepulse.integrations.pytest_plugin import assert_rubric

        def test_good_enough(kp_evaluate):
            run = kp_evaluate("scheduling", {str(SCHEDULING)!r})
            assert_rubric(run, fail_under=0.5)

        def test_too_strict(kp_evaluate):
            run = kp_evaluate("scheduling", {str(SCHEDULING)!r})
            assert_rubric(run, fail_under=0.8, min_pass_rates={{"correct_time": 0.9}})
        """
    )
    result = _run(pytester)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "E   *AssertionError: rubric 'scheduling' missed 2 gates over 28 cases (mean score 0.5268):",
            "E   *- mean score 0.5268 is below the minimum 0.80",
            "E   *- criterion 'correct_time': pass rate 39% (11/28) is below the minimum 90%",
            "E   *criteria that failed, weakest first:",
            "E   *correct_time (weight 0.25): pass rate 39% (11/28); failed on sched-006, sched-011, *",
            "E   *cases that did not succeed (18 of 28):",
            "E   *sched-009: Score 0.70 (graceful_failure). Passed: *",
            "E   *… and 8 more",
            "*knowledgepulse rubric runs*",
            "test_agent.py::test_good_enough: scheduling over 28 cases, mean score 0.5268, 10 successful",
        ]
    )
    # The helper's own frames are hidden: the traceback ends in the test.
    assert "pytest_plugin.py" not in result.stdout.str()


def test_kp_scorer_scores_without_an_embedder(pytester: pytest.Pytester) -> None:
    pytester.makefile(".json", trace=json.dumps(WORKED_EXAMPLE))
    pytester.makepyfile(
        test_scores="""
        from pathlib import Path
        from knowledgepulse import ReasoningTrace, Scorer

        def test_score(kp_scorer):
            assert kp_scorer.embedder is None
            trace = ReasoningTrace.model_validate_json(Path("trace.json").read_text())
            expected = Scorer(embedder=None).score(trace).value
            assert kp_scorer.score(trace).value == expected
            print("NOVELTY", kp_scorer.score(trace).novelty)
        """
    )
    result = _run(pytester, "-s")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*NOVELTY 0.5*"])


def test_kp_evaluate_accepts_case_objects_and_a_rubric(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_objects="""
        from knowledgepulse.rubrics import Case, Rubric

        rubric = Rubric("answers")

        @rubric.criterion(weight=1.0)
        def answered(case):
            \"\"\"The agent answered.\"\"\"
            return bool(case.final_state.get("answer"))

        def test_objects(kp_evaluate):
            run = kp_evaluate(rubric, [Case(final_state={"answer": 1}, case_id="a"),
                                       {"id": "b", "final_state": {}}])
            assert [r.case_id for r in run.results] == ["a", "b"]
            run.assert_gates(fail_under=0.75)
        """
    )
    result = _run(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "E   *AssertionError: rubric 'answers' missed 1 gate over 2 cases (mean score 0.50):",
            "E   *answered (weight 1.00): pass rate 50% (1/2); failed on b",
            "E   *b: Score 0.00 (hard_failure). Passed: none. Failed: answered (1.00).",
        ]
    )


def test_assert_rubric_returns_the_report_when_every_gate_holds() -> None:
    results = [SCHEDULING_RUBRIC.evaluate(case) for case in [Case(case_id="empty")]]
    report = assert_rubric(results, fail_under=0.0)
    assert report.count == 1


def test_assert_rubric_on_a_report_names_failing_cases_without_explanations() -> None:
    rubric = Rubric("r")
    rubric.criterion(weight=1.0)(_never)
    results = [rubric.evaluate(Case(case_id=f"c{i}")) for i in range(12)]
    with pytest.raises(AssertionError) as caught:
        assert_rubric(build_report(results), min_pass_rates={"_never": 0.5, "missing": 0.1})
    assert str(caught.value).splitlines() == [
        "rubric 'r' missed 2 gates over 12 cases (mean score 0.00):",
        "  - criterion '_never': pass rate 0% (0/12) is below the minimum 50%",
        "  - criterion 'missing' is not in the report (criteria: _never)",
        "criteria that failed, weakest first:",
        "  _never (weight 1.00): pass rate 0% (0/12); failed on c0, c1, c2, c3, c4, c5, c6, c7, "
        "c8, c9, … (+2)",
    ]


def _never(case: Case) -> bool:
    """Never passes."""
    return False
