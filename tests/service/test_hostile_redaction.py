"""Hostile clients, issue 22 item 2: a secret contributed anywhere in a trace is not stored.

A real server on loopback (the redaction ``kp serve`` loads: knowledgepulse.redaction), the
threshold at 0 so that every contribution is stored; then the rows of the base and the
answers of ``GET /v1/traces/{id}`` are searched for each planted value."""

from __future__ import annotations

import json
import random
from typing import Any

from benchmarks._redaction import leaked

from _planting import plant, plantable_paths, secrets_of_every_kind

from .conftest import Serve

OPENAI = "sk-" + "proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
GITHUB = "gh" + "p_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
AWS_ID = "AKIA" + "Z7QW4ERT6YUI2OPL"


def _sample_trace() -> dict[str, Any]:
    return {
        "@context": "https://openknowledgepulse.org/schema/v1",
        "@type": "ReasoningTrace",
        "id": "kp:trace:sample",
        "source_skill": "triage",
        "metadata": {
            "created_at": "2026-01-01T10:00:00Z",
            "agent_id": "agent seven",
            "framework": "langgraph",
            "task_domain": "support",
            "success": True,
            "visibility": "network",
            "privacy_level": "private",  # every kind is redacted
            "validated_by": ["ci"],
            "ticket": {"order": 12, "notes": ["first"]},
        },
        "task": {"objective": "Answer the ticket", "input_schema": {"type": "object"}},
        "steps": [
            {"step_id": 0, "type": "thought", "content": "Read it", "latency_ms": 12},
            {
                "step_id": 1,
                "type": "tool_call",
                "tool": {
                    "name": "db_query",
                    "mcp_server": "local",
                    "description": "runs SQL",
                    "config": {"api_key": "none", "timeout": 30},
                },
                "input": {"sql": "select 1", "rows": [1, 2]},
                "output_summary": "one row",
            },
        ],
        "outcome": {"result_summary": "answered", "confidence": 0.9},
        "knowledge_graph_delta": {
            "entities": [{"name": "ticket", "type": "issue"}],
            "relationships": [{"fact": "ticket answered", "valid_from": "today"}],
        },
    }


def test_the_issues_four_tool_secrets_are_not_stored(serve: Serve) -> None:
    trace = _sample_trace()
    dsn = "postgresql://app:pa55word@db.internal:5432/app"
    trace["steps"][1]["tool"] = {
        "name": "db_query",
        "config": {"api_key": OPENAI, "dsn": dsn},
        "description": f"reads with key id {AWS_ID}",
        "mcp_server": f"https://mcp.example.net/?token={GITHUB}",
    }
    with serve(threshold=0.0) as service:
        client = service.client("alice")
        assert client.post("/v1/traces", json=trace).status_code == 201
        answer = client.get("/v1/traces/kp:trace:sample").json()
        (row,) = list(service.kb.iter_stored())
    for where in (json.dumps(answer), json.dumps(row.trace)):
        for secret in (OPENAI, "pa55word", AWS_ID, GITHUB):
            assert secret not in where
    assert answer["trace"]["steps"][1]["tool"] == {
        "name": "db_query",
        "config": {
            "api_key": "[API_KEY:openai]",
            "dsn": "postgresql://app:[PASSWORD]@db.internal:5432/app",
        },
        "description": "reads with key id [API_KEY:aws]",
        "mcp_server": "https://mcp.example.net/?token=[API_KEY:github]",
    }


def test_a_secret_contributed_at_any_path_is_not_stored(serve: Serve) -> None:
    """Each kind at a sample of paths (every tool path among them), one trace each, in
    batches; every trace is stored (threshold 0) and none holds its secret."""
    base = _sample_trace()
    paths = plantable_paths(base)
    rng = random.Random(22)
    tool_paths = [p for p in paths if "tool" in p[1]]
    planted: dict[str, tuple[str, str, Any]] = {}
    traces: list[dict[str, Any]] = []
    for kind, value, text in secrets_of_every_kind(seed=7):
        for how, path in tool_paths + rng.sample(paths, 8):
            if how == "number" and kind != "card":
                continue
            trace = plant(base, how, path, text, value)
            trace["id"] = f"kp:trace:p{len(traces)}"
            planted[trace["id"]] = (kind, value, (how, path))
            traces.append(trace)
    assert len(traces) == 230
    with serve(threshold=0.0, max_batch=256) as service:
        client = service.client("alice")
        for start in range(0, len(traces), 200):
            answer = client.post("/v1/traces/batch", json=traces[start : start + 200])
            assert answer.status_code == 200, answer.text
            assert {r["status"] for r in answer.json()["results"]} == {"accepted"}
        rows = {row.id: row for row in service.kb.iter_stored()}
        assert sorted(rows) == sorted(planted)
        for trace_id, (kind, value, where) in planted.items():
            assert leaked(json.dumps(rows[trace_id].trace), [(kind, value)]) == [], where
        for trace_id in list(planted)[::25]:  # a sample read back through the API
            kind, value, where = planted[trace_id]
            shown = client.get(f"/v1/traces/{trace_id}").text
            assert leaked(shown, [(kind, value)]) == [], where
