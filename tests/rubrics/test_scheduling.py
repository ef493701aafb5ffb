"""The built-in scheduling rubric: every criterion, the gate, missing data, the example set."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from knowledgepulse.rubrics import OutcomeType, load_cases
from knowledgepulse.rubrics.scheduling import SCHEDULING_RUBRIC, evaluate_task_completion

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "scheduling.jsonl"
PARTICIPANTS = ["ana@example.com", "ben@example.com"]
TIME = "2025-03-04T10:00:00-05:00"
GOOD_REPLY = "Booked with Ben on Tuesday at 10:00 for 30 minutes."


def state(**context: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "booking_confirmed": True,
        "booked_event": {"participants": list(PARTICIPANTS), "time": TIME, "duration": 30},
        "conflicts": [],
        "proposed_alternatives": [],
    }
    base.update(context)
    return {"scheduling_context": base, "conversation_stage": "confirmed"}


def truth(**overrides: Any) -> dict[str, Any]:
    return {"participants": list(reversed(PARTICIPANTS)), "time": TIME, "duration": 30, **overrides}


def reply(text: str = GOOD_REPLY) -> list[dict[str, Any]]:
    return [{"user": "Book Ben Tuesday 10am", "response": text}]


def event(**fields: Any) -> dict[str, Any]:
    return {"participants": list(PARTICIPANTS), "time": TIME, "duration": 30, **fields}


def test_rubric_shape() -> None:
    assert SCHEDULING_RUBRIC.name == "scheduling"
    assert SCHEDULING_RUBRIC.weights == {
        "correct_participants": 0.25,
        "correct_time": 0.25,
        "correct_duration": 0.10,
        "explored_alternatives": 0.20,
        "clear_explanation": 0.20,
    }
    assert SCHEDULING_RUBRIC.gate_description == "booking confirmed"
    assert all(c.description for c in SCHEDULING_RUBRIC.criteria)


def test_perfect_booking() -> None:
    result = evaluate_task_completion(state(), truth(), reply())
    assert result.score == 1.0
    assert result.outcome_type is OutcomeType.SUCCESSFUL_COMPLETION
    assert all(result.details.values())
    assert result.errors == {}
    assert result.gate_passed is True


# -- correct_participants -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("booked", "expected", "ok"),
    [
        (PARTICIPANTS, PARTICIPANTS, True),
        (PARTICIPANTS, list(reversed(PARTICIPANTS)), True),  # order does not matter
        (PARTICIPANTS + PARTICIPANTS[:1], PARTICIPANTS, True),  # a set comparison
        (PARTICIPANTS[:1], PARTICIPANTS, False),
        ([*PARTICIPANTS, "eve@example.com"], PARTICIPANTS, False),
        ([], PARTICIPANTS, False),
        ("ana@example.com", ["ana@example.com"], False),  # a string is not a list of people
        ([{"email": "ana"}], [{"email": "ana"}], False),  # unhashable: malformed, fails quietly
    ],
)
def test_correct_participants(booked: Any, expected: Any, ok: bool) -> None:
    result = evaluate_task_completion(
        state(booked_event=event(participants=booked)), truth(participants=expected), reply()
    )
    assert result.details["correct_participants"] is ok
    assert result.errors == {}


def test_participants_missing_from_either_side_fail() -> None:
    no_booked = evaluate_task_completion(
        state(booked_event={"time": TIME, "duration": 30}), truth(), reply()
    )
    assert no_booked.details["correct_participants"] is False
    assert no_booked.score == 0.75  # only that criterion fails
    assert no_booked.errors == {}
    no_expected = evaluate_task_completion(state(), {"time": TIME}, reply())
    assert no_expected.details["correct_participants"] is False


# -- correct_time ---------------------------------------------------------------------------


def test_correct_time() -> None:
    assert evaluate_task_completion(state(), truth(), reply()).details["correct_time"] is True
    wrong = evaluate_task_completion(
        state(booked_event=event(time="2025-03-04T11:00:00-05:00")), truth(), reply()
    )
    assert wrong.details["correct_time"] is False
    assert wrong.score == 0.75
    assert wrong.outcome_type is OutcomeType.SUCCESSFUL_COMPLETION  # exactly 0.75 with the gate
    both_missing = evaluate_task_completion(
        state(booked_event={"participants": PARTICIPANTS, "duration": 30}),
        {"participants": PARTICIPANTS},
        reply(),
    )
    assert both_missing.details["correct_time"] is False


# -- correct_duration -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("booked", "expected", "ok"),
    [
        (30, 30, True),
        (30, None, True),  # default 30
        (30, ..., True),  # key absent: default 30
        (30.0, 30, True),
        (45, ..., False),
        (60, 30, False),
        (45, 45, True),
        (None, 30, False),
        (True, 1, False),
    ],
)
def test_correct_duration(booked: Any, expected: Any, ok: bool) -> None:
    ground = truth()
    if expected is ...:
        del ground["duration"]
    else:
        ground["duration"] = expected
    result = evaluate_task_completion(state(booked_event=event(duration=booked)), ground, reply())
    assert result.details["correct_duration"] is ok


# -- the gate -------------------------------------------------------------------------------


@pytest.mark.parametrize("confirmed", [False, None, "yes", 1])
def test_unconfirmed_bookings_fail_the_booking_criteria_and_the_gate(confirmed: Any) -> None:
    result = evaluate_task_completion(state(booking_confirmed=confirmed), truth(), reply())
    assert result.details == {
        "correct_participants": False,
        "correct_time": False,
        "correct_duration": False,
        "explored_alternatives": True,
        "clear_explanation": True,
    }
    assert result.score == 0.4
    assert result.gate_passed is False
    assert result.outcome_type is OutcomeType.PARTIAL_FAILURE


def test_the_gate_blocks_success_even_with_a_high_score() -> None:
    result = SCHEDULING_RUBRIC.evaluate(
        {"final_state": state(booking_confirmed=False), "ground_truth": truth()}
    )
    assert result.gate_passed is False
    assert result.outcome_type is not OutcomeType.SUCCESSFUL_COMPLETION
    # With the scheduling rubric the gate also fails three criteria, so 0.75 cannot be reached
    # without it; the generic gate-blocking rule is covered in test_rubric.py.
    assert SCHEDULING_RUBRIC.classify(0.75, gate_holds=False) is OutcomeType.GRACEFUL_FAILURE


# -- explored_alternatives ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("context", "ok"),
    [
        ({"conflicts": []}, True),
        ({"conflicts": None}, True),
        ({"conflicts": ["bob busy"], "proposed_alternatives": ["11:00"]}, True),
        ({"conflicts": ["bob busy"], "proposed_alternatives": []}, False),
        ({"conflicts": ["bob busy"], "proposed_alternatives": None}, False),
        ({"conflicts": ["bob busy"], "proposed_alternatives": "11:00"}, False),
    ],
)
def test_explored_alternatives(context: dict[str, Any], ok: bool) -> None:
    result = evaluate_task_completion(state(**context), truth(), reply())
    assert result.details["explored_alternatives"] is ok


def test_explored_alternatives_without_any_keys_passes() -> None:
    final = state()
    del final["scheduling_context"]["conflicts"]
    del final["scheduling_context"]["proposed_alternatives"]
    assert evaluate_task_completion(final, truth(), reply()).details["explored_alternatives"]


# -- clear_explanation ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("turns", "ok"),
    [
        (reply("x" * 20), True),
        (reply("x" * 19), False),
        (reply("   " + "x" * 19 + "\n\t "), False),  # stripped first
        (reply("  " + "x" * 20 + "  "), True),
        (reply(""), False),
        ([{"user": "hi"}], False),  # no response
        ([{"response": None}], False),
        ([{"response": 12345678901234567890}], False),
        (["not a turn"], False),
        ([*reply(GOOD_REPLY), {"response": "ok"}], False),  # only the last turn counts
        ([{"response": "ok"}, *reply(GOOD_REPLY)], True),
        ([], False),
        (None, False),
    ],
)
def test_clear_explanation(turns: Any, ok: bool) -> None:
    result = evaluate_task_completion(state(), truth(), turns)
    assert result.details["clear_explanation"] is ok
    assert result.errors == {}


def test_clear_explanation_ignores_the_conversation_stage() -> None:
    # SPEC §3 rules: the seed's stage-specific detail does not apply.
    final = state(booking_confirmed=False)
    final["conversation_stage"] = "failed"
    result = evaluate_task_completion(final, truth(), reply("I could not book: Ben is away."))
    assert result.details["clear_explanation"] is True


# -- missing data ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("final_state", "ground_truth", "conversation"),
    [
        (None, None, None),
        ({}, {}, []),
        ({"conversation_stage": "start"}, truth(), reply()),
        ({"scheduling_context": None}, truth(), reply()),
        ({"scheduling_context": "oops"}, truth(), reply()),
        (state(booked_event=None), truth(), reply()),
        (state(booked_event=["not", "a", "mapping"]), truth(), reply()),
        ("not a mapping", ["nor", "this"], "nor this"),
    ],
)
def test_missing_or_malformed_data_never_crashes_or_errors(
    final_state: Any, ground_truth: Any, conversation: Any
) -> None:
    result = evaluate_task_completion(final_state, ground_truth, conversation)
    assert result.errors == {}
    assert result.gate_error is None
    assert result.details["correct_participants"] is False
    assert result.details["correct_time"] is False
    assert result.details["correct_duration"] is False
    assert 0.0 <= result.score <= 0.4


def test_empty_input_scores_only_the_no_conflict_criterion() -> None:
    result = evaluate_task_completion({}, {}, [])
    assert result.score == 0.2
    assert result.passed == ["explored_alternatives"]
    assert result.outcome_type is OutcomeType.PARTIAL_FAILURE


def test_hard_failure() -> None:
    result = evaluate_task_completion(
        state(booking_confirmed=False, conflicts=["ben away"]), truth(), reply("Failed.")
    )
    assert result.score == 0.0
    assert result.outcome_type is OutcomeType.HARD_FAILURE


def test_exactly_one_half_is_a_graceful_failure() -> None:
    result = evaluate_task_completion(
        state(booked_event=event(duration=60), conflicts=["x"]), truth(), reply("Booked.")
    )
    assert result.passed == ["correct_participants", "correct_time"]
    assert result.score == 0.5
    assert result.outcome_type is OutcomeType.GRACEFUL_FAILURE


def test_inputs_are_not_modified() -> None:
    final, ground, turns = state(), truth(), reply()
    before = copy.deepcopy((final, ground, turns))
    evaluate_task_completion(final, ground, turns)
    assert (final, ground, turns) == before


def test_case_id_is_carried() -> None:
    assert evaluate_task_completion({}, {}, [], case_id="t-1").case_id == "t-1"


# -- the example data set -------------------------------------------------------------------

# Hand-computed from the case descriptions: id -> (score, outcome, criteria that pass)
P, T, D, A, E = (
    "correct_participants",
    "correct_time",
    "correct_duration",
    "explored_alternatives",
    "clear_explanation",
)
S, G, PF, H = ("successful_completion", "graceful_failure", "partial_failure", "hard_failure")
EXPECTED: dict[str, tuple[float, str, set[str]]] = {
    "sched-001": (1.0, S, {P, T, D, A, E}),
    "sched-002": (1.0, S, {P, T, D, A, E}),
    "sched-003": (0.9, S, {P, T, A, E}),
    "sched-004": (1.0, S, {P, T, D, A, E}),
    "sched-005": (0.8, S, {P, T, D, A}),
    "sched-006": (0.75, S, {P, D, A, E}),
    "sched-007": (0.75, S, {T, D, A, E}),
    "sched-008": (0.8, S, {P, T, D, E}),
    "sched-009": (0.7, G, {P, T, E}),
    "sched-010": (0.5, G, {P, T}),
    "sched-011": (0.5, G, {D, A, E}),
    "sched-012": (0.55, G, {P, D, A}),
    "sched-013": (0.65, G, {P, A, E}),
    "sched-014": (0.45, PF, {P, A}),
    "sched-015": (0.4, PF, {A, E}),
    "sched-016": (0.4, PF, {A, E}),
    "sched-017": (0.4, PF, {A, E}),
    "sched-018": (0.75, S, {T, D, A, E}),
    "sched-019": (0.4, PF, {A, E}),
    "sched-020": (0.8, S, {P, T, D, A}),
    "sched-021": (0.2, PF, {E}),
    "sched-022": (0.2, PF, {A}),
    "sched-023": (0.0, H, set()),
    "sched-024": (0.0, H, set()),
    "sched-025": (0.0, H, set()),
    "sched-026": (0.35, PF, {P, D}),
    "sched-027": (0.1, PF, {D}),
    "sched-028": (0.4, PF, {A, E}),
}


def test_example_data_set_is_well_formed() -> None:
    rows = [json.loads(line) for line in EXAMPLES.read_text(encoding="utf-8").splitlines()]
    assert len(rows) >= 24
    assert {row["id"] for row in rows} == set(EXPECTED)
    for row in rows:
        assert {"id", "final_state", "ground_truth"} <= row.keys()
    assert any("conversation_trace" not in row for row in rows)
    assert any(row.get("conversation_trace") == [] for row in rows)


def test_example_data_set_scores() -> None:
    seen = set()
    for case in load_cases(EXAMPLES):
        assert case.case_id is not None
        score, outcome, passed = EXPECTED[case.case_id]
        result = evaluate_task_completion(
            case.final_state, case.ground_truth, case.conversation_trace, case_id=case.case_id
        )
        assert result.score == score, case.case_id
        assert result.outcome_type is not None, case.case_id
        assert result.outcome_type.value == outcome, case.case_id
        assert set(result.passed) == passed, case.case_id
        assert result.errors == {}
        assert result == SCHEDULING_RUBRIC.evaluate(case)
        seen.add(result.outcome_type)
    assert seen == set(OutcomeType)
