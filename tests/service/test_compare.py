"""GET /v1/compare: two stored traces compared, under the read rules of GET /v1/traces/{id}."""

from __future__ import annotations

from knowledgepulse.compare import TraceComparison

from .conftest import Serve, trace


def test_compare_answers_the_typed_result(serve: Serve) -> None:
    with serve() as service, service.client("alice") as alice, service.client("carol") as carol:
        assert alice.post("/v1/traces", json=trace("kp:trace:one")).status_code == 201
        assert alice.post("/v1/traces", json=trace("kp:trace:two")).status_code == 201
        answer = carol.get("/v1/compare", params={"a": "kp:trace:one", "b": "kp:trace:two"})
        assert answer.status_code == 200, answer.text
        comparison = TraceComparison.model_validate(answer.json())
        assert (comparison.a.id, comparison.b.id, comparison.rubric) == (
            "kp:trace:one",
            "kp:trace:two",
            "agent",
        )
        assert comparison.parting_call is not None
        assert (comparison.parting_call.step_a, comparison.parting_call.relation) == (
            1,
            "arguments_differ",
        )
        assert [change.tool for change in comparison.argument_changes] == ["search"]
        plain = carol.get(
            "/v1/compare", params={"a": "kp:trace:one", "b": "kp:trace:two", "rubric": "none"}
        )
        assert plain.json()["rubric"] is None and plain.json()["flipped"] == []
        same = carol.get("/v1/compare", params={"a": "kp:trace:one", "b": "kp:trace:one"})
        assert same.json()["identical"] is True


def test_an_unreadable_trace_gets_the_answer_of_a_missing_one(serve: Serve) -> None:
    with serve() as service, service.client("alice") as alice, service.client("carol") as carol:
        alice.post("/v1/traces", json=trace("kp:trace:one"))
        alice.post("/v1/traces", json=trace("kp:trace:secret", "private"))
        # alice reads her own private trace; carol (another org) may not.
        ok = alice.get("/v1/compare", params={"a": "kp:trace:one", "b": "kp:trace:secret"})
        assert ok.status_code == 200
        hidden = carol.get("/v1/compare", params={"a": "kp:trace:one", "b": "kp:trace:secret"})
        missing = carol.get("/v1/compare", params={"a": "kp:trace:one", "b": "kp:trace:nope"})
        assert hidden.status_code == missing.status_code == 404
        assert hidden.text.replace("kp:trace:secret", "ID") == missing.text.replace(
            "kp:trace:nope", "ID"
        )
        assert set(hidden.headers) == set(missing.headers)
        first = carol.get("/v1/compare", params={"a": "kp:trace:nope", "b": "kp:trace:secret"})
        assert "kp:trace:nope" in first.text and "secret" not in first.text


def test_bad_parameters_and_no_key(serve: Serve) -> None:
    with serve() as service, service.client("carol") as carol, service.client() as nobody:
        assert carol.get("/v1/compare", params={"a": "kp:trace:one"}).status_code == 422
        bad = carol.get("/v1/compare", params={"a": "x", "b": "y", "rubric": "rubrics.py:R"})
        assert bad.status_code == 422
        assert nobody.get("/v1/compare", params={"a": "x", "b": "y"}).status_code == 401
