"""The service over each backend (SQLite, PostgreSQL): contributions, visibility, a restart.

Here rather than in ``tests/service`` so that it shares this folder's PostgreSQL server
(``kb_location``); the service's other tests run on SQLite.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from service.conftest import Serve, serving, trace


@pytest.fixture(name="serve")
def serve_fixture(tmp_path: Path) -> Iterator[Serve]:
    yield from serving(tmp_path)


def test_each_backend_serves_contributions_visibility_and_restarts(
    serve: Serve, kb_location: str
) -> None:
    with serve(kb_location) as service:
        keys = service.keys
        alice, carol = service.client("alice"), service.client("carol")
        assert alice.post("/v1/traces", json=trace("kp:trace:p", "private")).status_code == 201
        assert alice.post("/v1/traces", json=trace("kp:trace:n")).status_code == 201
        assert alice.post("/v1/traces", json=trace("kp:trace:n")).status_code == 200
        assert carol.get("/v1/traces/kp:trace:p").status_code == 404
        assert [i["id"] for i in carol.get("/v1/traces").json()["items"]] == ["kp:trace:n"]
        found = carol.post("/v1/search", json={"trace": trace("kp:trace:q", words="x")})
        assert [hit["id"] for hit in found.json()["hits"]] == ["kp:trace:n"]
    with serve(kb_location, keys=keys) as again:
        listing = again.client("alice").get("/v1/traces", params={"sort": "-value", "q": "TRACE:P"})
        assert [i["id"] for i in listing.json()["items"]] == ["kp:trace:p"]


def test_each_backend_answers_a_key_from_the_traces_it_may_see(
    serve: Serve, kb_location: str
) -> None:
    """Issue 22 item 6 on both backends: the hidden nearest is looked past inside the base's
    write lock, and a hidden id is namespaced."""
    words = "gamma delta epsilon zeta"
    with serve(kb_location) as service:
        alice, carol = service.client("alice"), service.client("carol")
        hidden = trace("kp:trace:p", "private", words=words)
        assert alice.post("/v1/traces", json=hidden).status_code == 201
        (scored,) = carol.post("/v1/score", json=trace("kp:trace:s", words=words)).json()["records"]
        assert (scored["nearest"], scored["novelty_source"]) == (None, "empty_cache")
        copy = carol.post("/v1/traces", json=trace("kp:trace:c", "org", words=words))
        assert (copy.status_code, copy.json()["nearest"]) == (201, None)
        same_id = carol.post("/v1/traces", json=trace("kp:trace:p", "org", words="own words"))
        assert (same_id.status_code, same_id.json()["id"]) == (201, "kp:trace:p")
        mine = carol.get("/v1/traces/kp:trace:p").json()["trace"]
        assert mine["task"]["objective"] == "Task own words"
        listed = carol.get("/v1/traces", params={"q": "trace:p", "sort": "added_at"}).json()
        assert [item["id"] for item in listed["items"]] == ["kp:trace:p"]
        assert alice.get("/v1/traces/kp:trace:p").json()["trace"]["task"]["objective"] == (
            f"Task {words}"
        )
        assert len(service.kb) == 3
