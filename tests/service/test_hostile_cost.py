"""One key cannot starve the others (issue 22, item 3).

The server runs in its own process (its own interpreter lock): one key floods it with
parallel 256-trace ``/v1/score`` batches while another key reads; and a batch whose request
timed out stops its work.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from ._hostile import child_server
from .conftest import trace


def _p99(latencies: list[float]) -> float:
    ordered = sorted(latencies)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


@pytest.mark.slow
def test_a_flood_of_batches_from_one_key_leaves_reads_and_healthz_fast(tmp_path: Path) -> None:
    with child_server(tmp_path) as server:
        body = json.dumps([trace(f"kp:trace:flood-{n}") for n in range(256)]).encode()
        stop = threading.Event()
        flood_codes: list[int] = []

        def flood() -> None:
            with server.client("alice", timeout=60) as client:
                while not stop.is_set():
                    answer = client.post(
                        "/v1/score", content=body, headers={"Content-Type": "application/json"}
                    )
                    flood_codes.append(answer.status_code)

        flooders = [threading.Thread(target=flood, daemon=True) for _ in range(12)]
        for flooder in flooders:
            flooder.start()
        time.sleep(3.0)  # the flood is under way: every worker of alice's share is busy
        latencies: dict[str, list[float]] = {"/v1/stats": [], "/healthz": []}
        try:
            with server.client("bob", timeout=30) as client:
                until = time.monotonic() + 15.0
                while time.monotonic() < until:
                    for path, seen in latencies.items():
                        started = time.monotonic()
                        assert client.get(path).status_code == 200
                        seen.append(time.monotonic() - started)
        finally:
            stop.set()
            for flooder in flooders:
                flooder.join(timeout=60)
        assert flood_codes and set(flood_codes) == {200}, set(flood_codes)
        figures = {path: (len(seen), _p99(seen)) for path, seen in latencies.items()}
        print(f"under {len(flood_codes)} flood batches: (requests, p99 s) {figures}")
        for path, (count, p99) in figures.items():
            assert count >= 50, figures
            assert p99 < 0.5, f"{path}: p99 {p99:.3f} s; {figures}"


def test_a_timed_out_batch_stops_its_work(tmp_path: Path) -> None:
    # Each part of 32 traces takes 0.5 s to embed: 8 parts, 4 s; the timeout is 1 s.
    with child_server(tmp_path, slow_embed_s=0.5, request_timeout_s=1.0) as server:
        batch = [trace(f"kp:trace:t{n}") for n in range(256)]
        with server.client("alice") as client:
            answer = client.post("/v1/traces/batch", json=batch)
            assert answer.status_code == 503
            assert answer.headers["retry-after"] == "1"
            time.sleep(5.0)  # the whole batch would be stored by now, had it run on
            stored = client.get("/v1/stats").json()["traces"]
        # Stored: the parts finished before the timeout, and the one under way then.
        assert 0 < stored <= 96, stored
        # Posting again completes it: contributions are idempotent.
        with httpx.Client(base_url=server.url, timeout=60) as client:
            again = client.post(
                "/v1/traces/batch",
                json=batch[:32],
                headers={"Authorization": f"Bearer {server.keys['alice']}"},
            )
        assert again.status_code == 200
        assert {r["status"] for r in again.json()["results"]} == {"already_stored"}
