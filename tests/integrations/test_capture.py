"""knowledgepulse.capture with the real openai and anthropic clients against a loopback server."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from anthropic.resources.messages import AsyncMessages, Messages
from openai.resources.chat.completions import AsyncCompletions, Completions

import knowledgepulse
from _helpers import HashingEmbedder
from knowledgepulse import Scorer
from knowledgepulse.integrations._capture import DEFAULT_THRESHOLD, current_run
from knowledgepulse.kb import EmbeddingIdentity, open_knowledge_base
from knowledgepulse.records import ScoreRecord

from ._model_server import AIR, ANSWER, WEATHER, ModelServer, model_server

QUESTION = "What is the weather in Lisbon, and is the air clean?"
TOOL_OUTPUT = {"get_weather": WEATHER, "get_air_quality": AIR}
ORIGINALS = {
    cls: cls.__dict__["create"] for cls in (Completions, AsyncCompletions, Messages, AsyncMessages)
}


@pytest.fixture
def server() -> Any:
    with model_server() as running:
        yield running


def _openai(server: ModelServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="test", max_retries=0)


def openai_agent(client: openai.OpenAI, **extra: Any) -> str:
    """A plain tool loop: the assistant's reply objects go back into the messages as they are."""
    messages: list[Any] = [
        {"role": "system", "content": "You answer weather questions."},
        {"role": "user", "content": QUESTION},
    ]
    while True:
        response = client.chat.completions.create(model="gpt-test", messages=messages, **extra)
        message = response.choices[0].message
        messages.append(message)
        if not message.tool_calls:
            return message.content or ""
        for call in message.tool_calls:
            content = TOOL_OUTPUT[call.function.name]
            messages.append({"role": "tool", "tool_call_id": call.id, "content": content})


async def anthropic_agent(client: anthropic.AsyncAnthropic, question: str) -> str:
    messages: list[anthropic.types.MessageParam] = [{"role": "user", "content": question}]
    while True:
        response = await client.messages.create(
            model="claude-test",
            max_tokens=256,
            system="You answer weather questions.",
            messages=messages,
        )
        messages.append({"role": "assistant", "content": response.content})
        calls = [block for block in response.content if block.type == "tool_use"]
        if not calls:
            return "".join(block.text for block in response.content if block.type == "text")
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": c.id, "content": TOOL_OUTPUT[c.name]}
                    for c in calls
                ],
            }
        )


def _steps(run: knowledgepulse.CapturedRun) -> list[tuple[str, str | None, str | None]]:
    assert run.trace is not None
    return [
        (step.type, step.tool.name if step.tool else None, step.content) for step in run.trace.steps
    ]


EXPECTED_STEPS = [
    ("thought", None, "Let me look up the forecast."),
    ("tool_call", "get_weather", None),
    ("observation", "get_weather", WEATHER),
    ("tool_call", "get_air_quality", None),
    ("observation", "get_air_quality", AIR),
    ("thought", None, ANSWER),
]


def _clients_restored() -> bool:
    return all(cls.__dict__["create"] is original for cls, original in ORIGINALS.items())


def test_openai_run_becomes_a_scored_trace(server: ModelServer) -> None:
    scorer = Scorer(embedder=None)
    with knowledgepulse.capture(objective="Weather report", domain="travel", scorer=scorer) as run:
        assert openai_agent(_openai(server)) == ANSWER
        run.finish(success=True)
    assert _clients_restored()
    assert run.problem is None
    assert _steps(run) == EXPECTED_STEPS
    assert run.trace is not None
    assert run.trace.steps[1].input == {"city": "Lisbon"}
    assert run.trace.task.objective == "Weather report"
    assert run.trace.metadata.task_domain == "travel"
    assert run.trace.metadata.success is True
    assert run.trace.id == "kp:trace:openai:chatcmpl-1"
    kp_import = run.trace.to_dict()["metadata"]["kp_import"]
    assert kp_import["response_id"] == "chatcmpl-3"
    assert kp_import["captured"] == {"calls": 3, "failed_calls": 0}
    assert kp_import["model"] == "gpt-test"
    assert run.score is not None
    assert run.score.value == Scorer(embedder=None).score(run.trace).value
    # A good run that says it succeeded reaches the default threshold.
    assert run.score.value == pytest.approx(0.68375)
    assert run.passed is (DEFAULT_THRESHOLD <= 0.68375) is True
    # Its score line is the record kp score writes for the trace, passed against the threshold.
    record = run.record
    assert record is not None
    assert (record.id, record.score, record.passed, record.threshold) == (
        "kp:trace:openai:chatcmpl-1",
        0.68375,
        True,
        DEFAULT_THRESHOLD,
    )
    assert (record.source, record.line) == (None, None)
    assert record == ScoreRecord.of(run.score, run.trace, threshold=DEFAULT_THRESHOLD)


def test_concurrent_async_anthropic_runs_do_not_mix(server: ModelServer) -> None:
    client = anthropic.AsyncAnthropic(base_url=server.url, api_key="test", max_retries=0)

    async def one(question: str) -> knowledgepulse.CapturedRun:
        with knowledgepulse.capture(scorer=Scorer(embedder=None)) as run:
            assert current_run() is run
            await anthropic_agent(client, question)
        return run

    async def both() -> tuple[knowledgepulse.CapturedRun, knowledgepulse.CapturedRun]:
        return await asyncio.gather(one("Lisbon weather?"), one("Porto weather?"))

    first, second = asyncio.run(both())
    assert _clients_restored()
    assert current_run() is None
    assert [len(first.calls), len(second.calls)] == [3, 3]
    assert first.trace is not None and second.trace is not None
    assert first.trace.task.objective == "Lisbon weather?"
    assert second.trace.task.objective == "Porto weather?"
    assert _steps(first) == EXPECTED_STEPS
    assert first.trace.id.startswith("kp:trace:anthropic:msg_")


def test_a_failed_model_call_is_a_failed_observation_then_recovery(server: ModelServer) -> None:
    client = _openai(server)
    with knowledgepulse.capture(scorer=Scorer(embedder=None)) as run:
        with pytest.raises(openai.InternalServerError):
            openai_agent(client, extra_body={"fail": True})
        openai_agent(client)
    assert run.trace is not None
    steps = _steps(run)
    assert steps[0][:2] == ("observation", None)
    assert steps[0][2] is not None and steps[0][2].startswith(
        "model call failed: InternalServerError: Error code: 500"
    )
    assert (run.trace.steps[0].model_extra or {}).get("is_error") is True
    assert steps[1] == ("error_recovery", None, "Let me look up the forecast.")
    assert steps[2:] == EXPECTED_STEPS[1:]
    assert [step.step_id for step in run.trace.steps] == list(range(7))
    assert run.trace.to_dict()["metadata"]["kp_import"]["captured"] == {
        "calls": 4,
        "failed_calls": 1,
    }


def test_an_exception_in_the_block_marks_the_run_failed_and_goes_through(
    server: ModelServer,
) -> None:
    with (
        pytest.raises(RuntimeError, match="agent crashed"),
        knowledgepulse.capture(scorer=Scorer(embedder=None)) as run,
    ):
        openai_agent(_openai(server))
        raise RuntimeError("agent crashed")
    assert _clients_restored()
    assert run.trace is not None
    assert run.trace.metadata.success is False


def test_calls_outside_a_capture_are_not_recorded(server: ModelServer) -> None:
    with knowledgepulse.capture(scorer=Scorer(embedder=None)) as run:
        pass
    openai_agent(_openai(server))
    assert run.calls == []
    assert run.trace is None
    assert run.problem == "no model call was recorded (openai or anthropic client)"


def test_a_passing_run_is_contributed_with_its_bearer_key(server: ModelServer) -> None:
    with knowledgepulse.capture(
        scorer=Scorer(embedder=None), contribute_to=server.url, api_key="s3cret"
    ) as run:
        openai_agent(_openai(server))
        run.finish(success=True, confidence=0.9)
    assert run.contributed is True
    ((authorization, body),) = server.contributions
    assert authorization == "Bearer s3cret"
    assert run.score is not None and run.trace is not None
    assert body["id"] == run.trace.id
    assert body["metadata"]["quality_score"] == run.score.value


def test_a_run_below_the_threshold_is_not_contributed(server: ModelServer) -> None:
    with knowledgepulse.capture(
        scorer=Scorer(embedder=None), contribute_to=server.url, threshold=0.9
    ) as run:
        openai_agent(_openai(server))
    assert (run.passed, run.contributed, server.contributions) == (False, False, [])


def test_a_refused_contribution_is_reported_not_raised(
    server: ModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.contribution_status = 401
    with (
        caplog.at_level(logging.WARNING, "knowledgepulse.capture"),
        knowledgepulse.capture(
            scorer=Scorer(embedder=None), contribute_to=server.url, threshold=0.0
        ) as run,
    ):
        openai_agent(_openai(server))
    assert run.contributed is False
    assert run.contribution_error is not None
    assert f"{server.url} answered 401" in run.contribution_error
    assert "not contributed" in caplog.text


def test_a_passing_run_goes_into_the_knowledge_base(server: ModelServer, tmp_path: Path) -> None:
    identity = EmbeddingIdentity(model="hashing", dimensions=384, windowing="whole")
    with open_knowledge_base(tmp_path / "team.sqlite", identity) as kb:
        runs = []
        for threshold in (0.5, 0.99):
            with knowledgepulse.capture(
                kb=kb, scorer=Scorer(embedder=HashingEmbedder()), threshold=threshold
            ) as run:
                openai_agent(_openai(server))
                run.finish(success=True)
            runs.append(run)
        assert len(kb) == 1
        assert runs[0].trace is not None
        assert kb.get(runs[0].trace.id) is not None
    assert [(run.passed, run.contributed) for run in runs] == [(True, True), (False, False)]


def test_the_decorator_captures_each_call(server: ModelServer) -> None:
    @knowledgepulse.captured(objective="Weather report", scorer=Scorer(embedder=None))
    def answer() -> str:
        run = current_run()
        assert run is not None
        run.finish(success=True)
        return openai_agent(_openai(server))

    assert answer() == ANSWER
    run = answer.last_run  # type: ignore[attr-defined]
    assert run.trace.task.objective == "Weather report"
    assert _steps(run) == EXPECTED_STEPS


def test_an_invalid_threshold_is_refused() -> None:
    with (
        pytest.raises(ValueError, match="threshold must be in"),
        knowledgepulse.capture(threshold=1.5),
    ):
        pass


def test_default_threshold_is_documented() -> None:
    docs = (Path(__file__).parents[2] / "docs" / "integrations.md").read_text(encoding="utf-8")
    assert f"DEFAULT_THRESHOLD = {DEFAULT_THRESHOLD}" in docs
    assert json.dumps(DEFAULT_THRESHOLD) == "0.6"
