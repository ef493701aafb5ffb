"""The service end to end: a real server on loopback, httpx clients, the hashing embedder."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from _helpers import make_trace
from knowledgepulse.kb._recall import NO_WORDS

from .conftest import Serve, trace

DATA = Path(__file__).parent.parent / "data" / "importers"


def test_every_endpoint_but_healthz_needs_a_key_of_the_right_scope(serve: Serve) -> None:
    with serve() as service:
        anonymous, reader = service.client(), service.client("reader")
        health = anonymous.get("/healthz")
        assert health.status_code == 200
        assert health.json()["embedder"] == {"name": "HashingEmbedder", "dimensions": 384}
        assert health.json()["knowledge_base"] == {
            "backend": "sqlite",
            "model": "HashingEmbedder",
            "threshold": 0.5,
        }
        assert health.json()["status"] == "ok"
        for method, path in [
            ("GET", "/v1/traces"),
            ("GET", "/v1/traces/kp:trace:1"),
            ("GET", "/v1/stats"),
            ("POST", "/v1/score"),
            ("POST", "/v1/traces"),
            ("POST", "/v1/search"),
        ]:
            answer = anonymous.request(method, path)
            assert answer.status_code == 401, path
            assert answer.headers["www-authenticate"] == 'Bearer realm="knowledgepulse"'
        forged = anonymous.get("/v1/stats", headers={"Authorization": "Bearer kp_abc_forged"})
        assert forged.status_code == 401
        assert forged.json()["detail"] == "this API key is not valid (unknown or revoked)"
        refused = reader.post("/v1/traces", json=trace("kp:trace:1"))
        assert refused.status_code == 403
        assert refused.json()["detail"] == "this key's scope is read; this needs contribute"
        assert reader.get("/v1/traces/kp:trace:nothing").status_code == 404
        assert reader.get("/v1/stats").status_code == 200


def test_a_revoked_key_is_refused(serve: Serve) -> None:
    with serve(key_cache_s=0) as service:
        client = service.client("alice")
        assert client.get("/v1/stats").status_code == 200
        service.kb.revoke_api_key("alice")
        assert client.get("/v1/stats").status_code == 401


def test_contributing_is_idempotent_by_trace_id(serve: Serve) -> None:
    with serve() as service:
        client = service.client("alice")
        first = client.post("/v1/traces", json=trace("kp:trace:1"))
        assert first.status_code == 201
        assert first.json()["status"] == "accepted"
        assert first.json()["record"]["stored"] == "added"
        again = client.post("/v1/traces", json=trace("kp:trace:1"))
        assert again.status_code == 200
        assert again.json()["status"] == "already_stored"
        assert again.json()["value"] == first.json()["value"]
        assert again.json()["record"]["stored"] == "already_stored"
        assert len(service.kb) == 1


def test_concurrent_posts_of_one_id_accept_it_once(serve: Serve) -> None:
    with serve() as service:
        clients = [service.client("alice") for _ in range(8)]
        with ThreadPoolExecutor(8) as pool:
            answers = list(
                pool.map(lambda c: c.post("/v1/traces", json=trace("kp:trace:same")), clients)
            )
        assert sorted(a.status_code for a in answers) == [200] * 7 + [201]
        assert {a.json()["status"] for a in answers if a.status_code == 200} == {"already_stored"}
        assert len(service.kb) == 1


def test_a_stored_record_that_does_not_read_is_answered_without_its_score(serve: Serve) -> None:
    """A row whose score record was written by an older version or edited by hand: the
    listing, the detail and a second contribution answer for the trace without a score
    (never a 500), and the row's bytes are left as they are."""
    with serve() as service:
        client = service.client("alice")
        assert client.post("/v1/traces", json=trace("kp:trace:old")).status_code == 201
        edited = json.dumps({"id": "kp:trace:old", "score": 2})  # no such score; fields missing
        service.kb._write_rows([("UPDATE traces SET record = ?", [edited])])
        listed = client.get("/v1/traces")
        assert listed.status_code == 200
        item = listed.json()["items"][0]
        assert (item["id"], item["value"], item["domain"], item["nearest"]) == (
            "kp:trace:old",
            None,
            None,
            None,
        )
        detail = client.get("/v1/traces/kp:trace:old")
        assert detail.status_code == 200 and detail.json()["record"] is None
        again = client.post("/v1/traces", json=trace("kp:trace:old"))
        assert again.status_code == 200
        assert again.json() == {
            "id": "kp:trace:old",
            "status": "already_stored",
            "accepted": True,
            "value": None,
            "threshold": 0.5,
            "explanation": "this id was stored before, without a score record the service can read",
            "nearest": None,
            "record": None,
            "added_at": None,
        }
        assert service.kb._select("SELECT record FROM traces") == [(edited,)]


def test_a_near_duplicate_is_rejected_with_the_reason_and_the_nearest_trace(serve: Serve) -> None:
    with serve() as service:
        client = service.client("alice")
        assert (
            client.post("/v1/traces", json=trace("kp:trace:1", words="alpha beta")).status_code
            == 201
        )
        copy = client.post("/v1/traces", json=trace("kp:trace:2", words="alpha beta"))
        assert copy.status_code == 200
        body = copy.json()
        assert (body["status"], body["accepted"], body["threshold"]) == ("rejected", False, 0.5)
        assert body["nearest"] == {"id": "kp:trace:1", "similarity": pytest.approx(1.0)}
        # Named as every surface names a copy (the same words: an exact copy).
        assert "an exact copy of kp:trace:1" in body["explanation"]
        assert body["record"]["copy_of"] == {
            "id": "kp:trace:1",
            "similarity": 1.0,
            "relation": "exact",
        }
        assert body["value"] == pytest.approx(0.49375)
        assert client.get("/v1/traces/kp:trace:2").status_code == 404


def test_visibility_private_org_network_across_three_keys(serve: Serve) -> None:
    with serve() as service:
        alice, bob, carol = (service.client(n) for n in ("alice", "bob", "carol"))
        for visibility in ("private", "org", "network"):
            posted = alice.post("/v1/traces", json=trace(f"kp:trace:{visibility}", visibility))
            assert posted.status_code == 201, posted.text
        expected = {
            alice: ["kp:trace:private", "kp:trace:org", "kp:trace:network"],
            bob: ["kp:trace:org", "kp:trace:network"],
            carol: ["kp:trace:network"],
        }
        for client, ids in expected.items():
            listing = client.get("/v1/traces", params={"sort": "added_at"}).json()
            assert [item["id"] for item in listing["items"]] == ids
            assert listing["total"] == len(ids)
            assert client.get("/v1/stats").json()["traces"] == len(ids)
            hits = client.post("/v1/search", json={"text": "task", "k": 10}).json()["hits"]
            assert sorted(hit["id"] for hit in hits) == sorted(ids)
        missing = carol.get("/v1/traces/kp:trace:nothing")
        hidden = carol.get("/v1/traces/kp:trace:private")
        assert (hidden.status_code, hidden.json()) == (
            404,
            {"detail": "no trace kp:trace:private", "problems": []},
        )
        assert missing.status_code == 404 and missing.json()["problems"] == []
        assert bob.get("/v1/traces/kp:trace:private").status_code == 404
        assert bob.get("/v1/traces/kp:trace:org").status_code == 200
        detail = alice.get("/v1/traces/kp:trace:private").json()
        assert detail["trace"]["id"] == "kp:trace:private"
        assert detail["source"] == "POST /v1/traces"
        admin = service.client("admin").get("/v1/traces").json()
        assert admin["total"] == 3


def test_a_key_never_learns_the_id_of_a_trace_it_may_not_see(serve: Serve) -> None:
    with serve() as service:
        alice, carol = service.client("alice"), service.client("carol")
        words = "gamma delta epsilon zeta eta theta"
        assert alice.post("/v1/traces", json=trace("kp:trace:secret", "private", words=words))
        # alice's network trace, near her private one: its record names it to alice only.
        near = trace("kp:trace:open", "network", words=words + " iota kappa lambda mu nu xi")
        posted = alice.post("/v1/traces", json=near).json()
        assert (posted["status"], posted["nearest"]["id"]) == ("accepted", "kp:trace:secret")
        seen = carol.get("/v1/traces/kp:trace:open").json()
        assert seen["record"]["nearest"] == {
            "id": None,
            "similarity": pytest.approx(0.7338, abs=1e-3),
        }
        assert "kp:trace:secret" not in json.dumps(seen)
        assert "near-duplicate" not in seen["record"]["explanation"]
        listed = carol.get("/v1/traces").json()["items"]
        assert [(item["id"], item["nearest"]) for item in listed] == [("kp:trace:open", None)]
        assert "kp:trace:secret" not in json.dumps(
            alice.get("/v1/traces/kp:trace:secret").json()["near_duplicates"]
        )


def test_scoring_stores_nothing_and_takes_a_batch_and_import_formats(serve: Serve) -> None:
    with serve() as service:
        client = service.client("reader")
        one = client.post("/v1/score", json=trace("kp:trace:1"))
        assert one.status_code == 200
        (record,) = one.json()["records"]
        assert (record["id"], record["schema"], record["novelty_source"]) == (
            "kp:trace:1",
            "knowledgepulse.score/1",
            "empty_cache",
        )
        batch = client.post("/v1/score", json=[trace("kp:trace:1"), trace("kp:trace:2")])
        assert [r["id"] for r in batch.json()["records"]] == ["kp:trace:1", "kp:trace:2"]
        openai = json.loads((DATA / "openai_chat.json").read_text())
        imported = client.post("/v1/score", params={"from": "openai"}, json=openai)
        assert imported.status_code == 200, imported.text
        assert len(imported.json()["records"]) >= 1
        assert len(service.kb) == 0


def test_contributing_an_import_record(serve: Serve) -> None:
    with serve(threshold=0.3) as service:
        openai = json.loads((DATA / "openai_chat.json").read_text())
        client = service.client("alice")
        answer = client.post("/v1/traces/batch", params={"from": "openai"}, json=openai)
        assert answer.status_code == 200, answer.text
        results = answer.json()["results"]
        assert [(r["id"], r["status"]) for r in results] == [
            ("kp:trace:openai:chatcmpl-9xK2conv001", "accepted")
        ]
        detail = client.get("/v1/traces/kp:trace:openai:chatcmpl-9xK2conv001").json()
        assert detail["source"] == "POST /v1/traces?from=openai"


def test_malformed_bodies_answer_422_naming_the_field(serve: Serve) -> None:
    with serve() as service:
        client = service.client("alice")
        broken = client.post("/v1/traces", content=b'{"id": ')
        assert broken.status_code == 422
        assert broken.json()["detail"].startswith("malformed JSON: Expecting value")
        bad = make_trace(trace_id="kp:trace:1")
        bad["steps"][2]["type"] = "plan"
        wrong = client.post("/v1/traces", json=bad)
        assert wrong.status_code == 422
        assert wrong.json()["problems"][0]["path"] == "steps[2].type"
        in_batch = client.post("/v1/traces/batch", json=[trace("kp:trace:ok"), bad])
        assert in_batch.json()["problems"][0]["path"] == "[1].steps[2].type"
        search = client.post("/v1/search", json={"trace": bad})
        assert search.json()["problems"][0]["path"] == "trace.steps[2].type"
        assert (
            client.post("/v1/search", json={"k": 0, "text": "x"}).json()["problems"][0]["path"]
            == "k"
        )
        query = client.get("/v1/traces", params={"limit": "many"})
        assert (query.status_code, query.json()["problems"][0]["path"]) == (422, "query.limit")
        unknown = client.post("/v1/traces", params={"from": "fax"}, json={})
        assert unknown.json()["problems"][0]["path"] == "from"
        for body in (b"", b"[]", b"\xff\xfe", b"[" * 100_000):
            assert client.post("/v1/traces", content=body).status_code == 422, body[:5]


def test_limits_answer_413_while_reading_and_429_with_retry_after(serve: Serve) -> None:
    with serve(max_body_bytes=10_000, max_steps=5, max_batch=2, rate_per_s=1, burst=4) as service:
        client = service.client("alice")
        declared = client.post("/v1/score", content=b"x" * 20_000)
        assert declared.status_code == 413
        assert declared.json()["detail"] == "the request body is larger than 10,000 bytes"

        def chunks() -> object:  # no Content-Length: refused while it streams in
            for _ in range(100):
                yield b" " * 1000

        streamed = client.post("/v1/score", content=chunks())  # type: ignore[arg-type]
        assert streamed.status_code == 413
        long_trace = make_trace([{"type": "thought", "content": "x"}] * 6)
        assert client.post("/v1/score", json=long_trace).json() == {
            "detail": "steps: 6 steps; at most 5 are taken",
            "problems": [],
        }
        too_many = client.post("/v1/score", json=[trace("kp:trace:1")] * 3)
        assert too_many.status_code == 413
        limited = client.get("/v1/stats")
        assert limited.status_code == 429
        assert limited.headers["retry-after"] == "1"
        # Another key has a bucket of its own.
        assert service.client("bob").get("/v1/stats").status_code == 200


def test_a_restart_on_the_same_base_loses_nothing(serve: Serve, tmp_path: Path) -> None:
    location = tmp_path / "team.sqlite"
    with serve(location, threshold=0.6) as service:
        keys = service.keys
        client = service.client("alice")
        statuses = [
            client.post("/v1/traces", json=trace(f"kp:trace:{i}")).status_code for i in range(5)
        ]
        assert statuses == [201] * 5
        before = client.get("/v1/traces").json()
    with serve(location, keys=keys) as again:
        client = again.client("alice")
        assert client.get("/v1/traces").json() == before
        assert client.get("/v1/stats").json()["threshold"] == 0.6
        assert client.post("/v1/traces", json=trace("kp:trace:0")).status_code == 200


def test_shutdown_drains_the_requests_in_flight(serve: Serve) -> None:
    import threading
    import time

    from .conftest import embedder

    started = threading.Event()
    base = embedder()

    class Slow:
        name, dimensions = "slow", 384

        def embed(self, texts: list[str]) -> object:
            started.set()
            time.sleep(1.0)
            return base.embed(texts)

    answers = []
    with serve(embed=Slow()) as service:
        client = service.client("alice")
        worker = threading.Thread(
            target=lambda: answers.append(client.post("/v1/traces", json=trace("kp:trace:1")))
        )
        worker.start()
        assert started.wait(10)
    worker.join(10)
    assert [a.status_code for a in answers] == [201]
    assert len(service.kb) == 1


def test_a_request_past_the_timeout_answers_503(serve: Serve) -> None:
    import time

    from .conftest import embedder

    base = embedder()

    class Stuck:
        name, dimensions = "stuck", 384

        def embed(self, texts: list[str]) -> object:
            time.sleep(1.5)
            return base.embed(texts)

    with serve(embed=Stuck(), request_timeout_s=0.3) as service:
        answer = service.client("alice").post("/v1/score", json=trace("kp:trace:1"))
        assert answer.status_code == 503
        assert answer.json()["detail"] == "the request took longer than 0.3 s"
        assert answer.headers["retry-after"] == "1"


def test_a_lone_surrogate_in_a_string_answers_422_not_500(serve: Serve) -> None:
    with serve() as service:
        client = service.client("alice")
        data = trace("kp:trace:1")
        data["steps"][1]["input"] = {"q": "SURROGATE"}  # an input is any JSON: not validated
        body = json.dumps(data).replace("SURROGATE", "\\ud800")
        answer = client.post("/v1/traces", content=body.encode())
        assert answer.status_code == 422
        assert answer.json()["detail"] == (
            "malformed JSON: a string holds a lone UTF-16 surrogate (\\ud800 to \\udfff)"
        )
        assert len(service.kb) == 0


def test_a_log_a_reader_cannot_take_answers_422_not_500(
    serve: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A list where a Langfuse call id goes raised TypeError out of the importer: a 500. That
    # reader takes it now; whatever a reader still raises on a record is the client's 422.
    from knowledgepulse.importers import _registry

    def breaks(record: Any, options: Any) -> Any:
        raise TypeError("unhashable type: 'list'")

    monkeypatch.setitem(_registry.FORMATS, "langfuse", _registry.Importer("langfuse", "", breaks))
    langfuse = json.loads((DATA / "langfuse_trace.json").read_text())
    with serve() as service:
        client = service.client("alice")
        for path in ("/v1/score", "/v1/traces"):
            answer = client.post(path, params={"from": "langfuse"}, json=langfuse)
            assert answer.status_code == 422, answer.text
            assert answer.json()["detail"] == (
                "a value of an unexpected type or form (TypeError: unhashable type: 'list')"
            )
        assert len(service.kb) == 0


def test_contributions_are_redacted_before_they_are_scored_and_stored(
    serve: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys
    import types

    import knowledgepulse as kp

    def redact_trace(model: kp.ReasoningTrace) -> tuple[kp.ReasoningTrace, dict[str, int]]:
        data = model.to_dict()
        data["task"]["objective"] = data["task"]["objective"].replace("secret", "[REDACTED]")
        return kp.parse_trace(data), {"replaced": 1}

    module = types.ModuleType("knowledgepulse.redaction")
    module.redact_trace = redact_trace  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "knowledgepulse.redaction", module)
    with serve() as service:
        client = service.client("alice")
        assert client.get("/healthz").json()["redaction"] == "on"
        posted = client.post("/v1/traces", json=trace("kp:trace:1", words="the secret plan"))
        assert posted.status_code == 201
        stored = client.get("/v1/traces/kp:trace:1").json()["trace"]
        assert stored["task"]["objective"] == "Task the [REDACTED] plan"


def test_search_fuses_vectors_and_words_and_answers_stop_words_with_the_reason(
    serve: Serve,
) -> None:
    failed = trace("kp:trace:w2")
    failed["metadata"]["success"] = False
    with serve() as service:
        client = service.client("alice")
        for body in (trace("kp:trace:w1"), failed):
            assert client.post("/v1/traces", json=body).status_code == 201
        found = client.post("/v1/search", json={"text": "Task w2w0 w2w1", "k": 5})
        assert found.status_code == 200
        assert [
            (h["id"], h["found_by"], h["vector_rank"], h["text_rank"]) for h in found.json()["hits"]
        ] == [("kp:trace:w2", "both", 1, 1), ("kp:trace:w1", "both", 2, 2)]
        assert found.json()["reason"] is None
        preferred = client.post(
            "/v1/search", json={"text": "Task w2w0 w2w1", "k": 5, "prefer": "successful"}
        )
        assert [h["id"] for h in preferred.json()["hits"]] == ["kp:trace:w1", "kp:trace:w2"]
        by_trace = client.post("/v1/search", json={"trace": failed, "k": 1}).json()["hits"]
        # A trace is searched by its task text (what the base's task vectors are made of).
        assert [(h["id"], h["found_by"]) for h in by_trace] == [("kp:trace:w2", "both")]
        empty = client.post("/v1/search", json={"text": "?! the, of... and", "k": 5})
        assert (empty.status_code, empty.json()) == (
            200,
            {"hits": [], "reason": NO_WORDS},
        )
        long = client.post("/v1/search", json={"text": "w" * 8001})
        assert long.status_code == 422
        assert long.json()["problems"] == [
            {
                "path": "text",
                "message": "8,001 characters; at most 8,000 are taken (describe the task, "
                "not the whole context)",
            }
        ]
        wrong = client.post("/v1/search", json={"text": "x", "prefer": "newest"})
        assert wrong.json()["problems"][0]["path"] == "prefer"
