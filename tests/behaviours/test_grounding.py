"""The three model-free failure checks people name most: identified before a write, a final
answer grounded in what the run was told, write arguments someone gave."""

from __future__ import annotations

import pytest

from behaviours._traces import call, function, result, say, trace, user
from knowledgepulse.behaviours import (
    Finding,
    UngroundedValue,
    agent_rubric,
    behaviour_criterion,
    grounded_answer,
    grounded_arguments,
    grounded_statements,
    identified_before_write,
    ungrounded_answer_values,
    ungrounded_arguments,
    ungrounded_statements,
    unidentified_writes,
)
from knowledgepulse.rubrics import Case, RubricLoadError


def test_a_write_after_the_user_was_identified_passes() -> None:
    run = trace(
        user("My user id is mia_li_3668."),
        call("get_user_details", user_id="mia_li_3668"),
        result('{"name": "Mia"}'),
        call("cancel_reservation", reservation_id="ABC123"),
        result("cancelled"),
    )
    assert identified_before_write(run) == Finding(
        True, "the user was identified before each write (step 3)", (3,)
    )


def test_a_write_before_the_user_was_identified_fails_naming_it() -> None:
    run = trace(
        call("cancel_reservation", reservation_id="ABC123"),
        result("cancelled"),
        call("get_user_details", user_id="u1"),
        result("{}"),
    )
    assert [c.step_id for c in unidentified_writes(run)] == [0]
    assert identified_before_write(run) == Finding(
        False, "cancel_reservation at step 0 before the user was identified", (0,)
    )
    # A lookup that failed identifies nobody.
    failed = trace(
        call("get_user_details", user_id="u1"),
        result("not found", error=True),
        call("cancel_reservation", reservation_id="ABC123"),
        result("ok"),
    )
    assert identified_before_write(failed).passed is False


def test_the_policy_order_is_configurable() -> None:
    run = trace(
        call("get_user_details", user_id="u1"),
        result("{}"),
        call("find_user_id_by_email", email="a@b.c"),
        result("u1"),
        call("cancel_pending_order", order_id="#W1234567"),
        result("ok"),
    )
    order = ["find_user_id_*", "get_user_details"]
    assert identified_before_write(run, identify_tools=order).passed is True
    # In order: the id must be found before the profile is read; here it came after.
    assert identified_before_write(run, identify_tools=order, in_order=True).passed is False
    criterion = behaviour_criterion("identified_before_write", 0.5, in_order=True)
    assert criterion.check.parameters["in_order"] is True  # type: ignore[attr-defined]
    with pytest.raises(RubricLoadError, match=r"in_order: expected true or false, got 'yes'"):
        agent_rubric({"criteria": {"identified_before_write": {"in_order": "yes"}}})


def test_identified_before_write_undetermined_without_writes_or_identifying_tools() -> None:
    assert identified_before_write(trace(call("get_user_details"), result())) == Finding(
        None, "the trace has no state-changing call"
    )
    bare = trace(call("cancel_order", id="X1"), result())
    assert identified_before_write(bare) == Finding(
        None, "the run neither calls nor declares a tool that identifies the user"
    )
    # A declared identifying tool, never called: the write went ahead unidentified.
    declared = trace(call("cancel_order", id="X1"), result(), tools=[function("get_user_details")])
    assert identified_before_write(declared).passed is False


def test_a_final_answer_with_given_and_derived_figures_is_grounded() -> None:
    run = trace(
        user("What do I owe on reservation M20IZO?"),
        call("get_reservation_details", reservation_id="M20IZO"),
        result('{"flights": [{"price": 1,194}, {"price": 306}], "total": "n/a"}'),
        say("Reservation M20IZO costs $1,500.00 in total (1,194 + 306) on May 17, 2024, 3 bags."),
    )
    assert ungrounded_answer_values(run) == []
    assert grounded_answer(run) == Finding(
        True,
        "the 4 numbers and ids of the final answer were all given by a tool or the user",
        (3,),
    )


def test_a_final_answer_stating_what_no_tool_said_fails() -> None:
    run = trace(
        call("get_order", order_id="W123"),
        result('{"status": "delivered", "total": 54.04}'),
        say("Order #W7504069 was refunded $1,327.50."),
    )
    assert ungrounded_answer_values(run) == [
        UngroundedValue(2, "w7504069"),
        UngroundedValue(2, "1327.5"),
    ]
    assert grounded_answer(run) == Finding(
        False,
        "the final answer states 'w7504069' (step 2), '1327.5' (step 2), given by no tool "
        "output or user turn",
        (2,),
    )
    assert grounded_answer(trace(call("a"), result())) == Finding(
        None, "the run has no final answer"
    )
    assert grounded_answer(trace(say("All done."))) == Finding(
        None, "the final answer states no number or id"
    )


def test_write_arguments_the_user_or_a_tool_gave_are_grounded() -> None:
    run = trace(
        user("Cancel reservation ABC123, refund to my card credit_card_7815826."),
        say("Cancel ABC123?"),
        user("yes"),
        call(
            "cancel_reservation",
            reservation_id="ABC123",
            payment_id="credit_card_7815826",
            reason="change_of_plan",
        ),
        result("ok"),
    )
    assert ungrounded_arguments(run) == []
    assert grounded_arguments(run) == Finding(
        True, "the 2 ids and numbers passed to the writes at step 3 were all given before", (3,)
    )


def test_a_guessed_write_argument_fails() -> None:
    run = trace(
        user("Pay with the card ending in 7334."),
        call("update_reservation_flights", reservation_id="XYZ789", payment_id="credit_card_7334"),
        result("ok"),
        call("send_certificate", user_id="XYZ789", amount=150),
        result("ok"),
    )
    assert ungrounded_arguments(run) == [
        UngroundedValue(1, "XYZ789", "reservation_id", "update_reservation_flights"),
        UngroundedValue(1, "credit_card_7334", "payment_id", "update_reservation_flights"),
        UngroundedValue(3, "XYZ789", "user_id", "send_certificate"),
        UngroundedValue(3, "150", "amount", "send_certificate"),
    ]
    finding = grounded_arguments(run)
    assert finding == Finding(
        False,
        "given by no one before the call: step 1 update_reservation_flights "
        "reservation_id=XYZ789; step 1 update_reservation_flights payment_id=credit_card_7334; "
        "step 3 send_certificate user_id=XYZ789 (and 1 more)",
        (1, 3),
    )
    # XYZ789 at step 3 is still ungrounded: the agent's own earlier call gave it, no one else.
    assert grounded_arguments(trace(call("cancel_order", id="Q"), result())) == Finding(
        None, "the state-changing calls pass no id, e-mail or number to check"
    )


def test_the_three_are_in_the_agent_rubric_reported_not_scored() -> None:
    rubric = agent_rubric()
    assert {name: rubric.weights[name] for name in list(rubric.weights)[-7:-3]} == {
        "identified_before_write": 0.0,
        "grounded_answer": 0.0,
        "grounded_arguments": 0.0,
        "grounded_statements": 0.0,
    }
    run = trace(
        call("cancel_order", order_id="#W9999999"),
        result("ok"),
        say("Done."),
        tools=[function("get_user_details"), function("cancel_order")],
    )
    evaluated = rubric.evaluate(Case(trace=run))
    assert evaluated.details["identified_before_write"] is False
    assert evaluated.details["grounded_arguments"] is False
    assert evaluated.score == 1.0  # weight 0: named, not scored


def test_a_run_of_ten_thousand_steps_is_graded_in_linear_time() -> None:
    # Bad input of issue 35: what was given grows step by step, never re-read per message.
    import time

    steps = []
    for i in range(2500):
        steps += [
            say(f"Looking up order W{1000000 + i} for 1{i:04d} dollars"),
            call("get_order", id=f"W{1000000 + i}"),
            result(f"order W{1000000 + i} total {i}.50"),
            user("ok, go on"),
        ]
    run = trace(*steps)
    started = time.perf_counter()
    evaluated = agent_rubric().evaluate(Case(trace=run))
    assert time.perf_counter() - started < 20  # about 1.7 s on 2 busy cores
    assert len(run.steps) == 10_000
    # Each message states its own "1NNNN dollars", given by no one before: the first at step 0.
    assert evaluated.verdicts["grounded_statements"].steps[:2] == [0, 4]
    # A figure stated from nowhere (evidence) is looked at before the budget running out (a
    # symptom, however scored).
    assert evaluated.details["within_budget"] is False
    assert (evaluated.first_failing_criterion, evaluated.first_failing_step) == (
        "grounded_statements",
        0,
    )


@pytest.mark.parametrize("unit", ["x", "a.", "1.", "a1", "/a", "A1+"])
def test_a_message_of_one_long_token_is_graded_in_linear_time(unit: str) -> None:
    # A run's text is not always words: an inlined image, a minified file, a page's token.
    # 200 KB of one token took a source-location pattern quadratic time (20 KB: 5 to 17 s;
    # 200 KB: minutes), in a message, a tool's output or a user turn.
    import time

    token = unit * (200_000 // len(unit))
    run = trace(user(token), call("lookup", q="x"), result(token), say(token), say("done"))
    started = time.perf_counter()
    evaluated = agent_rubric().evaluate(Case(trace=run))
    assert time.perf_counter() - started < 20  # well under a second once linear
    assert evaluated.verdicts["grounded_statements"].passed is not None


def test_a_source_location_in_a_log_line_is_no_figure_stated() -> None:
    # Who&When Hand-Crafted runs: a Python warning printed into the orchestrator's plan
    # (".../agents/orchestrator.py:216: UserWarning ...") made "216" a figure from nowhere,
    # and the plan the first failing step of every Magentic-One run.
    warned = trace(
        say(
            "Plan: search the web.\n/usr/lib/python3.11/site-packages/magentic/orchestrator.py:216:"
            " UserWarning: model mismatch (app/main.ts:12:5)"
        )
    )
    assert grounded_statements(warned).passed is True
    stated = trace(say("orchestrator.py:216 says the total is 7340"))
    assert [value.value for value in ungrounded_statements(stated)] == ["7340"]


def test_a_link_or_an_encoded_run_states_no_figure() -> None:
    # Who&When Hand-Crafted runs: a browsing agent's report of a search page carries the
    # page's address (Bing's "&cvid=D2D69D71…") and its meta tags, with a base64 token and a
    # JSON escape ("you\u2019re", read as the id "u2019re"): neither is a figure it states.
    page = (
        "Here is a screenshot of [schools - Search](https://www.bing.com/search?q=schools&"
        "cvid=D2D69D715FA54D44BBCE2E5256A194D9&ghsh=0). Also www.example.com/item/W99887766.\n"
        '{"token": "A1L3tx5CzccqjN3lK6st/fXMwhf9EeokCPf8XCt0DVI8JPbg37BWq0zKvlqgkdm8YEUbthoGkC'
        '/xdR1+iIz4txAAAABxeyJvcmlnaW4iOi=", "og:description": "find what you\\u2019re after"}'
    )
    assert ungrounded_statements(trace(say(page))) == []
    assert grounded_statements(trace(say(page))).passed is True
    # What is written around a link is still read, in a message and in the final answer.
    stated = trace(say(f"{page}\nThe best school is order #W7504069, 1,327 students."))
    assert [value.value for value in ungrounded_statements(stated)] == ["w7504069", "1327"]
    assert [value.value for value in ungrounded_answer_values(stated)] == ["w7504069", "1327"]
    # A value given only inside a link was still given.
    given = trace(
        result("https://shop.example/orders/W7504069?total=1327"),
        say("Order W7504069: 1327 items."),
    )
    assert ungrounded_statements(given) == []
