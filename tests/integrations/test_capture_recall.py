"""capture(recall=...): the worked examples recalled from the knowledge base reach the model's
instructions (the real openai and anthropic clients against the loopback model server), and
the recorded trace stays the agent's own."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import anthropic
import pytest

import knowledgepulse
from _helpers import HashingEmbedder
from _injection import check_fenced
from knowledgepulse import Scorer
from knowledgepulse.embedding import check_embedder
from knowledgepulse.kb import EmbeddingIdentity, open_knowledge_base

from ._model_server import ModelServer, model_server
from .test_capture import QUESTION, _openai, anthropic_agent, openai_agent


@pytest.fixture
def server() -> Any:
    with model_server() as running:
        yield running


def _base(tmp_path: Path, server: ModelServer) -> Any:
    """A base holding one successful weather run (captured and stored)."""
    embedder = check_embedder(HashingEmbedder())
    kb = open_knowledge_base(tmp_path / "team.sqlite", EmbeddingIdentity.of(embedder))
    with knowledgepulse.capture(
        objective="Weather and air quality in Lisbon", kb=kb, scorer=Scorer(embedder), threshold=0
    ) as run:
        openai_agent(_openai(server))
        run.finish(success=True)
    assert run.contributed
    server.requests.clear()
    return kb


def test_recalled_examples_reach_the_system_message(server: ModelServer, tmp_path: Path) -> None:
    kb = _base(tmp_path, server)
    scorer = Scorer(HashingEmbedder())
    with knowledgepulse.capture(kb=kb, scorer=scorer, recall=3, threshold=1.0) as run:
        openai_agent(_openai(server))
        run.finish(success=True)
    assert run.recalled is not None and len(run.recalled) == 1
    assert run.recalled.query == QUESTION  # no objective: the first user message
    block = run.recalled.prompt
    check_fenced(block, 1)
    assert block.splitlines()[5] == "Task: Weather and air quality in Lisbon"
    systems = [body["messages"][0] for _, body in server.requests]
    assert len(systems) == 3
    assert all(m == {"role": "system", "content": f"You answer weather questions.\n\n{block}"}
               for m in systems)  # fmt: skip
    recorded = run.calls[0].request["messages"][0]
    assert recorded == {"role": "system", "content": "You answer weather questions."}
    assert run.trace is not None and "untrusted data" not in run.trace.to_json()
    kb.close()


def test_anthropic_system_gets_the_examples(server: ModelServer, tmp_path: Path) -> None:
    kb = _base(tmp_path, server)
    client = anthropic.AsyncAnthropic(base_url=server.url, api_key="test", max_retries=0)
    with knowledgepulse.capture(
        "Weather in Lisbon", kb=kb, scorer=Scorer(HashingEmbedder()), recall=True, threshold=1.0
    ) as run:
        asyncio.run(anthropic_agent(client, QUESTION))
    assert run.recalled is not None and run.recalled.query == "Weather in Lisbon"
    systems = {body["system"] for _, body in server.requests}
    assert systems == {f"You answer weather questions.\n\n{run.recalled.prompt}"}
    kb.close()


def test_nothing_recalled_leaves_the_call_alone(server: ModelServer, tmp_path: Path) -> None:
    embedder = check_embedder(HashingEmbedder())
    with (
        open_knowledge_base(tmp_path / "empty.sqlite", EmbeddingIdentity.of(embedder)) as kb,
        knowledgepulse.capture(kb=kb, scorer=Scorer(embedder), recall=True) as run,
    ):
        openai_agent(_openai(server))
    assert run.recalled is not None and run.recalled.hits == []
    assert server.requests[0][1]["messages"][0]["content"] == "You answer weather questions."


def test_recall_needs_a_knowledge_base() -> None:
    with (
        pytest.raises(ValueError, match=r"^recall= searches a knowledge base: give kb= too$"),
        knowledgepulse.capture(recall=True),
    ):
        pass
