"""The viewer's page logic in Node over a minimal DOM (``dom_harness.js``), issue 22 item 7:
under ``kp serve`` the Groups link is not offered and ``#/groups`` explains itself instead of
"Not Found"; the stored API key can be forgotten. Runs where Node is installed; the
headless-Chromium tests (``test_viewer_browser_serve.py``) check the same in a browser."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from knowledgepulse.viewer import STATIC_DIR

NODE = shutil.which("node")
HARNESS = Path(__file__).with_name("dom_harness.js")
pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed")

# GET /v1/stats as kp serve answers it (api_models.Stats, kp view's fields left out).
SERVE_STATS = {
    "traces": 1,
    "by_domain": {"code-review": 1},
    "mean_value": 0.7,
    "last_added_at": "2026-01-01T10:00:00.000Z",
    "threshold": 0.5,
    "model": "HashingEmbedder",
    "dimensions": 384,
}
EMPTY_PAGE = {"items": [], "total": 0}


def page(**scenario: Any) -> dict[str, Any]:
    scenario.setdefault("responses", {})
    done = subprocess.run(
        [str(NODE), str(HARNESS), str(STATIC_DIR / "viewer.js"), json.dumps(scenario)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_under_kp_serve_groups_are_not_offered_and_explained() -> None:
    shown = page(responses={"/v1/stats": [200, SERVE_STATS]}, hash="#/groups")
    assert shown["hidden"]["nav-groups-item"] is True
    assert shown["error"] == ""  # before: "Not Found"
    assert shown["main"].startswith("Groups of near-duplicatesThis server keeps no groups:")


def test_under_kp_view_groups_are_offered_as_before() -> None:
    shown = page(
        responses={
            "/v1/stats": [200, {"traces": 1, "groups": 0}],
            "/v1/groups": [200, {"groups": []}],
        },
        hash="#/groups",
    )
    assert shown["hidden"]["nav-groups-item"] is False
    assert shown["main"] == "Groups of near-duplicatesNo groups: kp curate --groups writes them."


def test_the_stored_key_is_offered_for_forgetting_and_forgotten() -> None:
    responses = {"/v1/stats": [200, SERVE_STATS], "/v1/traces": [200, EMPTY_PAGE]}
    held = page(responses=responses, needs_key="k1", stored_key="k1", hash="#/")
    assert held["hidden"]["forget-key"] is False
    assert (held["stored_key"], held["dialog_open"]) == ("k1", False)
    forgotten = page(
        responses=responses, needs_key="k1", stored_key="k1", hash="#/", click=["forget-key"]
    )
    assert forgotten["stored_key"] is None
    assert forgotten["hidden"]["forget-key"] is True
    assert forgotten["dialog_open"] is True  # the server needs a key: the page asks again
    assert forgotten["requests"][-1][1] is None  # and sends none meanwhile


def test_without_a_key_nothing_is_offered_to_forget() -> None:
    shown = page(responses={"/v1/stats": [200, SERVE_STATS], "/v1/traces": [200, EMPTY_PAGE]})
    assert shown["hidden"]["forget-key"] is True


def test_the_reader_is_told_what_its_key_cannot_see() -> None:
    """Issue 37 item 4: a read key saw 6 of 230 traces with no word that the rest exist."""
    stats = {**SERVE_STATS, "hidden": 224, "key": {"name": "ro", "scope": "read", "team": "acme"}}
    responses = {"/v1/stats": [200, stats], "/v1/traces": [200, EMPTY_PAGE]}
    shown = page(responses=responses, hash="#/")
    assert (
        "1 traces 224 more traces are in the base but hidden from this key by their visibility "
        "(private: only the key that contributed it; org: only keys of its team). This key: ro, "
        "scope read, team acme."
    ) in shown["main"]
    alone = page(responses={"/v1/stats": [200, SERVE_STATS], "/v1/traces": [200, EMPTY_PAGE]})
    assert "hidden from this key" not in alone["main"]


def test_an_undetermined_criterion_is_shown_as_undetermined_with_its_reason() -> None:
    # Issue 35 item 7: the rubric section showed every criterion that did not pass as
    # "✗ fail", undetermined ones (null in details) included; kp report shows them apart.
    evaluation = {
        "rubric": "agent",
        "score": 0.75,
        "outcome_type": "graceful_failure",
        "gate_passed": False,
        "details": {"task_completed": False, "no_loops": True, "known_tools": None},
        "weights": {"task_completed": 0.1, "no_loops": 0.1, "known_tools": 0.05},
        "undetermined": {"known_tools": "the trace declares no tools"},
        "explanation": "Score 0.75 (graceful_failure).",
        "first_failing_step": 4,
        "first_failing_criterion": "task_completed",
        "first_failing_agent": "WebSurfer",
        "first_failing_origin": {"message": 12},
    }
    shown = page(
        responses={
            "/v1/stats": [200, {"traces": 1, "groups": 0}],
            "/v1/traces/kp%3Atrace%3Ax": [200, {"trace": None, "record": None, "eval": evaluation}],
        },
        hash="#/trace/kp%3Atrace%3Ax",
    )
    assert shown["error"] == ""
    assert "First failing step4 (task_completed, agent WebSurfer, from message 12)" in shown["main"]
    criteria = shown["main"].split("CriteriaCriterionWeightResult", 1)[1].split("Score 0.75")[0]
    assert criteria == (
        "task_completed0.10✗ fail"
        "no_loops0.10✓ pass"
        "known_tools0.05? undetermined — the trace declares no tools"
    )
