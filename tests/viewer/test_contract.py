"""Every answer of ``kp view`` is one of the service's models: each JSON body it sends, on every
route and every error, validates against the schema ``kp serve``'s OpenAPI document gives for
that route and status (``jsonschema``, draft 2020-12, as OpenAPI 3.1 uses).

``kp view`` runs as a process on loopback, as a user starts it, twice: serving the service's
own application over its files (the ``serve`` extra installed), and as where that extra is
absent (the standard library's fallback server); both answer every request here alike. The
OpenAPI document is the service application's own (``create_app(...).openapi()``). Where the service has no such route
(``/v1/groups``, an unknown path, a refused method) the answer is held to the component the
service documents for it (``GroupList``; ``ErrorBody`` for every error).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from _helpers import HashingEmbedder
from knowledgepulse.embedding import check_embedder
from knowledgepulse.kb import EmbeddingIdentity, open_knowledge_base

from ._running import SERVERS, Running, kp_view
from .conftest import ALPHA, ALPHA_AGAIN, BETA, DELTA, EPSILON, make_view_files

pytest.importorskip("fastapi")
jsonschema = pytest.importorskip("jsonschema")

KEY = "contract-test-key"
GET, POST = "get", "post"


@pytest.fixture(scope="module")
def openapi(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from knowledgepulse.service import create_app

    embedder = check_embedder(HashingEmbedder())
    location = tmp_path_factory.mktemp("openapi") / "kb.sqlite"
    kb = open_knowledge_base(location, EmbeddingIdentity.of(embedder))
    try:
        document: dict[str, Any] = create_app(kb, embedder).openapi()
    finally:
        kb.close()
    return document


def schema_for(openapi: dict[str, Any], method: str, route: str | None, status: int) -> Any:
    """The schema the service documents for ``route``'s answer with ``status``: the route's
    own, else (a route or status it does not have) ``GroupList`` or ``ErrorBody``."""
    operation = openapi["paths"].get(route, {}).get(method, {}) if route else {}
    answer = operation.get("responses", {}).get(str(status))
    if answer is not None and "content" in answer:
        return answer["content"]["application/json"]["schema"]
    name = "ErrorBody" if status >= 400 else "GroupList"
    return {"$ref": f"#/components/schemas/{name}"}


def disagreements(openapi: dict[str, Any], schema: Any, body: Any) -> list[str]:
    """Each way ``body`` is not what ``schema`` says, as ``path: message``."""
    whole = {**openapi, "$schema": "https://json-schema.org/draft/2020-12/schema", **schema}
    ref = schema.get("$ref", "")
    if ref.startswith("#/components/schemas/") and ref.rsplit("/", 1)[1] not in openapi.get(
        "components", {}
    ).get("schemas", {}):
        return [f"the service documents no {ref.rsplit('/', 1)[1]}"]
    validator = jsonschema.Draft202012Validator(whole)
    return [
        f"{'.'.join(map(str, error.absolute_path)) or '(body)'}: {error.message}"
        for error in sorted(validator.iter_errors(body), key=lambda e: list(e.absolute_path))
    ]


def ask(
    running: Running,
    method: str,
    path: str,
    *,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    request = urllib.request.Request(running.url + path.lstrip("/"), data=body)
    request.method = method.upper()
    for name, value in {"Authorization": f"Bearer {KEY}", **(headers or {})}.items():
        request.add_header(name, value)
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def search(text: str, k: int = 10) -> bytes:
    return json.dumps({"text": text, "k": k}).encode()


#: (method, path, body, headers, route in the service's document, expected status)
ANSWERS: list[tuple[str, str, bytes | None, dict[str, str], str | None, int]] = [
    (GET, "/v1/traces", None, {}, "/v1/traces", 200),
    (GET, "/v1/traces?sort=-added_at&limit=2&offset=1", None, {}, "/v1/traces", 200),
    (GET, "/v1/traces?domain=finance&q=cash", None, {}, "/v1/traces", 200),
    (GET, "/v1/traces?offset=99", None, {}, "/v1/traces", 200),
    (GET, "/v1/traces?sort=score", None, {}, "/v1/traces", 422),
    (GET, "/v1/traces?limit=0", None, {}, "/v1/traces", 422),
    (GET, "/v1/traces?value_min=nan", None, {}, "/v1/traces", 422),
    *[
        (GET, f"/v1/traces/{quote(trace_id)}", None, {}, "/v1/traces/{trace_id}", 200)
        for trace_id in (ALPHA, ALPHA_AGAIN, BETA, DELTA, EPSILON)
    ],
    (GET, "/v1/traces/kp%3Atrace%3Anone", None, {}, "/v1/traces/{trace_id}", 404),
    (POST, "/v1/search", search("review sql", 3), {}, "/v1/search", 200),
    (POST, "/v1/search", search("nothing-like-it"), {}, "/v1/search", 200),
    (POST, "/v1/search", search("   "), {}, "/v1/search", 422),
    (POST, "/v1/search", search("review", 0), {}, "/v1/search", 422),
    (POST, "/v1/search", b"{not json", {}, "/v1/search", 422),
    (GET, "/v1/stats", None, {}, "/v1/stats", 200),
    (GET, "/v1/groups", None, {}, None, 200),
    (GET, "/v1/nothing", None, {}, None, 404),
    # Read-only: every write is a 405 with an ErrorBody, never a 5xx.
    (POST, "/v1/traces", b"{}", {}, None, 405),
    (POST, "/v1/traces/batch", b"[]", {}, None, 405),
    (POST, "/v1/score", b"{}", {}, None, 405),
    (GET, "/v1/stats", None, {"Authorization": "Bearer wrong"}, "/v1/stats", 401),
    (GET, "/v1/stats", None, {"Host": "evil.example"}, "/v1/stats", 403),
    (GET, "/no-such-page.html", None, {}, None, 404),
]


@pytest.fixture(scope="module", params=SERVERS)
def views(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Running]]:
    """``kp view`` over every kind of file, and over score lines alone (traces without
    their steps), both needing the key (``--api-key-file``); on the service's application,
    then on the stdlib fallback."""
    folder = tmp_path_factory.mktemp("view")
    files = make_view_files(folder)
    key_file = folder / "key"
    key_file.write_text(KEY + "\n", encoding="utf-8")
    option = ("--api-key-file", str(key_file))
    server = request.param
    with (
        kp_view(files.all, *option, server=server) as everything,
        kp_view([str(files.scores)], *option, server=server) as scores_only,
    ):
        yield {"everything": everything, "scores only": scores_only}


def test_every_answer_is_the_services_model(
    openapi: dict[str, Any], views: dict[str, Running]
) -> None:
    found: list[str] = []
    answered = 0
    for view, running in views.items():
        for method, path, body, headers, route, expected in ANSWERS:
            status, answer = ask(running, method, path, body=body, headers=headers)
            assert status == expected, (view, method, path, answer)
            answered += 1
            schema = schema_for(openapi, method, route, status)
            problems = disagreements(openapi, schema, answer)
            if status >= 400 and "problems" not in answer:
                # The schema lets it out (it has a default); the service always sends it.
                problems.append("(body): no 'problems' list, as every service error has")
            found += [f"{view}: {method.upper()} {path} {status}: {p}" for p in problems]
    assert answered == 2 * len(ANSWERS)
    assert not found, f"{len(found)} disagreements:\n" + "\n".join(found)


def test_the_checker_finds_a_disagreement(openapi: dict[str, Any]) -> None:
    """The check itself can fail: a stats answer in the viewer's old shape is refused."""
    schema = schema_for(openapi, GET, "/v1/stats", 200)
    old = {"traces": 1, "domains": {"general": 1}, "search": "text"}
    assert disagreements(openapi, schema, old) != []


def test_the_page_reads_the_models_fields() -> None:
    """The page's script names the fields the models answer with, not the viewer's old ones."""
    script = Path(__file__).resolve().parents[2] / "src" / "knowledgepulse" / "viewer"
    text = (script / "static" / "viewer.js").read_text(encoding="utf-8")
    assert "by_domain" in text and ".domains" not in text


#: GET /v1/compare: (path, status with the traces' steps read, status over score lines alone,
#: where no trace has its steps: answered as an id that is not there).
COMPARE: list[tuple[str, int, int]] = [
    (f"/v1/compare?a={quote(ALPHA)}&b={quote(BETA)}", 200, 404),
    (f"/v1/compare?a={quote(ALPHA)}&b={quote(ALPHA_AGAIN)}&rubric=none", 200, 404),
    (f"/v1/compare?a={quote(ALPHA)}&b=kp%3Atrace%3Anone", 404, 404),
    (f"/v1/compare?a={quote(ALPHA)}", 422, 422),
    (f"/v1/compare?a={quote(ALPHA)}&b={quote(BETA)}&rubric=x.py:R", 422, 422),
]


def test_every_compare_answer_is_the_services_model(
    openapi: dict[str, Any], views: dict[str, Running]
) -> None:
    found: list[str] = []
    for path, with_steps, scores_only in COMPARE:
        for view, expected in (("everything", with_steps), ("scores only", scores_only)):
            status, answer = ask(views[view], GET, path)
            assert status == expected, (view, path, answer)
            schema = schema_for(openapi, GET, "/v1/compare", status)
            found += [
                f"{view}: {path} {status}: {p}" for p in disagreements(openapi, schema, answer)
            ]
    assert not found, "\n".join(found)


def test_each_run_is_the_server_it_names(views: dict[str, Running], request: Any) -> None:
    """The fallback run really is the stdlib server (it names itself), the other uvicorn
    serving the service's application (no Server header, /healthz answers)."""
    server = request.node.callspec.params["views"]
    for running in views.values():
        head = urllib.request.Request(running.url, method="HEAD")
        with urllib.request.urlopen(head) as answer:
            names = answer.headers.get("Server") or ""
        assert names.startswith("kp-view") == (server == "stdlib"), names
        status, _ = ask(running, GET, "/healthz")
        assert status == (200 if server == "app" else 404)
