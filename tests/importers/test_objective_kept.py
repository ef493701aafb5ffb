"""What is not the objective is kept beside it, and a defaulted objective says so.

The issue's rule: choose the objective by documented rules, record where it came from and keep
the rest as context (``kp_import.objective_context``), not lost; an objective taken from
elsewhere because the run holds no user message is listed in ``kp_import.defaulted``.
"""

from __future__ import annotations

from typing import Any

from knowledgepulse.importers import read_traces_from_paths

from ._util import DATA


def _kp_import(path: str) -> list[dict[str, Any]]:
    return [
        trace.to_dict()["metadata"]["kp_import"]
        for unit in read_traces_from_paths([str(DATA / path)], "auto")
        for trace in unit.traces
    ]


def test_a_harness_objective_taken_from_elsewhere_is_listed_as_defaulted() -> None:
    # A real Claude Code excerpt without a human prompt: its objective is the session id.
    (kp,) = _kp_import("claude_code/sidechain_integrated.jsonl")
    assert kp["objective_from"] == "source_id"
    assert kp["defaulted"][0] == "objective"


def test_the_terminus_template_around_the_task_is_kept_in_a_harbor_traces_row() -> None:
    kps = _kp_import("harbor_traces/traces.jsonl")
    assert [len(kp["objective_context"]) for kp in kps] == [1, 1]
    assert all(
        kp["objective_context"][0].startswith(
            "You are an AI assistant tasked with solving command-line tasks"
        )
        for kp in kps
    )


def test_the_template_around_the_task_is_kept_for_swe_agent_and_mini_swe_agent() -> None:
    (swe,) = _kp_import("swe_agent/6e44b9__sweagenttestrepo-1c2844.traj")
    (mini,) = _kp_import("mini_swe_agent/github_issue.traj.json")
    assert len(swe["objective_context"]) == 1
    assert "SyntaxError: invalid syntax" in swe["objective_context"][0]
    assert len(mini["objective_context"]) == 1
    assert "GitHub Issue: SyntaxError: invalid syntax" in mini["objective_context"][0]
