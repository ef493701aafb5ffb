"""Never a 500 for bad input, nor a traceback for a client that goes away (issue 22, items 4
and 7): deep traces, a drain that runs out, a body cut off, a body far over the limit."""

from __future__ import annotations

import json
import signal
import socket
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from knowledgepulse._io import MAX_DEPTH

from ._hostile import child_server
from .conftest import Serve, trace


def _nested(levels: int) -> Any:
    value: Any = "bottom"
    for _ in range(levels):
        value = {"down": value}
    return value


def nesting_depth(value: Any) -> int:
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return 1 + max((nesting_depth(item) for item in value), default=0)
    return 0


def deep_trace(trace_id: str, depth: int) -> dict[str, Any]:
    """A valid trace nested exactly ``depth`` levels deep (the trace object is level 1)."""
    data = trace(trace_id)
    # trace (1) > steps (2) > step (3) > input (4) > "q": the nest (5 ...)
    data["steps"][1]["input"] = {"q": _nested(depth - 4)}
    assert nesting_depth(data) == depth
    return data


def test_a_trace_nested_256_levels_is_a_422_naming_the_depth(serve: Serve) -> None:
    with serve() as service, service.client("alice") as client:
        deep = deep_trace("kp:trace:deep", 256)
        for path in ("/v1/traces", "/v1/score"):
            answer = client.post(path, json=deep)
            assert answer.status_code == 422, answer.text
            assert answer.json() == {
                "detail": "the trace: nested 256 levels deep; at most 200 are taken",
                "problems": [
                    {"path": "", "message": "nested 256 levels deep; at most 200 are taken"}
                ],
            }
        search = client.post("/v1/search", json={"trace": deep, "k": 3})
        assert search.status_code == 422
        assert search.json()["problems"] == [
            {"path": "trace", "message": "nested 256 levels deep; at most 200 are taken"}
        ]
        assert client.get("/v1/stats").json()["traces"] == 0


def test_a_batch_names_the_deep_trace_alone(serve: Serve) -> None:
    with serve() as service, service.client("alice") as client:
        batch = [trace("kp:trace:fine-1"), deep_trace("kp:trace:deep", 256), trace("kp:trace:f2")]
        for path in ("/v1/traces/batch", "/v1/score"):
            answer = client.post(path, json=batch)
            assert answer.status_code == 422, answer.text
            assert answer.json()["problems"] == [
                {"path": "[1]", "message": "nested 256 levels deep; at most 200 are taken"}
            ]


def test_a_trace_at_the_depth_limit_is_stored_and_read_back(serve: Serve) -> None:
    with serve() as service, service.client("alice") as client:
        deepest = deep_trace("kp:trace:deepest", MAX_DEPTH)
        stored = client.post("/v1/traces", json=deepest)
        assert stored.status_code == 201, stored.text
        read = client.get("/v1/traces/kp:trace:deepest")
        assert read.status_code == 200, read.text
        assert read.json()["trace"]["steps"][1]["input"] == deepest["steps"][1]["input"]
        one_more = client.post("/v1/traces", json=deep_trace("kp:trace:over", MAX_DEPTH + 1))
        assert one_more.status_code == 422


def test_a_10_mb_body_from_urllib_gets_its_413(serve: Serve) -> None:
    with serve() as service:
        body = b'{"pad": "' + b"x" * (10 * 1024 * 1024) + b'"}'
        for who in ("alice", None):  # an early 413, and an early 401
            headers = {"Content-Type": "application/json"}
            if who:
                headers["Authorization"] = f"Bearer {service.keys[who]}"
            request = urllib.request.Request(
                service.url + "/v1/traces", data=body, headers=headers, method="POST"
            )
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(request, timeout=30)
            expected = 413 if who else 401
            assert refused.value.code == expected
            detail = json.loads(refused.value.read())["detail"]
            if who:
                assert detail == "the request body is larger than 1,048,576 bytes"


def test_a_body_declared_over_the_discard_bound_is_refused_at_once(serve: Serve) -> None:
    with serve() as service, service.client("alice") as client:
        host, port = service.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(
                b"POST /v1/traces HTTP/1.1\r\nHost: kp\r\nContent-Type: application/json\r\n"
                + f"Authorization: Bearer {service.keys['alice']}\r\n".encode()
                + b"Content-Length: 1000000000\r\n\r\n{"
            )
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 413 ")
        assert b"connection: close" in answer.lower()
        assert client.get("/v1/stats").status_code == 200


def test_a_client_gone_mid_body_costs_one_log_line(tmp_path: Path) -> None:
    with child_server(tmp_path) as server:
        host, port = server.url.removeprefix("http://").split(":")
        for _ in range(3):
            with socket.create_connection((host, int(port)), timeout=10) as sock:
                sock.sendall(
                    b"POST /v1/traces HTTP/1.1\r\nHost: kp\r\nContent-Type: application/json\r\n"
                    + f"Authorization: Bearer {server.keys['alice']}\r\n".encode()
                    + b"Content-Length: 5000\r\n\r\n"
                    + b'{"id": "kp:trace:'
                )
                time.sleep(0.3)
        time.sleep(0.5)
        with server.client("alice") as client:
            assert client.get("/v1/stats").status_code == 200
    log = server.log.read_text()
    assert "Traceback" not in log
    lines = [line for line in log.splitlines() if "disconnected" in line]
    assert len(lines) == 3, log
    assert lines[0].endswith("disconnected while sending the body of POST /v1/traces")


def test_a_request_cut_off_by_the_drain_answers_503_with_retry_after(tmp_path: Path) -> None:
    with child_server(tmp_path, slow_embed_s=6.0, drain_s=1.0) as server:
        answers: list[httpx.Response] = []

        def post() -> None:
            with server.client("alice") as client:
                answers.append(client.post("/v1/score", json=trace("kp:trace:slow")))

        poster = threading.Thread(target=post)
        poster.start()
        time.sleep(1.0)  # the request is in flight, embedding
        server.process.send_signal(signal.SIGTERM)
        poster.join(timeout=30)
        assert server.process.wait(timeout=30) == 0
    (answer,) = answers
    assert answer.status_code == 503, answer.text
    assert answer.headers["retry-after"] == "5"
    assert answer.json()["detail"].startswith("the server is shutting down")
    log = server.log.read_text()
    assert "Traceback" not in log and "Exception in ASGI application" not in log
