"""The service under load: 16 clients contributing traces at once over loopback.

``kp serve``'s application runs in a process of its own (uvicorn, as in production); the
clients are threads of this one, each with its own key and connection, posting one trace per
request to ``POST /v1/traces``. A fifth of the traces (``duplicate_share``) come in
near-duplicate pairs (the same words, two of them swapped), the two of a pair sent by two different clients
at the same moment: the base's atomic query-then-store must accept at most one of them.

Reported: requests answered per second, p50/p99 latency, and three counts that must be 0 —
lost (a request without a 2xx answer, or an acceptance the base does not hold, or a trace
stored without being reported accepted), server errors (5xx), and near-duplicate pairs both
accepted.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

#: The gate: a near-duplicate scores about 0.45 (MiniLM) to 0.49 (hashing); a novel trace
#: 0.55 to 0.75 (MiniLM, as the base fills up) or about 0.78 (hashing).
THRESHOLD = 0.52


class HashingEmbedder:
    """Bag of words hashed into 384 buckets: instant and deterministic, so the figures measure
    the service, not the model."""

    name = "hashing"
    dimensions = 384

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                digest = hashlib.blake2b(word.encode(), digest_size=4).digest()
                out[row, int.from_bytes(digest, "big") % self.dimensions] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        unit: npt.NDArray[np.float32] = np.divide(
            out, norms, out=np.zeros_like(out), where=norms > 0
        )
        return unit


def _trace(trace_id: str, words: list[str]) -> dict[str, Any]:
    third = len(words) // 3
    return {
        "@context": "https://openknowledgepulse.org/schema/v1",
        "@type": "ReasoningTrace",
        "id": trace_id,
        "metadata": {
            "created_at": "2026-01-01T10:00:00Z",
            "task_domain": "default",
            "success": True,
            "visibility": "network",
            "privacy_level": "aggregated",
        },
        "task": {"objective": " ".join(words[:third])},
        "steps": [
            {"step_id": 0, "type": "thought", "content": " ".join(words[third : 2 * third])},
            {"step_id": 1, "type": "tool_call", "tool": {"name": "search"}, "input": {}},
            {"step_id": 2, "type": "observation", "content": " ".join(words[2 * third :])},
            {"step_id": 3, "type": "tool_call", "tool": {"name": "read"}, "input": {}},
            {"step_id": 4, "type": "observation", "content": "done"},
        ],
        "outcome": {"result_summary": "done", "confidence": 0.9},
    }


def workloads(
    n: int, clients: int, duplicate_share: float, seed: int = 7
) -> tuple[list[list[dict[str, Any]]], list[tuple[str, str]]]:
    """Each client's traces, in sending order, and the near-duplicate pairs (id, id).

    Traces are dealt in rounds, one to each client; in a pair round (every
    ``1 / duplicate_share``-th) clients 2j and 2j+1 get the two traces of a pair, so the two
    arrive at the same moment from two connections.
    """
    rng = np.random.default_rng(seed)
    vocabulary = vocabulary_words()
    every = max(1, round(1 / duplicate_share)) if duplicate_share > 0 else 0
    per_client: list[list[dict[str, Any]]] = [[] for _ in range(clients)]
    pairs: list[tuple[str, str]] = []
    made, round_number = 0, 0
    while made < n:
        pair_round = every and round_number % every == 0 and clients >= 2
        for client in range(0, clients, 2 if pair_round else 1):
            if made >= n:
                break
            words = [vocabulary[i] for i in rng.integers(0, len(vocabulary), 36)]
            if pair_round and client + 1 < clients and made + 2 <= n:
                # Two neighbouring words swapped: cosine >= 0.988 under MiniLM, 1 under the
                # hashing embedder (replacing a word can move MiniLM to 0.8: not a duplicate).
                twin = list(words)
                twin[17], twin[18] = twin[18], twin[17]
                first, second = f"kp:trace:pair{len(pairs)}a", f"kp:trace:pair{len(pairs)}b"
                per_client[client].append(_trace(first, words))
                per_client[client + 1].append(_trace(second, twin))
                pairs.append((first, second))
                made += 2
            else:
                per_client[client].append(_trace(f"kp:trace:own{made}", words))
                made += 1
        round_number += 1
    return per_client, pairs


def vocabulary_words() -> list[str]:
    """The 1,300 distinct words of the bundled example traces: bags of them read as text to
    MiniLM (pseudo-words would all look alike to it)."""
    from ._corpus import example_traces

    text = json.dumps(example_traces())
    return sorted({word.lower() for word in re.findall(r"[A-Za-z]{4,}", text)})


def serve_main(location: str, embedder: str, port: int) -> None:
    """The server process: ``python -m benchmarks._service serve LOCATION EMBEDDER PORT``."""
    from knowledgepulse.embedding import select_embedder
    from knowledgepulse.kb import EmbeddingIdentity, open_knowledge_base
    from knowledgepulse.service import ServiceSettings, create_app, run_server

    chosen: Any = HashingEmbedder() if embedder == "hashing" else select_embedder("auto")
    if chosen is None:
        raise SystemExit("the real embedder is not installed")
    kb = open_knowledge_base(location, EmbeddingIdentity.of(chosen))
    settings = ServiceSettings(rate_per_s=0, request_timeout_s=120)
    app = create_app(kb, chosen, settings=settings, threshold=THRESHOLD, close_kb=True)
    run_server(app, "127.0.0.1", port, log_level="warning")


@contextlib.contextmanager
def _server(location: str, embedder: str) -> Iterator[str]:
    import httpx

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    root = Path(__file__).resolve().parent.parent
    process = subprocess.Popen(
        [sys.executable, "-m", "benchmarks._service", "serve", location, embedder, str(port)],
        cwd=root,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the service did not start")
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()  # SIGTERM: uvicorn drains, then the base is closed
        process.wait(60)


def measure_service(
    n: int = 10_000,
    *,
    clients: int = 16,
    embedder: str = "hashing",
    postgres_url: str | None = None,
    duplicate_share: float = 0.2,
    time_limit_s: float = 600.0,
) -> dict[str, Any]:
    """Contribute ``n`` traces from ``clients`` concurrent clients; the figures and checks.

    Args:
        n: traces to contribute (one per request).
        clients: concurrent clients, each with its own key.
        embedder: ``hashing`` (instant; measures the service) or ``real`` (MiniLM).
        postgres_url: an empty PostgreSQL database to use instead of a new SQLite file.
        duplicate_share: the share of traces that are one of a near-duplicate pair.
        time_limit_s: clients stop sending after this long (``sent`` says how many went).
    """
    import httpx

    from knowledgepulse.kb import open_knowledge_base

    per_client, pairs = workloads(n, clients, duplicate_share)
    with tempfile.TemporaryDirectory(prefix="kp-service-") as folder:
        location = postgres_url or str(Path(folder) / "kb.sqlite")
        with open_knowledge_base(location) as kb:
            keys = [kb.create_api_key(f"client{i}", "contribute")[1] for i in range(clients)]
        latencies: list[float] = []
        outcomes: dict[str, str] = {}
        failures: list[str] = []
        lock = threading.Lock()
        deadline = time.monotonic() + time_limit_s

        def client(index: int) -> None:
            headers = {"Authorization": f"Bearer {keys[index]}"}
            with httpx.Client(headers=headers, timeout=180) as http:
                for trace in per_client[index]:
                    if time.monotonic() > deadline:
                        return
                    start = time.perf_counter()
                    try:
                        answer = http.post(f"{url}/v1/traces", json=trace)
                    except httpx.HTTPError as exc:
                        with lock:
                            failures.append(f"{trace['id']}: {type(exc).__name__}")
                        continue
                    elapsed = time.perf_counter() - start
                    with lock:
                        latencies.append(elapsed)
                        if answer.status_code in (200, 201):
                            outcomes[trace["id"]] = answer.json()["status"]
                        else:
                            failures.append(f"{trace['id']}: HTTP {answer.status_code}")

        with _server(location, embedder) as url:
            start = time.perf_counter()
            threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            wall = time.perf_counter() - start
        with open_knowledge_base(location) as kb:
            stored = {trace.id for trace in kb.iter_stored()}
    accepted = {trace_id for trace_id, status in outcomes.items() if status == "accepted"}
    ordered = sorted(latencies)
    return {
        "embedder": embedder,
        "backend": "postgresql" if postgres_url else "sqlite",
        "clients": clients,
        "sent": len(latencies) + len(failures),
        "answered": len(outcomes),
        "accepted": len(accepted),
        "stored": len(stored),
        "traces_per_s": len(latencies) / wall,
        "p50_ms": statistics.median(ordered) * 1e3 if ordered else None,
        "p99_ms": ordered[int(0.99 * (len(ordered) - 1))] * 1e3 if ordered else None,
        "lost": len(failures) + len(accepted - stored) + len(stored - accepted),
        "server_errors": sum(" HTTP 5" in failure for failure in failures),
        "duplicate_acceptances": sum(a in stored and b in stored for a, b in pairs),
        "pairs": len(pairs),
        "failures": failures[:10],
    }


def measure_service_postgres(
    n: int = 10_000, *, embedder: str = "hashing", admin_url: str | None = None, **options: Any
) -> dict[str, Any]:
    """:func:`measure_service` on PostgreSQL: a new database in the server at ``admin_url`` (a
    superuser URL), or in a throwaway server started with pgserver."""
    from ._kb_postgres import new_database, throwaway_server

    with contextlib.ExitStack() as stack:
        admin = admin_url or stack.enter_context(throwaway_server())
        url = new_database(admin, f"kp_bench_service_{int(time.time())}")
        return measure_service(n, embedder=embedder, postgres_url=url, **options)


if __name__ == "__main__":
    # python -m benchmarks._service [N] [hashing|real] [postgresql://admin-url|pgserver]
    if sys.argv[1:2] == ["serve"]:
        serve_main(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        count = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
        kind = sys.argv[2] if len(sys.argv) > 2 else "hashing"
        if len(sys.argv) > 3:
            admin = None if sys.argv[3] == "pgserver" else sys.argv[3]
            figures = measure_service_postgres(count, embedder=kind, admin_url=admin)
        else:
            figures = measure_service(count, embedder=kind)
        print(json.dumps(figures, indent=2))
