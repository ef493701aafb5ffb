"""Hostile clients, issue 22 item 6 and the id rule of item 7: a key learns nothing about the
traces it may not see, neither from an id it contributes nor from a score. A real server on
loopback, the hashing embedder; each oracle is compared with a base where the hidden trace
does not exist, and the answers must be the same."""

from __future__ import annotations

import json
from typing import Any

import pytest

from .conftest import Serve, embedder, trace

SECRET_WORDS = "gamma delta epsilon zeta"


def _answer(response: Any) -> tuple[int, Any]:
    return response.status_code, response.json()


def test_contributing_an_id_a_hidden_trace_holds_answers_as_if_it_were_free(
    serve: Serve, tmp_path: Any
) -> None:
    mine = trace("kp:trace:secret", "network", words="carol own words here")
    with serve(tmp_path / "empty.sqlite") as empty:
        expected = _answer(empty.client("carol").post("/v1/traces", json=mine))
    with serve(tmp_path / "held.sqlite") as service:
        alice, carol, bob = (service.client(n) for n in ("alice", "carol", "bob"))
        hidden = alice.post("/v1/traces", json=trace("kp:trace:secret", "private"))
        assert hidden.status_code == 201
        # Not a 409: the same answer as on a base where nobody holds the id.
        assert _answer(carol.post("/v1/traces", json=mine)) == expected
        assert expected[0] == 201 and expected[1]["status"] == "accepted"
        # Each key reads its own trace under the id; neither learns of the other.
        theirs = carol.get("/v1/traces/kp:trace:secret").json()["trace"]
        assert theirs["task"]["objective"] == "Task carol own words here"
        assert theirs["id"] == "kp:trace:secret"
        own = alice.get("/v1/traces/kp:trace:secret").json()["trace"]
        assert own["task"]["objective"] == mine["task"]["objective"].replace(
            "carol own words here", " ".join(f"secretw{k}" for k in range(6))
        )
        # Posting it again is idempotent, as for any id.
        again = carol.post("/v1/traces", json=mine)
        assert (again.status_code, again.json()["status"]) == (200, "already_stored")
        # Listings, searches and filters name the id as contributed; the row carol's trace
        # is stored under (namespaced by her key) shows nowhere, not even to a filter on it.
        carol_key_id = service.keys["carol"].split("_")[1]
        listing = carol.get("/v1/traces").json()
        assert [item["id"] for item in listing["items"]] == ["kp:trace:secret"]
        assert carol.get("/v1/traces", params={"q": carol_key_id}).json()["total"] == 0
        assert carol.get("/v1/traces", params={"q": "/"}).json()["total"] == 0
        assert carol.get("/v1/traces", params={"q": "secret"}).json()["total"] == 1
        hits = carol.post("/v1/search", json={"text": "carol own words", "k": 5}).json()["hits"]
        assert [hit["id"] for hit in hits] == ["kp:trace:secret"]
        assert carol_key_id not in json.dumps(carol.get("/v1/traces/kp:trace:secret").json())
        # bob (another org than carol, alice's org but not alice) reads carol's network trace.
        seen_by_bob = bob.get("/v1/traces/kp:trace:secret")
        assert seen_by_bob.status_code == 200
        assert seen_by_bob.json()["trace"]["task"]["objective"] == "Task carol own words here"
        # The admin sees both traces, both under the id as contributed.
        admin = service.client("admin").get("/v1/traces").json()
        assert [item["id"] for item in admin["items"]] == ["kp:trace:secret"] * 2


def test_scores_are_computed_against_the_traces_the_key_may_see(
    serve: Serve, tmp_path: Any
) -> None:
    probe = trace("kp:trace:probe", words=SECRET_WORDS)
    with serve(tmp_path / "empty.sqlite") as empty:
        expected = _answer(empty.client("reader").post("/v1/score", json=probe))
    assert expected[1]["records"][0]["novelty_source"] == "empty_cache"
    with serve(tmp_path / "held.sqlite") as service:
        alice = service.client("alice")
        posted = alice.post("/v1/traces", json=trace("kp:trace:p", "private", words=SECRET_WORDS))
        assert posted.status_code == 201
        # A read key of alice's org, but not alice: scoring a copy of her private trace tells it
        # nothing (before: nearest similarity 1.0).
        assert _answer(service.client("reader").post("/v1/score", json=probe)) == expected
        # The owner and the admin see it: for them it is a copy.
        for who in ("alice", "admin"):
            (record,) = service.client(who).post("/v1/score", json=probe).json()["records"]
            assert record["nearest"]["similarity"] == pytest.approx(1.0, abs=1e-6), who
            assert record["novelty"] == pytest.approx(0.0, abs=1e-6), who


def test_the_contribution_gate_decides_on_what_the_key_may_see(serve: Serve, tmp_path: Any) -> None:
    copy = trace("kp:trace:copy", "network", words=SECRET_WORDS)
    with serve(tmp_path / "empty.sqlite") as empty:
        expected = _answer(empty.client("carol").post("/v1/traces", json=copy))
    assert expected[0] == 201
    with serve(tmp_path / "held.sqlite") as service:
        alice, carol = service.client("alice"), service.client("carol")
        alice.post("/v1/traces", json=trace("kp:trace:p", "private", words=SECRET_WORDS))
        # Before: rejected, "near-duplicate of a stored trace (cos 1.00)".
        assert _answer(carol.post("/v1/traces", json=copy)) == expected
        # Among what a key may see, a copy is still a near-duplicate.
        again = alice.post("/v1/traces", json=trace("kp:trace:p2", "private", words=SECRET_WORDS))
        body = again.json()
        assert (again.status_code, body["status"]) == (200, "rejected")
        assert body["nearest"]["id"] in {"kp:trace:p", "kp:trace:copy"}
        assert body["nearest"]["similarity"] == pytest.approx(1.0, abs=1e-6)


def test_near_duplicates_within_one_batch_are_still_caught(serve: Serve) -> None:
    with serve() as service:
        alice, carol = service.client("alice"), service.client("carol")
        alice.post("/v1/traces", json=trace("kp:trace:p", "private", words=SECRET_WORDS))
        batch = [
            trace("kp:trace:b1", "org", words=SECRET_WORDS),
            trace("kp:trace:b2", "org", words=SECRET_WORDS),
        ]
        results = carol.post("/v1/traces/batch", json=batch).json()["results"]
        assert [r["status"] for r in results] == ["accepted", "rejected"]
        assert results[1]["nearest"]["id"] == "kp:trace:b1"


def test_an_id_holding_a_slash_is_refused_at_contribute(serve: Serve) -> None:
    with serve() as service:
        client = service.client("alice")
        one = client.post("/v1/traces", json=trace("kp:trace:a/b"))
        assert one.status_code == 422
        assert one.json()["problems"] == [
            {"path": "id", "message": "a trace id may not hold '/' (got 'kp:trace:a/b')"}
        ]
        batch = client.post("/v1/traces/batch", json=[trace("kp:trace:ok"), trace("kp:trace:x/y")])
        assert batch.status_code == 422
        assert [p["path"] for p in batch.json()["problems"]] == ["[1].id"]
        assert len(service.kb) == 0
        # Scoring stores nothing and reads nothing back: any id is taken there.
        assert client.post("/v1/score", json=trace("kp:trace:a/b")).status_code == 200


def test_an_id_with_a_line_break_is_refused_like_one_with_a_slash(serve: Serve) -> None:
    """Issue 37: one id rule on every write path (``id_problem``): an id that could forge a
    line in a log or a recalled example's provenance is refused, here as over MCP."""
    from knowledgepulse.service._engine import Engine, UnstorableId

    with serve() as service:
        client = service.client("alice")
        for trace_id in ("kp:trace:a\nb", "kp:trace:a\u2028b", "kp:trace:a\u202eb"):
            answer = client.post("/v1/traces", json=trace(trace_id))
            assert answer.status_code == 422
            assert answer.json()["problems"] == [
                {
                    "path": "id",
                    "message": "a trace id may not hold a line break or control character "
                    f"(got {trace_id!r})",
                }
            ]
        assert len(service.kb) == 0
        # The engine itself, under every route, keeps the rule too.
        from knowledgepulse import parse_trace

        engine = Engine(service.kb, embedder(), 0.5)
        key = service.kb.verify_api_key(service.keys["alice"])
        with pytest.raises(UnstorableId, match=r"may not hold '/'"):
            engine.contribute([parse_trace(trace("kp:trace:a/b"))], key, "test")
        assert len(service.kb) == 0


def test_stats_say_how_many_traces_the_key_may_not_see_and_who_it_is(serve: Serve) -> None:
    """Issue 37 item 4: a read key saw 6 of 230 traces with no word of the others."""
    with serve() as service:
        alice = service.client("alice")
        for trace_id, visibility in (("kp:trace:s1", "private"), ("kp:trace:s2", "org")):
            assert alice.post("/v1/traces", json=trace(trace_id, visibility)).status_code == 201
        assert alice.post("/v1/traces", json=trace("kp:trace:s3")).status_code == 201
        carol = service.client("carol").get("/v1/stats").json()  # globex: network only
        assert (carol["traces"], carol["hidden"]) == (1, 2)
        assert carol["key"] == {"name": "carol", "scope": "contribute", "team": "globex"}
        reader = service.client("reader").get("/v1/stats").json()  # acme: org and network
        assert (reader["traces"], reader["hidden"]) == (2, 1)
        assert reader["key"] == {"name": "reader", "scope": "read", "team": "acme"}
        admin = service.client("admin").get("/v1/stats").json()
        assert (admin["traces"], admin["hidden"], admin["key"]["team"]) == (3, 0, None)
