"""The OpenAPI document, fuzzed: schemathesis sends generated requests to a real server on
loopback; no answer is a 5xx and every answer matches its documented schema."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from schemathesis.checks import positive_data_acceptance  # noqa: E402

from knowledgepulse.service import ServiceSettings, create_app, server_in_thread  # noqa: E402

from .conftest import add_keys, embedder, open_base  # noqa: E402

_keys: dict[str, str] = {}


@pytest.fixture(scope="module")
def api_schema(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    kb = open_base(tmp_path_factory.mktemp("openapi") / "kb.sqlite")
    _keys.update(add_keys(kb))
    app = create_app(kb, embedder(), settings=ServiceSettings(rate_per_s=0))
    with server_in_thread(app) as url:
        yield schemathesis.openapi.from_url(f"{url}/openapi.json")
    kb.close()


def operations(api_schema: Any) -> list[Any]:
    return [result.ok() for result in api_schema.get_all_operations()]


def test_no_5xx_and_every_answer_matches_its_schema(api_schema: Any) -> None:
    # Hypothesis drives each operation directly: schemathesis' pytest plugin does not load
    # under pytest 9.
    headers = {"Authorization": f"Bearer {_keys['alice']}"}
    checked = []
    for operation in operations(api_schema):

        @given(case=operation.as_strategy())
        @settings(
            max_examples=25,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def call(case: Any) -> None:
            # A schema-valid body may still be refused (422) where JSON Schema cannot say
            # what the models check: ?from= makes the body a log of that format, and a
            # step_id of 3.0 is an "integer" to JSON Schema but not to the strict model.
            excluded = [positive_data_acceptance] if case.method == "POST" else []
            case.call_and_validate(headers=headers, excluded_checks=excluded)

        call()
        checked.append(operation.label)
    assert len(checked) == 9


def test_the_document_describes_the_bodies_with_the_library_models(api_schema: Any) -> None:
    document = api_schema.raw_schema
    components = document["components"]["schemas"]
    assert {"ReasoningTrace", "ScoreRecord", "Step", "Contribution", "ErrorBody"} <= set(components)
    body = document["paths"]["/v1/traces"]["post"]["requestBody"]["content"]["application/json"]
    assert body["schema"] == {"$ref": "#/components/schemas/ReasoningTrace"}
    assert set(document["paths"]["/v1/traces"]["post"]["responses"]) >= {
        "200",
        "201",
        "401",
        "409",
        "413",
        "422",
        "429",
    }
