"""What is particular to each transport: over HTTP the service's keys, Host checks and
sessions bound to a key; over stdio malformed frames and a client that goes away."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from knowledgepulse.mcp_server._http import transport_security
from knowledgepulse.service import ServiceSettings, create_app, server_in_thread
from service.conftest import add_keys, embedder, open_base

from .conftest import HERE

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture
def service(tmp_path: Path) -> Any:
    kb = open_base(tmp_path / "kb.sqlite")
    keys = add_keys(kb)
    settings = ServiceSettings(rate_per_s=0, allowed_hosts=("kb.example.org",))
    app = create_app(kb, embedder(), settings=settings, threshold=0.5)
    with server_in_thread(app) as url:
        yield url, keys
    kb.close()


def post(url: str, secret: str | None, body: Any, **headers: str) -> httpx.Response:
    auth = {} if secret is None else {"Authorization": f"Bearer {secret}"}
    return httpx.post(f"{url}/mcp", json=body, headers={**ACCEPT, **auth, **headers}, timeout=30)


def test_http_needs_a_valid_key_like_v1(service: Any) -> None:
    url, keys = service
    missing = post(url, None, INITIALIZE)
    assert missing.status_code == 401
    assert missing.json() == {
        "detail": "an API key is needed: Authorization: Bearer KEY",
        "problems": [],
    }
    assert missing.headers["www-authenticate"] == 'Bearer realm="knowledgepulse"'
    wrong = post(url, "kp_nope_nope", INITIALIZE)
    assert wrong.status_code == 401
    assert wrong.json()["detail"] == "this API key is not valid (unknown or revoked)"
    assert post(url, keys["reader"], INITIALIZE).status_code == 200


def test_http_host_allow_list(service: Any) -> None:
    url, keys = service
    port = url.rsplit(":", 1)[1]
    assert post(url, keys["alice"], INITIALIZE, Host=f"kb.example.org:{port}").status_code == 200
    assert post(url, keys["alice"], INITIALIZE, Host="kb.example.org").status_code == 200
    refused = post(url, keys["alice"], INITIALIZE, Host=f"evil.example:{port}")
    assert refused.status_code == 421
    origin = post(url, keys["alice"], INITIALIZE, Origin="http://evil.example")
    assert origin.status_code == 403


def test_http_session_belongs_to_the_key_that_opened_it(service: Any) -> None:
    url, keys = service
    opened = post(url, keys["alice"], INITIALIZE)
    session = opened.headers["mcp-session-id"]
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    other = post(url, keys["bob"], listing, **{"Mcp-Session-Id": session})
    assert other.status_code == 404


def test_transport_security_patterns() -> None:
    settings = transport_security(("kb.example.org", "10.0.0.5:8750"))
    assert settings.allowed_hosts == [
        "127.0.0.1:*", "127.0.0.1", "localhost:*", "localhost", "[::1]:*", "[::1]",
        "kb.example.org:*", "kb.example.org", "10.0.0.5:8750",
    ]  # fmt: skip
    assert "https://kb.example.org" in settings.allowed_origins
    assert "http://10.0.0.5:8750" in settings.allowed_origins


def _stdio(base: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    return subprocess.Popen(
        [sys.executable, str(HERE / "stdio_server.py"), str(base)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )


def test_stdio_survives_malformed_frames(tmp_path: Path) -> None:
    open_base(tmp_path / "kb.sqlite").close()
    server = _stdio(tmp_path / "kb.sqlite")
    assert server.stdin is not None and server.stdout is not None
    frames = [
        "this is not json",
        '{"jsonrpc": "2.0", "id": 5',
        "[1, 2, 3]",
        '{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": 7}}',
        json.dumps(INITIALIZE),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    ]
    server.stdin.write("\n".join(frames) + "\n")
    server.stdin.flush()
    answers = [json.loads(server.stdout.readline()) for _ in range(3)]
    assert answers[0]["id"] == 9 and answers[0]["error"]["code"] == -32602
    assert answers[1]["id"] == 1 and answers[1]["result"]["serverInfo"]["name"] == "knowledgepulse"
    assert answers[2]["id"] == 2 and len(answers[2]["result"]["tools"]) == 5
    server.stdin.close()
    assert server.wait(30) == 0
    server.stdout.close()
    assert server.stderr is not None and "Traceback" not in server.stderr.read()


def test_stdio_ends_cleanly_when_the_client_goes_away_mid_call(tmp_path: Path) -> None:
    open_base(tmp_path / "kb.sqlite").close()
    server = _stdio(tmp_path / "kb.sqlite")
    assert server.stdin is not None and server.stdout is not None
    call = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": "search_traces", "arguments": {"query": "refund a flight"}},
    }
    frames = [INITIALIZE, {"jsonrpc": "2.0", "method": "notifications/initialized"}, call]
    server.stdin.write("".join(json.dumps(frame) + "\n" for frame in frames))
    server.stdin.flush()
    assert json.loads(server.stdout.readline())["id"] == 1
    server.stdout.close()  # the client stops reading and leaves
    server.stdin.close()
    assert server.wait(30) == 0
    assert server.stderr is not None and "Traceback" not in server.stderr.read()


def test_http_body_over_the_service_limit_is_413(tmp_path: Path) -> None:
    kb = open_base(tmp_path / "kb.sqlite")
    keys = add_keys(kb)
    app = create_app(kb, embedder(), settings=ServiceSettings(rate_per_s=0, max_body_bytes=4096))
    try:
        with server_in_thread(app) as url:
            session = post(url, keys["alice"], INITIALIZE).headers["mcp-session-id"]
            call = {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "search_traces", "arguments": {"query": "x" * 5000}},
            }
            answer = post(url, keys["alice"], call, **{"Mcp-Session-Id": session})
            assert answer.status_code == 413
    finally:
        kb.close()


def test_a_contribution_is_a_create_memory_span(tmp_path: Path) -> None:
    otel = pytest.importorskip("opentelemetry.sdk.trace")
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from knowledgepulse import _genai_spans
    from knowledgepulse.mcp_server import LOCAL_KEY, TraceMemory
    from knowledgepulse.service._bodies import load_redactor
    from knowledgepulse.service._engine import Engine
    from service.conftest import trace

    exporter = InMemorySpanExporter()
    provider = otel.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    original = _genai_spans._tracer
    _genai_spans._tracer = lambda: provider.get_tracer("knowledgepulse")
    kb = open_base(tmp_path / "team.sqlite")
    try:
        memory = TraceMemory(Engine(kb, embedder(), 0.5), ServiceSettings(), load_redactor()[0])
        assert memory.contribute_trace(LOCAL_KEY, trace("kp:trace:s1"))["stored"] is True
    finally:
        _genai_spans._tracer = original
        kb.close()
    (span,) = exporter.get_finished_spans()
    assert span.name == "create_memory team.sqlite"
    assert dict(span.attributes or {}) == {
        "gen_ai.operation.name": "create_memory",
        "gen_ai.provider.name": "knowledgepulse",
        "gen_ai.memory.store.id": "team.sqlite",
        "gen_ai.memory.record.id": "kp:trace:s1",
        "gen_ai.memory.record.count": 1,
    }
