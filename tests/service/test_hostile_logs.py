"""A key sent by mistake in a query string is not written to the access log (issue 37,
finding 10): the real server on loopback, its ``uvicorn.access`` lines caught as written."""

from __future__ import annotations

import logging
from pathlib import Path

import httpx

from knowledgepulse.service import ServiceSettings, create_app, server_in_thread
from knowledgepulse.service._logs import redact_request_target

from .conftest import add_keys, embedder, open_base


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_query_string_secrets_are_not_logged(tmp_path: Path) -> None:
    kb = open_base(tmp_path / "kb.sqlite")
    keys = add_keys(kb)
    secret = keys["alice"]
    app = create_app(kb, embedder(), settings=ServiceSettings(rate_per_s=0), threshold=0.5)
    caught = Lines()
    access = logging.getLogger("uvicorn.access")
    try:
        with server_in_thread(app, log_level="info") as url:
            access.addHandler(caught)
            headers = {"Authorization": f"Bearer {secret}"}
            httpx.get(f"{url}/v1/stats?api_key={secret}&q=refund", headers=headers, timeout=10)
            httpx.get(f"{url}/v1/traces?access_token=abc123&limit=5", timeout=10)
            httpx.get(f"{url}/v1/traces?q={secret}", timeout=10)
            httpx.get(f"{url}/v1/traces/{secret}", timeout=10)
    finally:
        access.removeHandler(caught)
        kb.close()
    requests = [line.split('"')[1] for line in caught.lines]
    assert requests == [
        "GET /v1/stats?api_key=[REDACTED]&q=refund HTTP/1.1",
        "GET /v1/traces?access_token=[REDACTED]&limit=5 HTTP/1.1",
        "GET /v1/traces?q=[REDACTED] HTTP/1.1",
        "GET /v1/traces/[REDACTED] HTTP/1.1",
    ]
    assert not any(secret in line for line in caught.lines)


def test_redaction_keeps_the_rest_of_the_target() -> None:
    assert redact_request_target("/v1/traces?limit=5&sort=-value") == (
        "/v1/traces?limit=5&sort=-value"
    )
    assert redact_request_target("/mcp?Token=x;password=y&key=") == (
        "/mcp?Token=[REDACTED];password=[REDACTED]&key="
    )
