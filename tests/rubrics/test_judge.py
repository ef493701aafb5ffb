"""Judged criteria against a scripted chat-completions server on loopback."""

from __future__ import annotations

import email.utils
import json
import math
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("httpx")

from knowledgepulse.rubrics import (
    Case,
    Criterion,
    JudgeModel,
    Rubric,
    UndeterminedError,
    Verdict,
    build_report,
    judge,
    prefetching,
    set_default_judge,
)
from knowledgepulse.rubrics._chat_client import _retry_after
from rubrics._judge_server import Reply, ScriptedServer, completion, structured

ModelFactory = Callable[..., JudgeModel]
QUESTION = "Did the agent explain why the requested time was unavailable?"


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer().running() as running:
        yield running


@pytest.fixture
def make_model(server: ScriptedServer, tmp_path: Path) -> Iterator[ModelFactory]:
    made: list[JudgeModel] = []

    def make(**settings: Any) -> JudgeModel:
        defaults: dict[str, Any] = {
            "base_url": server.url,
            "cache_dir": tmp_path / "cache",
            "backoff": 0.001,
        }
        model = JudgeModel("judge-test", **(defaults | settings))
        made.append(model)
        return model

    yield make
    for model in made:
        model.close()


def case(number: int = 1) -> Case:
    return Case(
        conversation_trace=({"user": "Book 3pm", "response": f"3pm is taken ({number})."},),
        final_state={"stage": "declined"},
        case_id=f"c{number}",
    )


def ask(model: JudgeModel, **options: Any) -> Verdict:
    return judge(QUESTION, model=model, **options)(case())


def test_structured_answer_keeps_the_reasoning(
    server: ScriptedServer, make_model: ModelFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KP_JUDGE_API_KEY", "sk-test")
    server.add(structured("yes", "The agent said 3pm was taken.", prompt=120, completion=30))
    verdict = ask(make_model())
    assert verdict.passed is True
    assert verdict.reasoning == "The agent said 3pm was taken."
    assert (verdict.yes, verdict.no, verdict.undetermined) == (1, 0, 0)
    assert (verdict.prompt_tokens, verdict.completion_tokens, verdict.cached) == (120, 30, 0)
    assert (verdict.pass_rate, verdict.spread) == (1.0, 0.0)
    request = server.requests[0]
    assert server.paths == ["/v1/chat/completions"]
    assert server.headers[0]["Authorization"] == "Bearer sk-test"
    assert request["model"] == "judge-test"
    assert request["response_format"]["type"] == "json_schema"
    schema = request["response_format"]["json_schema"]["schema"]
    assert list(schema["properties"]) == ["reasoning", "verdict"]
    assert schema["properties"]["verdict"]["enum"] == ["yes", "no"]
    user = request["messages"][1]["content"]
    assert user.startswith(f"Question: {QUESTION}\n\nRecord of the task:\n```json\n")
    record = json.loads(user.split("```json\n", 1)[1].rsplit("\n```", 1)[0])
    assert record == {
        "conversation_trace": [{"response": "3pm is taken (1).", "user": "Book 3pm"}],
        "final_state": {"stage": "declined"},
    }


def test_server_without_structured_output_falls_back_to_the_verdict_line(
    server: ScriptedServer, make_model: ModelFactory
) -> None:
    server.add(
        Reply(400, {"error": {"message": "response_format is not supported"}}),
        completion("The agent never said why.\nVERDICT: no"),
        completion("It explained.\n\n**Verdict:** Yes"),
    )
    model = make_model()
    first = ask(model)
    assert (first.passed, first.reasoning) == (False, "The agent never said why.")
    second = judge(QUESTION, model=model)(case(2))
    assert (second.passed, second.reasoning) == (True, "It explained.")
    # Once refused, structured output is not asked for again.
    assert ["response_format" in r for r in server.requests] == [True, False, False]


def test_plain_answer_to_a_structured_request_is_read(
    server: ScriptedServer, make_model: ModelFactory
) -> None:
    server.add(completion('```json\n{"reasoning": "Said so.", "verdict": "no"}\n```'))
    verdict = ask(make_model())
    assert (verdict.passed, verdict.reasoning) == (False, "Said so.")


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        (
            completion(None, refusal="I can't help with that."),
            "the judge refused: I can't help with that.",
        ),
        (
            completion("Maybe? Hard to say."),
            "no verdict in the judge's answer: Maybe? Hard to say.",
        ),
        (completion(""), "the judge gave an empty answer"),
        (
            Reply(200, "<html>proxy error</html>"),
            "the judge could not be asked: not a chat completion",
        ),
        (
            Reply(401, {"error": "bad key"}),
            'the judge could not be asked: HTTP 401: {"error": "bad key"}',
        ),
    ],
)
def test_failed_answers_are_undetermined(
    server: ScriptedServer, make_model: ModelFactory, reply: Reply, problem: str
) -> None:
    server.add(reply)
    verdict = ask(make_model(max_retries=0))
    assert verdict.passed is None
    assert verdict.undetermined == 1
    assert verdict.problems[0].startswith(problem)
    with pytest.raises(UndeterminedError, match=re.escape(problem)):
        bool(verdict)


def test_server_errors_are_retried_until_an_answer(
    server: ScriptedServer, make_model: ModelFactory
) -> None:
    server.add(Reply(500, {"error": "boom"}), Reply(502, "bad gateway"), structured("yes"))
    assert ask(make_model(max_retries=2)).passed is True
    assert len(server.requests) == 3


def test_retries_run_out(server: ScriptedServer, make_model: ModelFactory) -> None:
    server.add(*[Reply(503, {"error": "overloaded"})] * 3)
    verdict = ask(make_model(max_retries=2))
    assert verdict.passed is None
    assert verdict.problems == ['the judge could not be asked: HTTP 503: {"error": "overloaded"}']
    assert len(server.requests) == 3


def test_rate_limit_waits_for_retry_after(server: ScriptedServer, make_model: ModelFactory) -> None:
    server.add(Reply(429, {"error": "slow down"}, headers={"Retry-After": "1"}), structured("no"))
    started = time.monotonic()
    verdict = ask(make_model(backoff=0.001))
    assert verdict.passed is False
    assert time.monotonic() - started >= 0.95
    assert len(server.requests) == 2


def test_slow_answers_time_out(server: ScriptedServer, make_model: ModelFactory) -> None:
    server.add(Reply(delay=0.6), Reply(delay=0.6))
    verdict = ask(make_model(timeout=0.2, max_retries=1))
    assert verdict.passed is None
    assert verdict.problems == ["the judge could not be asked: no answer within 0.2 s"]
    assert len(server.requests) == 2


def test_a_timeout_then_an_answer(server: ScriptedServer, make_model: ModelFactory) -> None:
    server.add(Reply(delay=0.6), structured("yes"))
    assert ask(make_model(timeout=0.2, max_retries=1)).passed is True


def test_answers_are_cached_by_model_prompt_and_case(
    server: ScriptedServer, make_model: ModelFactory
) -> None:
    rubric = Rubric("cached", [Criterion("explained", 1.0, judge(QUESTION, model=make_model()))])
    first = [rubric.evaluate(case(n)) for n in (1, 2, 3)]
    assert len(server.requests) == 3

    again = make_model()  # a new process, as far as the cache can tell
    rerun = Rubric("cached", [Criterion("explained", 1.0, judge(QUESTION, model=again))])
    second = [rerun.evaluate(case(n)) for n in (1, 2, 3)]
    assert len(server.requests) == 3  # the re-run asked nothing
    assert [r.details for r in second] == [r.details for r in first]
    assert [r.verdicts["explained"].cached for r in second] == [1, 1, 1]
    assert [r.verdicts["explained"].prompt_tokens for r in second] == [0, 0, 0]
    assert (again.usage.calls, again.usage.cached) == (0, 3)

    other_question = judge("Was the agent polite?", model=again)(case(1))
    assert other_question.cached == 0
    assert len(server.requests) == 4

    refreshed = make_model(use_cache=False)
    judge(QUESTION, model=refreshed)(case(1))
    assert len(server.requests) == 5
    assert (refreshed.usage.calls, refreshed.usage.cached) == (1, 0)


def test_undetermined_answers_are_not_cached(
    server: ScriptedServer, make_model: ModelFactory
) -> None:
    server.add(completion("no idea"), structured("yes"))
    assert ask(make_model()).passed is None
    assert ask(make_model()).passed is True
    assert len(server.requests) == 2


def votes(*answers: str) -> list[Reply]:
    return [structured(a, f"reason {i} {a}") for i, a in enumerate(answers)]


def test_samples_majority_with_pass_rate_and_spread(
    server: ScriptedServer, make_model: ModelFactory
) -> None:
    server.add(*votes("yes", "no", "yes"))
    verdict = ask(make_model(), samples=3)
    assert len(server.requests) == 3
    assert (verdict.passed, verdict.yes, verdict.no, verdict.samples) == (True, 2, 1, 3)
    assert verdict.pass_rate == pytest.approx(2 / 3, abs=1e-12)
    assert verdict.spread == pytest.approx(math.sqrt(2 / 9), abs=1e-12)
    assert verdict.rule == "majority"
    assert verdict.reasoning.endswith("yes")
    # Each sample is cached on its own: a re-run gives back all three answers.
    again = ask(make_model(), samples=3)
    assert (again.yes, again.no, again.cached) == (2, 1, 3)
    assert len(server.requests) == 3


@pytest.mark.parametrize(
    ("answers", "rule", "passed"),
    [
        (("yes", "no"), "majority", False),  # a tie is no majority
        (("yes", "yes", "no"), "all", False),
        (("no", "no", "yes"), "any", True),
        (("yes", "yes", "no"), 0.6, True),
        (("yes", "no", "no"), 0.6, False),
        (("yes", "yes", "yes"), "all", True),
    ],
)
def test_sampling_rules(
    server: ScriptedServer,
    make_model: ModelFactory,
    answers: tuple[str, ...],
    rule: Any,
    passed: bool,
) -> None:
    server.add(*votes(*answers))
    verdict = ask(make_model(), samples=len(answers), rule=rule)
    assert verdict.passed is passed


def test_too_few_determined_samples_leave_the_criterion_undetermined(
    server: ScriptedServer, make_model: ModelFactory
) -> None:
    server.add(structured("yes"), completion("hmm"), completion("hmm"))
    verdict = ask(make_model(), samples=3)
    assert (verdict.passed, verdict.yes, verdict.undetermined) == (None, 1, 2)
    assert verdict.problems == ["no verdict in the judge's answer: hmm"]


def test_one_undetermined_sample_of_three_still_decides(
    server: ScriptedServer, make_model: ModelFactory
) -> None:
    server.add(structured("no"), completion("hmm"), structured("no"))
    verdict = ask(make_model(), samples=3)
    assert (verdict.passed, verdict.no, verdict.undetermined) == (False, 2, 1)


def test_concurrency_is_bounded(server: ScriptedServer, make_model: ModelFactory) -> None:
    server.default = lambda body: Reply(**{**vars(structured("yes")), "delay": 0.15})
    verdict = ask(make_model(concurrency=3), samples=8)
    assert verdict.yes == 8
    assert server.max_in_flight == 3


def test_prefetching_overlaps_cases_within_the_bound(
    server: ScriptedServer, make_model: ModelFactory
) -> None:
    server.default = lambda body: Reply(**{**vars(structured("yes")), "delay": 0.15})
    model = make_model(concurrency=4)
    rubric = Rubric("ahead", [Criterion("explained", 1.0, judge(QUESTION, model=model))])
    cases = [case(n) for n in range(8)]
    started = time.monotonic()
    results = [rubric.evaluate(c) for c in prefetching(cases, rubric, ahead=8)]
    elapsed = time.monotonic() - started
    assert [r.case_id for r in results] == [f"c{n}" for n in range(8)]
    assert all(r.details == {"explained": True} for r in results)
    assert server.max_in_flight == 4
    assert len(server.requests) == 8
    assert elapsed < 8 * 0.15  # one at a time would take 1.2 s


def test_token_totals_per_criterion_and_run(
    server: ScriptedServer, make_model: ModelFactory
) -> None:
    model = make_model()
    server.default = lambda body: (
        structured("yes", prompt=100, completion=20)
        if "polite" in body["messages"][1]["content"]
        else structured("no", prompt=50, completion=10)
    )
    rubric = Rubric(
        "tokens",
        [
            Criterion("polite", 0.5, judge("Was the agent polite?", model=model, samples=2)),
            Criterion("explained", 0.5, judge(QUESTION, model=model)),
        ],
    )
    report = build_report(rubric.evaluate(case(n)) for n in (1, 2, 3))
    by_name = {stats.name: stats for stats in report.criteria}
    assert (by_name["polite"].prompt_tokens, by_name["polite"].completion_tokens) == (600, 120)
    assert (by_name["explained"].prompt_tokens, by_name["explained"].completion_tokens) == (150, 30)
    assert (report.prompt_tokens, report.completion_tokens) == (750, 150)
    assert (model.usage.calls, model.usage.prompt_tokens, model.usage.completion_tokens) == (
        9,
        750,
        150,
    )
    assert "judge tokens" in report.render_text()
    assert "750 prompt + 150 completion" in report.render_text()


def test_the_default_judge_serves_criteria_given_no_model(
    server: ScriptedServer, make_model: ModelFactory
) -> None:
    previous = set_default_judge(make_model())
    try:
        rubric = Rubric("default", [Criterion("explained", 1.0, judge(QUESTION))])
        result = rubric.evaluate(case())
    finally:
        set_default_judge(previous)
    assert result.details == {"explained": True}
    assert result.explanation == (
        "Score 1.00 (successful_completion). Passed: explained (1.00). Failed: none. "
        "Judged explained: yes: Because."
    )
    assert result.verdicts["explained"].reasoning == "Because."


def test_retry_after_in_seconds_or_as_a_date() -> None:
    assert _retry_after("3") == 3.0
    assert _retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # in the past: at once
    later = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 28.0 < (_retry_after(later) or 0.0) <= 30.0
    assert _retry_after("soon") is None


def test_closing_cancels_what_was_asked_ahead(
    server: ScriptedServer, make_model: ModelFactory
) -> None:
    server.default = lambda body: Reply(**{**vars(structured("yes")), "delay": 0.3})
    model = make_model(concurrency=1)
    check = judge(QUESTION, model=model)
    cases = [case(n) for n in range(3)]
    for each in cases:
        check.prefetch(each)
    deadline = time.monotonic() + 5
    while not server.requests and time.monotonic() < deadline:
        time.sleep(0.01)
    started = time.monotonic()
    model.close()  # returns without waiting for the three slow answers
    assert time.monotonic() - started < 0.25
    time.sleep(0.4)
    assert len(server.requests) == 1


def test_a_judge_answer_nested_past_the_parser_is_read_as_text() -> None:
    # A model's answer is untrusted text: JSON nested past Python's parser raised
    # RecursionError out of the verdict's reading.
    from knowledgepulse.rubrics._chat_client import ChatAnswer
    from knowledgepulse.rubrics._judge_model import parse_answer

    text = "[" * 5000 + "]" * 5000 + "\nVERDICT: YES"
    answer = parse_answer(ChatAnswer(text, None, "stop", 1, 1))
    assert (answer.verdict, answer.problem) == (True, None)
