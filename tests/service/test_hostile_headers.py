"""Security headers on every answer, refused keys limited per address, work charged by its
size, and 429s that say the wait their Retry-After says (issue 22, items 3, 5 and 7)."""

from __future__ import annotations

import base64
import hashlib
import re

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from .conftest import Serve, trace


def _check_secured(answer: httpx.Response) -> None:
    where = f"{answer.request.method} {answer.request.url.path} ({answer.status_code})"
    policy = answer.headers.get("content-security-policy", "")
    assert "frame-ancestors 'none'" in policy, where
    assert "'unsafe-inline'" not in policy and "'unsafe-eval'" not in policy, where
    script = re.search(r"script-src ([^;]*)", policy)
    assert script is not None, where
    assert answer.headers.get("x-content-type-options") == "nosniff", where
    assert answer.headers.get("x-frame-options") == "DENY", where
    assert answer.headers.get("referrer-policy") == "no-referrer", where
    assert answer.headers.get("cache-control") == "no-store", where


def test_every_answer_carries_the_security_headers(serve: Serve) -> None:
    with serve() as service, service.client("alice") as client:
        stored = client.post("/v1/traces", json=trace("kp:trace:one"))
        answers = [
            stored,
            client.get("/v1/traces/kp:trace:one"),
            client.get("/v1/traces"),
            client.post("/v1/score", json=trace("kp:trace:two")),
            client.post("/v1/search", json={"text": "onew1", "k": 2}),
            client.get("/v1/stats"),
            client.get("/v1/traces/kp:trace:none"),
            client.post("/v1/traces", content=b"{"),
            client.get("/healthz"),
            client.get("/openapi.json"),
            client.get("/"),
            httpx.get(service.url + "/v1/traces/kp:trace:one"),
        ]
        viewer = answers[10].status_code  # 200 with the viewer installed, else 404
        expected = [201, 200, 200, 200, 200, 200, 404, 422, 200, 200, viewer, 401]
        assert [a.status_code for a in answers] == expected
        for answer in answers:
            _check_secured(answer)
        assert (
            "default-src 'none'; script-src 'self';"
            in answers[1].headers["content-security-policy"]
        )


def test_the_api_pages_allow_their_own_inline_script_alone(serve: Serve) -> None:
    with serve() as service, service.client() as client:
        for path in ("/docs", "/redoc"):
            page = client.get(path)
            assert page.status_code == 200
            _check_secured(page)
            policy = page.headers["content-security-policy"]
            inline = re.findall(r"<script>(.*?)</script>", page.text, re.DOTALL)
            for script in inline:
                digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
                assert f"'sha256-{digest}'" in policy
            assert policy.count("'sha256-") == len(inline)


def test_refused_keys_are_limited_per_address(serve: Serve) -> None:
    with serve(auth_failures_per_s=0.5, auth_failure_burst=5) as service:
        with httpx.Client(base_url=service.url) as anonymous:
            codes = [
                anonymous.get(
                    "/v1/stats", headers={"Authorization": f"Bearer kp_guess_{n}"}
                ).status_code
                for n in range(5)
            ]
            assert codes == [401] * 5
            refused = anonymous.get("/v1/stats", headers={"Authorization": "Bearer kp_x_y"})
        assert refused.status_code == 429
        assert refused.headers["retry-after"] == "2"
        assert refused.json()["detail"] == "too many refused keys from this address: retry in 2 s"
        # A scope too low counts too; and the address waits, whatever key it shows.
        with service.client("reader") as reader:
            assert reader.get("/v1/stats").status_code == 429


def test_403_answers_count_against_the_address(serve: Serve) -> None:
    with serve(auth_failures_per_s=0.5, auth_failure_burst=3) as service:
        with service.client("reader") as reader:
            codes = [
                reader.post("/v1/traces", json=trace(f"kp:trace:r{n}")).status_code
                for n in range(4)
            ]
        assert codes == [403, 403, 403, 429]


def test_a_429_says_the_wait_its_retry_after_says(serve: Serve) -> None:
    with serve(rate_per_s=0.4, burst=2) as service, service.client("alice") as client:
        assert [client.get("/v1/stats").status_code for _ in range(2)] == [200, 200]
        limited = client.get("/v1/stats")
        assert limited.status_code == 429
        assert limited.headers["retry-after"] == "3"  # 1 token at 0.4/s: 2.5 s, rounded up
        assert limited.json()["detail"] == "rate limit: retry in 3 s"


def test_a_batch_is_charged_by_its_traces(serve: Serve) -> None:
    with serve(rate_per_s=1, burst=10) as service, service.client("alice") as client:
        batch = [trace(f"kp:trace:b{n}") for n in range(30)]
        assert client.post("/v1/score", json=batch).status_code == 200
        # 10 tokens, 30 spent: 20 owed, and one more needed: 21 s at 1 per second.
        owed = client.get("/v1/stats")
        assert owed.status_code == 429
        assert owed.headers["retry-after"] == "21"
        with service.client("bob") as other:  # another key is not charged
            assert other.get("/v1/stats").status_code == 200
