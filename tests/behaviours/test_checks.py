"""Each behaviour check on hand-made traces: pass, fail and undetermined, with its reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from behaviours._traces import call, function, result, say, trace, user
from knowledgepulse.behaviours import (
    Finding,
    answered,
    confirmed_before_write,
    errors_recovered,
    expected_actions,
    expected_actions_match,
    expected_outputs,
    find_loops,
    known_tools,
    no_loops,
    schema_problems,
    state_changing_calls,
    tool_calls,
    unconfirmed_writes,
    unrecovered_errors,
    valid_arguments,
    within_budget,
)
from knowledgepulse.importers import from_mini_swe_agent

BOOKING = {"task": {"actions": [{"name": "book", "kwargs": {"flight": "HAT1", "amount": 250}}]}}

# -- facts ---------------------------------------------------------------------------------


def test_tool_calls_pair_each_call_with_its_result() -> None:
    calls = tool_calls(
        trace(
            call("a", x=1),
            call("b"),
            result("B done", tool="b"),
            result("A failed", error=True, tool="a"),
            call("c"),
            say("thinking"),
            result("late"),
        )
    )
    assert [(c.step_id, c.name, c.result_step, c.failed) for c in calls] == [
        (0, "a", 3, True),
        (1, "b", 2, False),
        (4, "c", None, False),
    ]


def test_a_native_traces_error_recovery_marks_the_observation_before_it_failed() -> None:
    calls = tool_calls(
        trace(
            call("fetch"),
            result("timeout"),
            {"type": "error_recovery", "content": "retry", "tool": {"name": "fetch"}},
            result("ok"),
            imported=False,
        )
    )
    assert [(c.step_id, c.failed) for c in calls] == [(0, True), (2, False)]


def test_expected_actions_are_read_from_tau_bench_and_tau2_ground_truths() -> None:
    tau = expected_actions(trace(say("hi"), ground_truth=BOOKING))
    assert tau is not None and [(a.name, dict(a.arguments)) for a in tau] == [
        ("book", {"flight": "HAT1", "amount": 250})
    ]
    tau2 = {
        "evaluation_criteria": {
            "actions": [
                {"name": "cancel", "arguments": {"id": "R1"}, "requestor": "assistant"},
                {"name": "toggle_airplane_mode", "arguments": {}, "requestor": "user"},
            ]
        }
    }
    found = expected_actions(trace(say("hi"), ground_truth=tau2))
    assert found is not None and [a.name for a in found] == ["cancel"]
    shapeless_truths: list[object] = [
        {},
        {"actions": "book"},
        {"actions": [{"kwargs": {}}]},
        ["book"],
    ]
    for shapeless in shapeless_truths:
        assert expected_actions(trace(say("hi"), ground_truth=shapeless)) is None


# -- expected_actions ------------------------------------------------------------------------


def test_expected_actions_pass_when_the_writes_equal_the_expected_ones() -> None:
    made = trace(
        call("get_user", id="u1"),
        result("{}"),
        call("book", amount=250.0, flight="HAT1"),
        result("booked"),
        ground_truth=BOOKING,
    )
    finding = expected_actions_match(made)
    assert finding == Finding(True, "the 1 expected state-changing calls were made (step 2)", (2,))


def test_expected_actions_ignore_reads_and_refused_writes() -> None:
    made = trace(
        call("search_flights"),
        result("[]"),
        call("book", flight="HAT1", amount=200),
        result("Error: payment does not add up", error=True),
        call("book", flight="HAT1", amount=250),
        result("booked"),
        ground_truth=BOOKING,
    )
    assert expected_actions_match(made).passed is True


def test_expected_actions_fail_naming_the_differing_arguments_and_the_extra_call() -> None:
    made = trace(
        call("book", flight="HAT1", amount=300),
        result("booked"),
        call("cancel", id="R9"),
        result("cancelled"),
        ground_truth=BOOKING,
    )
    finding = expected_actions_match(made)
    assert finding.passed is False
    assert finding.reason == (
        "step 0 book differs from the expected call in amount; "
        "step 2 cancel(id=R9) was not expected"
    )
    assert finding.steps == (0, 2)


def test_expected_actions_fail_when_an_expected_call_was_not_made() -> None:
    finding = expected_actions_match(trace(say("Done"), ground_truth=BOOKING))
    assert finding == Finding(False, "expected book(flight=HAT1, amount=250) was not made", ())


def _tau2_truth(basis: list[str] | None) -> dict[str, object]:
    criteria: dict[str, object] = {
        "actions": [
            {
                "action_id": "1",
                "name": "check_room_availability",
                "arguments": {"room_type_id": "suite", "guests": 2, "note": "any"},
                "compare_args": ["room_type_id", "guests"],
            },
            {"action_id": "2", "name": "get_hotel_info", "arguments": {}, "compare_args": []},
        ],
        "communicate_info": ["960.0"],
    }
    if basis is not None:
        criteria["reward_basis"] = basis
    return {"evaluation_criteria": criteria}


def test_tau2s_reward_basis_decides_what_the_expected_actions_require() -> None:
    # tau2 gates its reward on the components its reward_basis lists: ACTION (each expected
    # call made, compared on its compare_args; other calls allowed), COMMUNICATE (each
    # communicate_info told), DB (the database as the expected calls leave it: the state-
    # changing calls compared as tau-bench's are). Real runs (tests/data/importers/tau2/
    # hotel_calle_gemma3.json) booked a room no expected action names and were rewarded 1.0.
    steps = (
        call("check_room_availability", room_type_id="suite", guests=2, note="late"),
        result("available: 480.0 a night"),
        call("get_hotel_info"),
        result("{}"),
        say("Two nights come to 960.0."),
        user("Book it."),
        call("create_reservation", room_type_id="suite", guests=2),
        result("{}"),
    )
    action = expected_actions_match(
        trace(*steps, ground_truth=_tau2_truth(["ACTION", "COMMUNICATE"]))
    )
    assert action == Finding(
        True,
        "the 2 expected calls were made (steps 0, 2), other calls allowed (reward_basis ACTION); "
        "the 1 expected outputs were told (step 4)",
        (0, 2, 4),
    )
    # Without ACTION in the basis (tau2's default is DB and COMMUNICATE) the database decides:
    # the booking was not among the expected calls.
    db = expected_actions_match(trace(*steps, ground_truth=_tau2_truth(None)))
    assert db.passed is False and "create_reservation" in db.reason
    # ACTION requires each expected call, reads included, on its compare_args.
    missing = expected_actions_match(
        trace(*steps[:2], say("960.0"), ground_truth=_tau2_truth(["ACTION"]))
    )
    assert missing.passed is False
    assert missing.reason == "expected get_hotel_info() was not made (reward_basis ACTION)"
    other = expected_actions_match(
        trace(
            call("check_room_availability", room_type_id="double", guests=2),
            call("get_hotel_info"),
            ground_truth=_tau2_truth(["ACTION"]),
        )
    )
    assert other.reason == (
        "expected check_room_availability(room_type_id=suite, guests=2) was not made "
        "(reward_basis ACTION)"  # the arguments it is compared on
    )
    # A basis of model-judged components only leaves nothing to check without a model.
    judged = expected_actions_match(trace(*steps, ground_truth=_tau2_truth(["NL_ASSERTION"])))
    assert judged == Finding(
        None, "the reward_basis (NL_ASSERTION) names nothing a model-free check can decide"
    )


def test_expected_actions_need_the_expected_outputs_told() -> None:
    truth = {"task": {"actions": [], "outputs": ["23553"]}}
    told = trace(
        call("calculate", expression="1+1"), say("The total is $23,553."), ground_truth=truth
    )
    # The message that told it is the step the verdict is about.
    assert expected_actions_match(told) == Finding(
        True,
        "no state-changing call expected and none made; the 1 expected outputs were told (step 1)",
        (1,),
    )
    assert expected_outputs(told) == ["23553"]
    untold = expected_actions_match(trace(say("The total is large."), ground_truth=truth))
    assert untold == Finding(False, "expected output '23553' was never told to the user")
    tau2 = {"evaluation_criteria": {"actions": [], "communicate_info": ["R1 refunded"]}}
    assert expected_actions_match(trace(say("r1 refunded."), ground_truth=tau2)).passed is True


def test_expected_outputs_name_the_steps_that_told_them_besides_the_writes() -> None:
    truth = {"task": {**BOOKING["task"], "outputs": ["HAT1", "250"]}}
    made = trace(
        say("Flight HAT1 it is."),
        call("book", flight="HAT1", amount=250),
        result("booked"),
        say("Booked HAT1 for $250."),
        ground_truth=truth,
    )
    assert expected_actions_match(made) == Finding(
        True,
        "the 1 expected state-changing calls were made (step 1); the 2 expected outputs "
        "were told (steps 0, 3)",
        (0, 1, 3),
    )


def test_keys_inside_an_argument_the_expected_call_does_not_give_are_not_compared() -> None:
    # tau-bench task 5 trial 1 (reward 1): each flight carries origin and destination, which
    # update_reservation_flights does not read (it takes flight_number and date and looks up
    # the rest); the ground truth gives neither, and the database ends the same.
    flights = [{"flight_number": "HAT056", "date": "2024-05-25"}]
    truth = {"task": {"actions": [{"name": "update", "kwargs": {"id": "R1", "flights": flights}}]}}
    routed = [{"origin": "EWR", "destination": "IAH", **flights[0]}]
    made = trace(call("update", id="R1", flights=routed), result("{}"), ground_truth=truth)
    assert expected_actions_match(made) == Finding(
        True, "the 1 expected state-changing calls were made (step 0)", (0,)
    )
    # An expected key left out or given another value inside an item still differs.
    for item in ({"flight_number": "HAT056"}, {**routed[0], "date": "2024-05-26"}):
        other = trace(call("update", id="R1", flights=[item]), result("{}"), ground_truth=truth)
        assert expected_actions_match(other) == Finding(
            False, "step 0 update differs from the expected call in flights", (0,)
        )
    # At the top level an argument the expected call does not give is another call: the
    # arguments are the tool's parameters, and one more may change what it does.
    extra = trace(
        call("update", id="R1", flights=flights, cabin="economy"),
        result("{}"),
        ground_truth=truth,
    )
    assert expected_actions_match(extra) == Finding(
        False, "step 0 update differs from the expected call in cabin", (0,)
    )
    # A list of another length differs whatever its items.
    longer = trace(call("update", id="R1", flights=flights * 2), result("{}"), ground_truth=truth)
    assert expected_actions_match(longer).passed is False


def test_lists_of_plain_values_hold_the_same_items_in_any_order_kept_paired() -> None:
    # tau-bench's retail tools store item_ids sorted (return_delivered_order_items) and
    # modify_pending_order_items replaces item_ids[i] by new_item_ids[i]: the same pairs in
    # another order end in the same database.
    expected = {"order_id": "#W1", "item_ids": ["a", "b"], "new_item_ids": ["x", "y"]}
    truth = {"task": {"actions": [{"name": "exchange_items", "kwargs": expected}]}}

    def exchanged(item_ids: list[str], new_item_ids: list[str]) -> Finding:
        made = call("exchange_items", order_id="#W1", item_ids=item_ids, new_item_ids=new_item_ids)
        return expected_actions_match(trace(made, result("{}"), ground_truth=truth))

    assert exchanged(["b", "a"], ["y", "x"]) == Finding(
        True, "the 1 expected state-changing calls were made (step 0)", (0,)
    )
    # Pairs broken, an item missing or repeated: another call.
    for item_ids, new_item_ids in (
        (["b", "a"], ["x", "y"]),
        (["a"], ["x"]),
        (["a", "a"], ["x", "y"]),
    ):
        assert exchanged(item_ids, new_item_ids).passed is False
    # Lists of different lengths in one call are each compared as a multiset.
    truth["task"]["actions"][0]["kwargs"] = {
        "order_id": "#W1",
        "item_ids": ["a", "b"],
        "new_item_ids": ["x"],
    }
    assert exchanged(["b", "a"], ["x"]).passed is True
    assert exchanged(["b", "c"], ["x"]).passed is False
    # A list of objects keeps its order (tau-bench airline stores flights as given).
    flights = [{"flight_number": "HAT1"}, {"flight_number": "HAT2"}]
    ordered = {"task": {"actions": [{"name": "book", "kwargs": {"flights": flights}}]}}
    swapped = trace(call("book", flights=flights[::-1]), result("{}"), ground_truth=ordered)
    assert expected_actions_match(swapped).passed is False


def test_an_exchange_stores_its_two_lists_apart_so_their_pairing_does_not_matter() -> None:
    # tau-bench's (and tau2's) exchange_delivered_order_items stores sorted(item_ids) and
    # sorted(new_item_ids) apart, and the price difference is their sum: two shirts of one
    # product exchanged as a->y, b->x end in the database that a->x, b->y gives.
    expected = {"order_id": "#W1", "item_ids": ["a", "b"], "new_item_ids": ["x", "y"]}
    truth = {"task": {"actions": [{"name": "exchange_delivered_order_items", "kwargs": expected}]}}

    def exchanged(item_ids: list[str], new_item_ids: list[str], **settings: Any) -> Finding:
        made = call(
            "exchange_delivered_order_items",
            order_id="#W1",
            item_ids=item_ids,
            new_item_ids=new_item_ids,
        )
        return expected_actions_match(trace(made, result("{}"), ground_truth=truth), **settings)

    assert exchanged(["b", "a"], ["x", "y"]) == Finding(
        True, "the 1 expected state-changing calls were made (step 0)", (0,)
    )
    assert exchanged(["a", "b"], ["y", "x"]).passed is True
    # Each list is still a multiset: an item missing, repeated or another is another call.
    for item_ids, new_item_ids in ((["a", "a"], ["x", "y"]), (["a", "b"], ["x", "x"])):
        assert exchanged(item_ids, new_item_ids).passed is False
    # A tool left out of unpaired_tools keeps its pairs.
    assert exchanged(["b", "a"], ["x", "y"], unpaired_tools=()).passed is False


def test_expected_actions_undetermined_without_ground_truth() -> None:
    finding = expected_actions_match(trace(call("book"), result("ok")))
    assert finding.passed is None
    assert finding.reason == "the trace has no expected actions in metadata.ground_truth"


def test_expected_actions_read_only_tools_are_configurable() -> None:
    made = trace(call("book", flight="HAT1", amount=250), result("ok"), call("audit"), result())
    gt = BOOKING
    assert (
        expected_actions_match(trace(*made.model_dump()["steps"], ground_truth=gt)).passed is False
    )
    relaxed = expected_actions_match(
        trace(*made.model_dump()["steps"], ground_truth=gt), read_only_tools=["audit"]
    )
    assert relaxed.passed is True


# -- no_loops ------------------------------------------------------------------------------------


def test_no_loops_passes_on_distinct_calls() -> None:
    finding = no_loops(trace(call("a", q=1), result(), call("a", q=2), result(), call("a", q=1)))
    assert finding == Finding(True, "3 tool calls, none repeated in a loop")


def test_a_call_repeated_three_times_is_a_loop() -> None:
    steps = [call("search", q="x"), result("nothing")] * 3
    finding = no_loops(trace(*steps))
    assert finding.passed is False
    assert finding.reason == "search called 3 times with identical arguments (steps 0, 2, 4)"
    assert no_loops(trace(*steps), max_repeats=4).passed is True


def test_a_cycle_of_two_calls_repeated_three_times_is_a_loop() -> None:
    steps = []
    for page in range(3):
        steps += [call("open", page=page), result(), call("close"), result()]
    loops = find_loops(trace(*steps), max_repeats=4)
    assert [(loop.kind, loop.tools, loop.count) for loop in loops] == []
    steps = [call("open"), result(), call("close"), result()] * 3
    loops = find_loops(trace(*steps), max_repeats=4)
    assert [(loop.kind, loop.tools, loop.steps, loop.count) for loop in loops] == [
        ("cycle", ("open", "close"), (0, 2, 4, 6, 8, 10), 3)
    ]
    assert loops[0].describe() == "cycle open → close repeated 3 times (steps 0, 2, 4, 6, 8, 10)"


def test_no_loops_undetermined_without_tool_calls() -> None:
    assert no_loops(trace(say("hello"))) == Finding(None, "the trace has no tool calls")


# -- errors_recovered ------------------------------------------------------------------------


def test_an_error_followed_by_a_successful_call_is_recovered() -> None:
    finding = errors_recovered(
        trace(call("pay", card=1), result("declined", error=True), call("pay", card=2), result())
    )
    assert finding == Finding(
        True, "the errors at step 1 were each followed by a call that succeeded", (1,)
    )
    # The same call retried once the cause is gone (a timeout) recovers too.
    retried = trace(call("search", q="x"), result("timeout", error=True), call("search", q="x"))
    assert errors_recovered(retried).passed is False  # no answer yet
    answered_retry = trace(*retried.model_dump()["steps"], result("found"))
    assert errors_recovered(answered_retry).passed is True


def test_failing_again_or_thinking_is_no_recovery() -> None:
    failing = trace(
        call("pay", card=1),
        result("declined", error=True),
        call("think", thought="hmm"),
        result(""),
        call("pay", card=1),
        result("declined", error=True),
    )
    left = unrecovered_errors(failing)
    assert [(e.step, e.call.step_id if e.call else None) for e in left] == [(1, 0), (5, 4)]
    finding = errors_recovered(failing)
    assert finding.passed is False
    assert finding.reason == (
        "the error at step 1 (pay at step 0); the error at step 5 (pay at step 4): "
        "not followed by a call that succeeded"
    )
    # Counted as a recovery when think is not a scratch tool: step 1 then was followed by one.
    assert [e.step for e in unrecovered_errors(failing, scratch_tools=[])] == [5]


def test_errors_recovered_without_errors_passes_and_without_calls_is_undetermined() -> None:
    assert errors_recovered(trace(call("a"), result())).passed is True
    assert errors_recovered(trace(say("hi"))) == Finding(None, "the trace has no tool calls")


# -- known_tools and valid_arguments ---------------------------------------------------------

SCHEMA = {
    "type": "object",
    "properties": {"command": {"type": "string"}, "timeout": {"type": "integer"}},
    "required": ["command"],
    "additionalProperties": False,
}


def test_known_tools() -> None:
    tools = [function("Bash", SCHEMA), {"name": "Read"}]
    assert known_tools(trace(call("Bash", command="ls"), result(), tools=tools)).passed is True
    unknown = known_tools(trace(call("Bash", command="ls"), call("Write"), tools=tools))
    assert unknown == Finding(False, "undeclared tool Write called at step 1", (1,))
    assert known_tools(trace(call("Write"))) == Finding(None, "the trace declares no tools")
    assert known_tools(trace(say("hi"), tools=tools)).passed is None


def test_valid_arguments() -> None:
    tools = [function("Bash", SCHEMA), function("Read")]
    good = trace(call("Bash", command="ls", timeout=5), result(), call("Read"), tools=tools)
    assert valid_arguments(good).passed is True
    bad = valid_arguments(
        trace(call("Bash", timeout=1.5), result(), call("Bash", command="ls", cwd="/"), tools=tools)
    )
    assert bad.passed is False
    assert bad.reason == (
        "step 0 Bash: command: missing (required) and timeout: expected integer, got a number; "
        "step 2 Bash: cwd: not a declared argument"
    )
    assert bad.steps == (0, 2)
    assert valid_arguments(trace(call("Read"), tools=tools)) == Finding(
        None, "no tool called declares an argument schema"
    )
    assert valid_arguments(trace(call("Bash"))).passed is None


def test_a_declared_schema_that_is_no_json_schema_decides_nothing() -> None:
    # Tools now come from the logs themselves (a request's tools): a schema that is not a JSON
    # Schema was read as "matches" (a silent pass); its calls are now left undetermined, with
    # the reason, and the calls to tools with a valid schema still decide.
    broken = [function("Bash", {"type": "strin"}), function("Grep", {"properties": []})]
    made = trace(call("Bash", command="ls"), result(), call("Grep"), tools=broken)
    assert valid_arguments(made) == Finding(
        None,
        "no tool called declares a valid argument schema (Bash: parameters.type: 'strin' is "
        "not a JSON Schema type)",
    )
    mixed = [function("Bash", SCHEMA), function("Grep", {"properties": []})]
    made = trace(call("Bash", timeout=1.5), result(), call("Grep"), tools=mixed)
    finding = valid_arguments(made)
    assert finding.passed is False
    assert finding.reason == (
        "step 0 Bash: command: missing (required) and timeout: expected integer, got a number; "
        "1 call to a tool whose schema is not a JSON Schema not checked (Grep: "
        "parameters.properties: expected an object of schemas, got an array)"
    )
    made = trace(call("Bash", command="ls"), result(), call("Grep"), tools=mixed)
    assert valid_arguments(made).reason == (
        "the arguments of 1 calls match their tools' schemas; 1 call to a tool whose schema is "
        "not a JSON Schema not checked (Grep: parameters.properties: expected an object of "
        "schemas, got an array)"
    )


def test_schema_problems_cover_the_common_keywords() -> None:
    schema = {
        "type": "object",
        "properties": {
            "mode": {"enum": ["a", "b"]},
            "items": {"type": "array", "items": {"type": "number"}},
            "either": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "flag": {"type": "boolean"},
        },
    }
    assert (
        schema_problems({"mode": "a", "items": [1, 2.5], "either": None, "flag": True}, schema)
        == []
    )
    assert schema_problems({"mode": "c", "items": [1, "x"], "either": 3, "flag": 1}, schema) == [
        "mode: 'c' is not one of ['a', 'b']",
        "items[1]: expected number, got a string",
        "either: matches none of the anyOf schemas",
        "flag: expected boolean, got a number",
    ]
    assert schema_problems("text", schema) == ["arguments: expected object, got a string"]
    assert schema_problems({"x": 1}, "not a schema") == []


# -- confirmed_before_write --------------------------------------------------------------------


def test_a_write_after_the_users_yes_to_a_proposal_is_confirmed() -> None:
    made = trace(
        user("Cancel my trip"),
        call("get_reservation", id="R1"),
        result("{}"),
        say("I will cancel R1. Shall I proceed?"),
        user("Yes, please go ahead."),
        call("cancel_reservation", id="R1"),
        result("cancelled"),
    )
    assert confirmed_before_write(made) == Finding(
        True, "the user consented before each state-changing call (step 5)", (5,)
    )


def test_a_write_without_consent_fails() -> None:
    made = trace(
        say("Which reservation?"),
        user("R1, and no, do not cancel it yet"),
        call("cancel_reservation", id="R1"),
        result(),
        say("Proceed with the refund?"),
        user("Wait, how much is it?"),
        call("refund_payment", id="R1"),
    )
    assert unconfirmed_writes(made) != []
    finding = confirmed_before_write(made)
    assert finding == Finding(
        False,
        "cancel_reservation, refund_payment at steps 2, 6 without the user's consent since the proposal",
        (2, 6),
    )


def test_a_write_that_pays_needs_a_user_turn_naming_how() -> None:
    # tau-bench's policies: the agent asks the user which payment or refund method to use. A
    # yes to a proposal that never said how it pays does not choose it (AgentRx labels such a
    # run "did not ask for the payment method").
    def run(answer: str, **settings: object) -> Finding:
        made = trace(
            user("Change the item in my order #W1"),
            call("get_user_details", user_id="u1"),
            result('{"payment_methods": {"credit_card_1": {}, "paypal_2": {}}}'),
            say("I will change it to the blue one. Shall I proceed?"),
            user(answer),
            call("modify_pending_order_items", order_id="#W1", payment_method_id="credit_card_1"),
            result("{}"),
        )
        return confirmed_before_write(made, **settings)  # type: ignore[arg-type]

    assert run("Yes, go ahead.") == Finding(
        False,
        "modify_pending_order_items at step 5 pays with 'credit_card_1' (payment_method_id), a "
        "means of payment no user turn named",
        (5,),
    )
    assert run("Yes, charge my credit card.").passed is True
    assert run("Yes, use credit_card_1.").passed is True
    assert run("Yes, refund it the same way I paid.").passed is True
    assert run("Yes, go ahead.", payment_arguments=[]).passed is True
    assert run("Yes, go ahead.", payment_pattern=r"\bahead\b").passed is True
    # A payment given as a list of objects names each id inside it.
    booked = trace(
        say("Book HAT1 for $100?"),
        user("Yes."),
        call("book_reservation", payment_methods=[{"payment_id": "certificate_9", "amount": 100}]),
    )
    assert confirmed_before_write(booked).reason == (
        "book_reservation at step 2 pays with 'certificate_9' (payment_methods), a means of "
        "payment no user turn named"
    )
    # Both lapses are named, each call once.
    both = trace(
        say("Shall I?"),
        user("Hmm, what would it cost?"),
        call("update_reservation_flights", reservation_id="R1", payment_id="gift_card_7"),
    )
    assert confirmed_before_write(both) == Finding(
        False,
        "update_reservation_flights at step 2 without the user's consent since the proposal; "
        "update_reservation_flights at step 2 pays with 'gift_card_7' (payment_id), a means of "
        "payment no user turn named",
        (2,),
    )


def test_write_tools_and_the_consent_pattern_are_configurable() -> None:
    made = trace(say("Shall I?"), user("Affirmative."), call("launch"), call("send_report"))
    assert confirmed_before_write(made).steps == (3,)  # launch is not a write by its name
    # One consent covers the writes that follow it until the user speaks again.
    assert confirmed_before_write(made, consent_pattern=r"affirmative").passed is True
    chosen = confirmed_before_write(made, write_tools=["launch"], consent_pattern="affirmative")
    assert chosen == Finding(
        True, "the user consented before each state-changing call (step 2)", (2,)
    )
    # The tools the task's expected actions name are writes too.
    expected = trace(*made.model_dump()["steps"], ground_truth={"actions": [{"name": "launch"}]})
    assert [c.step_id for c in state_changing_calls(expected)] == [2, 3]
    assert confirmed_before_write(trace(say("Look?"), user("ok"), call("screenshot"))) == (
        Finding(None, "the trace has no state-changing call")
    )


def test_confirmed_before_write_undetermined_without_user_turns_or_writes() -> None:
    assert confirmed_before_write(trace(call("cancel"))) == Finding(
        None, "the trace has no user turns after the task"
    )
    assert confirmed_before_write(trace(user("hi"), call("get_user"), call("lookup"))) == Finding(
        None, "the trace has no state-changing call"
    )


# -- answered and within_budget ----------------------------------------------------------------


def test_a_run_that_ends_by_submitting_its_result_has_answered() -> None:
    # Real runs end so (tests/data/importers): SWE-agent on `submit`, whose output is the
    # patch; OpenHands on `finish` after "All done!"; pydantic-ai on `final_result`, which
    # carries the structured answer. Each read as "a tool call: no answer follows".
    for tool in ("submit", "finish", "final_result", "attempt_completion"):
        made = trace(call("edit", path="a.py"), result("edited"), call(tool), result("diff --git"))
        assert answered(made) == Finding(True, f"step 2 delivers the result ({tool})", (2,)), tool
    refused = trace(call("submit"), result("Error: no changes to submit", error=True))
    assert answered(refused).passed is False
    assert answered(trace(call("submit")), final_tools=[]).passed is False


def test_a_run_its_harness_records_as_submitted_has_answered() -> None:
    # mini-SWE-agent ends by running `echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff`
    # in bash; its harness takes the output as the result and records the exit status
    # Submitted. Real runs (tests/data/importers/mini_swe_agent) were read as "a tool call: no
    # answer follows".
    for name in ("astropy__astropy-13033.traj.json", "local.traj.json"):
        path = Path(__file__).parents[1] / "data" / "importers" / "mini_swe_agent" / name
        (made,) = from_mini_swe_agent(json.loads(path.read_text()))
        finding = answered(made)
        assert finding.passed is True, (name, finding)
        assert finding.reason == "the run's harness took its result (exit status Submitted)"
    submitted = trace(call("bash", command="echo done"), result("diff --git"))
    (submitted.metadata.model_extra or {})["kp_import"]["exit_status"] = "Submitted"
    assert answered(submitted).passed is True
    # Autosubmitted at a cost limit, the result was still delivered (task_completed weighs
    # the budget).
    (submitted.metadata.model_extra or {})["kp_import"]["exit_status"] = "submitted (exit_cost)"
    assert answered(submitted).passed is True
    for other in ("LimitsExceeded", "exit_cost", "Format error"):
        (submitted.metadata.model_extra or {})["kp_import"]["exit_status"] = other
        assert answered(submitted).passed is False, other


def test_answered() -> None:
    assert answered(trace(call("a"), result(), say("Here it is."), user("thanks"))) == Finding(
        True, "step 2 answers the user", (2,)
    )
    ended = answered(trace(say("Let me look."), call("search"), user("ok")))
    assert ended == Finding(
        False, "the agent's last step, 1, is a tool call: no answer follows", (1,)
    )
    handed = trace(say("One moment."), call("transfer_to_human_agents"), result("Transferred"))
    assert answered(handed) == Finding(
        True, "step 1 hands the user over (transfer_to_human_agents)", (1,)
    )
    assert answered(handed, handoff_tools=[]).passed is False
    # A native trace's own result summary is its answer.
    native = trace(call("a"), result(), summary="The answer is 42", imported=False)
    assert answered(native) == Finding(True, "the outcome's result_summary answers the task")
    assert answered(trace(user("hello?"))).passed is False


def test_within_budget_counts_agent_steps_only() -> None:
    steps = [call("a", i=i) if i % 2 == 0 else result() for i in range(8)]
    assert within_budget(trace(*steps), max_steps=4) == Finding(
        True, "4 agent steps, within the budget of 4"
    )
    assert within_budget(trace(*steps), max_steps=3) == Finding(
        False, "4 agent steps, over the budget of 3 from step 6", (6,)
    )


def test_a_reward_basis_with_nothing_to_tell_passes_saying_so() -> None:
    # A real tau2 task (tests/data/importers/tau2/resultado_filtro_gastelo_1.json) gates its
    # reward on COMMUNICATE and gives no communicate_info: rewarded 1.0.
    truth = {"evaluation_criteria": {"actions": [], "reward_basis": ["COMMUNICATE"]}}
    assert expected_actions_match(trace(say("In stock."), ground_truth=truth)) == Finding(
        True, "the reward_basis (COMMUNICATE) asks for no call and no output here", ()
    )
