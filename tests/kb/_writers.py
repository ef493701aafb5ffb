"""Writer processes for the concurrency tests, started fresh (not forked).

Forking a pytest process that already runs threads (Ray's, a server's) can deadlock the
children, so each writer is a new interpreter running this file:
``python _writers.py LOCATION WORKER SHARED OWN`` prints the ids it added, as JSON.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def task(i: int) -> str:
    return f"task {i}: " + " ".join(f"w{i}x{k}" for k in range(8))


def contribute(location: str, worker: int, shared: int, own: int = 0) -> list[str | None]:
    """Score copies of the same ``shared`` tasks and ``own`` tasks nobody else has; keep what
    is novel. Returns the ids this writer added."""
    import knowledgepulse as kp
    from _helpers import HashingEmbedder, make_trace
    from knowledgepulse.kb import EmbeddingIdentity, open_knowledge_base

    identity = EmbeddingIdentity(model="hashing", dimensions=384, windowing="whole")
    batch = [
        make_trace(trace_id=f"kp:trace:w{worker}-{i}", objective=task(i)) for i in range(shared)
    ] + [
        make_trace(
            trace_id=f"kp:trace:own{worker}-{i}",
            objective=f"own {worker} {i}: " + " ".join(f"o{worker}y{i}z{k}" for k in range(8)),
        )
        for i in range(own)
    ]
    with open_knowledge_base(location, identity) as kb:
        scorer = kp.Scorer(
            embedder=HashingEmbedder(), memory=kb, remember="accepted", threshold=0.55, batch_size=4
        )
        return [s.trace_id for s in scorer.score_many(batch) if s.stored == "added"]


def run_writers(location: str, workers: int, shared: int, own: int = 0) -> list[list[str]]:
    """Start ``workers`` writer processes at once; each one's added ids."""
    processes = [
        subprocess.Popen(
            [sys.executable, __file__, location, str(w), str(shared), str(own)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(workers)
    ]
    added = []
    for process in processes:
        out, err = process.communicate(timeout=600)
        if process.returncode != 0:
            raise RuntimeError(f"writer failed: {err}")
        added.append(json.loads(out))
    return added


if __name__ == "__main__":
    sys.path.insert(0, str(TESTS))
    location, worker, shared, own = sys.argv[1], *map(int, sys.argv[2:5])
    print(json.dumps(contribute(location, worker, shared, own)))
