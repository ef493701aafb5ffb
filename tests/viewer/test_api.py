"""``kp view``'s HTTP API (the ``/v1`` contract), the page's files, the key and the Host check:
each test on the service's application over the files (``app``) and on the stdlib fallback
(``stdlib``); where their words differ (a parameter FastAPI checks), each is given."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest

from knowledgepulse.viewer import load_view_files

from ._running import SERVERS, Served, served
from .conftest import ALPHA, ALPHA_AGAIN, BETA, DELTA, EPSILON, XSS_OBJECTIVE, ViewFiles


@pytest.fixture(params=SERVERS)
def kind(request: pytest.FixtureRequest) -> str:
    """Which server: ``app`` (the service's application) or ``stdlib`` (the fallback)."""
    return str(request.param)


@pytest.fixture
def server(view_files: ViewFiles, kind: str) -> Iterator[Served]:
    with served(load_view_files(view_files.all), kind) as running:
        yield running


def call(
    server: Served,
    path: str,
    *,
    body: Any = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(server.url + path.lstrip("/"), data=data)
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def error(detail: str, *, named: bool = False) -> dict[str, Any]:
    """An ErrorBody as the service answers it; ``named``: its one problem names a field (the
    detail is ``"field: message"``)."""
    if not named:
        return {"detail": detail, "problems": []}
    path, message = detail.split(": ", 1)
    return {"detail": detail, "problems": [{"path": path, "message": message}]}


# How far an embedding-derived number may move between CPUs and maths libraries.
EMBEDDING_TOLERANCE = 1e-6


def ids(body: dict[str, Any]) -> list[str]:
    return [item["id"] for item in body["items"]]


def test_traces_sorted_by_value_by_default(server: Served) -> None:
    status, body = call(server, "/v1/traces")

    assert status == 200
    assert ids(body) == [BETA, ALPHA, ALPHA_AGAIN, EPSILON, DELTA]
    assert body["total"] == 5
    # Numbers derived from embeddings are held to a tolerance: the last float32 digits
    # depend on the CPU's maths library (AMD and Intel differed by 6e-8 here).
    assert body["items"][2] == {
        "id": ALPHA_AGAIN,
        "value": pytest.approx(0.49375, abs=EMBEDDING_TOLERANCE),
        "complexity": 0.425,
        # The same task (similarity 0.94 >= 0.9): a repeat, novelty 0 by the task novelty.
        "novelty": 0.0,
        "tool_diversity": 1.0,
        "outcome": 0.95,
        "domain": "code-review",
        "success": True,
        "nearest": {
            "id": ALPHA,
            "similarity": pytest.approx(0.9428091330173345, abs=EMBEDDING_TOLERANCE),
        },
        "added_at": None,
        "objective": "Review PR #42 for SQL injection in handler",
    }


@pytest.mark.parametrize(
    ("sort", "expected"),
    [
        ("value", [DELTA, EPSILON, ALPHA_AGAIN, ALPHA, BETA]),
        ("-novelty", [BETA, DELTA, EPSILON, ALPHA, ALPHA_AGAIN]),
        ("added_at", [ALPHA, BETA, ALPHA_AGAIN, DELTA, EPSILON]),
        ("-added_at", [EPSILON, DELTA, ALPHA_AGAIN, BETA, ALPHA]),
        ("domain", [ALPHA, ALPHA_AGAIN, BETA, EPSILON, DELTA]),
        ("-success", [ALPHA, ALPHA_AGAIN, BETA, DELTA, EPSILON]),
    ],
)
def test_traces_sorted_by_any_column(server: Served, sort: str, expected: list[str]) -> None:
    assert ids(call(server, f"/v1/traces?sort={sort}")[1]) == expected


def test_traces_without_a_score_sort_last_both_ways(view_files: ViewFiles, kind: str) -> None:
    data = load_view_files([str(view_files.scores), str(view_files.evals)])
    data.traces["kp:trace:zz-unscored"] = data.entry("kp:trace:zz-unscored")
    with served(data, kind) as running:
        up = ids(call(running, "/v1/traces?sort=value")[1])
        down = ids(call(running, "/v1/traces?sort=-value")[1])

    assert up[-1] == down[-1] == "kp:trace:zz-unscored"


def test_traces_filtered_by_domain_text_and_value_range(server: Served) -> None:
    assert ids(call(server, "/v1/traces?domain=finance")[1]) == [BETA, EPSILON]
    assert ids(call(server, "/v1/traces?q=sql+REVIEW")[1]) == [ALPHA, ALPHA_AGAIN]
    assert ids(call(server, "/v1/traces?q=pr")[1]) == [ALPHA, ALPHA_AGAIN]
    assert ids(call(server, "/v1/traces?value_min=0.2&value_max=0.6")[1]) == [
        ALPHA_AGAIN,
        EPSILON,
    ]
    assert ids(call(server, "/v1/traces?domain=finance&q=cash")[1]) == [EPSILON]


def test_traces_are_paged(server: Served) -> None:
    status, body = call(server, "/v1/traces?limit=2&offset=2")

    assert (status, ids(body), body["total"]) == (200, [ALPHA_AGAIN, EPSILON], 5)


SORTS = (
    "sort: expected one of value, complexity, novelty, tool_diversity, "
    "outcome, success, domain, id, added_at, with - for descending"
)


@pytest.mark.parametrize(
    ("query", "app", "stdlib"),
    [
        ("sort=score", SORTS, SORTS),
        (
            "limit=0",
            "query.limit: Input should be greater than or equal to 1",
            "limit: expected a whole number from 1 to 500, got 0",
        ),
        (
            "offset=x",
            "query.offset: Input should be a valid integer, unable to parse string as an integer",
            "offset: expected a whole number, got 'x'",
        ),
        (
            "value_min=nan",
            "query.value_min: Input should be a finite number",
            "value_min: expected a finite number, got 'nan'",
        ),
    ],
)
def test_bad_parameters_are_422_naming_the_parameter(
    server: Served, kind: str, query: str, app: str, stdlib: str
) -> None:
    detail = app if kind == "app" else stdlib
    assert call(server, f"/v1/traces?{query}") == (422, error(detail, named=True))


def test_one_trace_with_its_record_eval_and_near_duplicates(
    server: Served, view_files: ViewFiles
) -> None:
    status, body = call(server, "/v1/traces/" + quote(ALPHA, safe=""))

    assert status == 200
    assert body["trace"]["id"] == ALPHA
    assert [step["type"] for step in body["trace"]["steps"]] == [
        "thought",
        "tool_call",
        "observation",
        "tool_call",
        "observation",
    ]
    assert body["record"]["score"] == 0.66875
    assert body["eval"]["details"]["proposed_fix"] is False
    assert body["near_duplicates"] == [{"id": ALPHA_AGAIN, "similarity": 0.988024}]
    assert body["added_at"] is None
    assert body["source"] == f"{view_files.scores}:1"
    assert body["sources"] == {
        "score": f"{view_files.scores}:1",
        "trace": f"{view_files.traces}:1",
        "eval": f"{view_files.evals}:1",
    }


def test_an_unknown_trace_is_404(server: Served) -> None:
    assert call(server, "/v1/traces/kp%3Atrace%3Anone") == (
        404,
        error("no trace kp:trace:none"),
    )


def test_search_matches_words_of_ids_and_objectives(server: Served) -> None:
    status, body = call(server, "/v1/search", body={"text": "SQL injection TSMC", "k": 10})

    assert status == 200
    assert [(hit["id"], hit["similarity"]) for hit in body["hits"]] == [
        (ALPHA, 0.666667),
        (ALPHA_AGAIN, 0.666667),
        (BETA, 0.333333),
    ]
    assert body["hits"][2] == {
        "id": BETA,
        "similarity": 0.333333,
        "value": pytest.approx(0.7585, abs=EMBEDDING_TOLERANCE),
        "domain": "finance",
        "objective": "Analyze TSMC Q4 earnings report",
        # Found by the viewer's word match over files: neither the base's vector search nor
        # its full-text index ranked it.
        "found_by": None,
        "vector_rank": None,
        "text_rank": None,
    }
    assert call(server, "/v1/search", body={"text": "delta", "k": 1})[1]["hits"][0][
        "objective"
    ] == (XSS_OBJECTIVE)


def searched(detail: str, path: str, message: str) -> dict[str, Any]:
    return {"detail": detail, "problems": [{"path": path, "message": message}]}


NO_WORD = "expected at least one word to search for"
NOT_A_SEARCH = 'expected a JSON object {"text": "...", "k": 10}'


@pytest.mark.parametrize(
    ("body", "app", "stdlib"),
    [
        (
            {"k": 3},
            searched("give either text or trace", "", "give either text or trace"),
            searched(NOT_A_SEARCH, "", NOT_A_SEARCH),
        ),
        (
            {"text": "  "},
            searched(f"invalid search: text: {NO_WORD}", "text", NO_WORD),
            searched(f"text: {NO_WORD}", "text", NO_WORD),
        ),
        (
            {"text": "sql", "k": 0},
            searched(
                "invalid search: k: Input should be greater than or equal to 1",
                "k",
                "Input should be greater than or equal to 1",
            ),
            error("k: expected a whole number from 1 to 100", named=True),
        ),
    ],
)
def test_bad_searches_are_422(
    server: Served, kind: str, body: Any, app: dict[str, Any], stdlib: dict[str, Any]
) -> None:
    assert call(server, "/v1/search", body=body) == (422, app if kind == "app" else stdlib)


def test_stats_count_what_was_read(server: Served, view_files: ViewFiles) -> None:
    # The service's Stats: what only a knowledge base knows is null, what only kp view knows
    # fills the fields kp serve leaves out.
    status, body = call(server, "/v1/stats")
    lines = view_files.scores.read_text(encoding="utf-8").splitlines()
    values = [json.loads(line)["score"] for line in lines]  # in reading order, as summed
    assert (status, body) == (
        200,
        {
            "traces": 5,
            "by_domain": {"code-review": 2, "finance": 2, "legal": 1},
            "mean_value": sum(values) / 5,
            "last_added_at": None,
            "threshold": None,
            "model": None,
            "dimensions": None,
            "hidden": None,  # kp serve's: a key's unseen traces and the key (kp view has none)
            "key": None,
            "scored": 5,
            "with_steps": 5,
            "evaluated": 1,
            "groups": 1,
            "duplicates": 1,
            "files": view_files.all,
            "skipped": [],
            "warnings": [],
            "search": "text",
        },
    )


def test_groups(server: Served, view_files: ViewFiles) -> None:
    status, body = call(server, "/v1/groups")

    assert status == 200
    assert body["groups"] == [
        {
            "kept": ALPHA,
            "relation": None,  # grouped by whole-trace cosine (--by embedding)
            "duplicates": [
                {"id": ALPHA_AGAIN, "similarity": 0.988024, "value": 0.66875, "relation": None}
            ],
            "reason": "kept for the highest value (0.6687) of 2 near-duplicates (cosine ≥ 0.8); "
            "1 tie(s) on value broken by id",
            "source": f"{view_files.groups}:1",
        }
    ]


def test_the_page_is_served_with_a_same_origin_policy(server: Served, kind: str) -> None:
    for path, content_type in [
        ("", "text/html"),
        ("index.html", "text/html"),
        ("viewer.js", "text/javascript"),
        ("viewer.css", "text/css"),
    ]:
        with urllib.request.urlopen(server.url + path) as response:
            assert response.headers["Content-Type"].startswith(content_type), path
            assert "connect-src 'self'" in response.headers["Content-Security-Policy"]
            assert len(response.read()) > 500
    if kind == "app":
        assert call(server, "/secret.txt") == (404, error("Not Found"))
        assert call(server, "/v1/nothing") == (404, error("Not Found"))
    else:
        assert call(server, "/secret.txt") == (404, error("no such page: /secret.txt"))
        assert call(server, "/v1/nothing") == (404, error("no such endpoint: /v1/nothing"))


def test_an_api_key_is_required_when_set(view_files: ViewFiles, kind: str) -> None:
    with served(load_view_files(view_files.all), kind, api_key="s3cret") as running:
        refused = call(running, "/v1/stats")
        wrong = call(running, "/v1/stats", headers={"Authorization": "Bearer nope"})
        allowed = call(running, "/v1/stats", headers={"Authorization": "Bearer s3cret"})
        with urllib.request.urlopen(running.url) as page:
            page_status = page.status

    assert refused == (401, error("an API key is needed: Authorization: Bearer KEY"))
    if kind == "app":  # the service's words for a key it does not know
        assert wrong == (401, error("this API key is not valid (unknown or revoked)"))
    else:
        assert wrong == refused
    assert allowed[0] == 200
    assert page_status == 200  # the page itself is public: it asks for the key


def test_a_foreign_host_name_is_refused_on_loopback(server: Served) -> None:
    assert call(server, "/v1/stats", headers={"Host": "evil.example:8751"}) == (
        403,
        error("this server answers localhost only"),
    )
    assert call(server, "/v1/stats", headers={"Host": "localhost:8751"})[0] == 200


READ_ONLY = (
    "this server reads files and stores nothing (kp view): score and contribute with kp serve"
)


def test_writes_on_the_files_are_405_before_the_key(view_files: ViewFiles) -> None:
    """The service's application over files stores nothing: every write is a 405 with an
    ErrorBody (never a 5xx), answered before the key is asked for; Allow names the reads."""
    answers = {}
    with served(load_view_files(view_files.all), "app", api_key="s3cret") as running:
        for path in ("/v1/traces", "/v1/traces/batch", "/v1/score"):
            request = urllib.request.Request(running.url + path.lstrip("/"), data=b"[]")
            try:
                urllib.request.urlopen(request)
            except urllib.error.HTTPError as error:
                answers[path] = (error.code, error.headers["Allow"], json.load(error))

    refused = {"detail": READ_ONLY, "problems": []}
    assert answers == {
        "/v1/traces": (405, "GET, HEAD", refused),
        "/v1/traces/batch": (405, "", refused),
        "/v1/score": (405, "", refused),
    }


def test_healthz_says_files_and_nothing_of_them(view_files: ViewFiles) -> None:
    with served(load_view_files(view_files.all), "app", api_key="s3cret") as running:
        status, body = call(running, "/healthz")

    assert status == 200
    assert {k: body[k] for k in ("status", "knowledge_base", "embedder", "redaction")} == {
        "status": "ok",
        "knowledge_base": {"backend": "files", "model": None, "threshold": None},
        "embedder": {"name": None, "dimensions": None},
        "redaction": "off: nothing is stored",
    }


def test_a_search_body_nested_past_the_parser_is_422(server: Served) -> None:
    # kp view's own server let the parser's RecursionError escape: no answer at all.
    data = b'{"text": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    request = urllib.request.Request(server.url + "v1/search", data=data)
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request)
    assert caught.value.code == 422
    assert "nested" in json.load(caught.value)["detail"]
