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


def task_trace(trace_id: str, objective: str) -> dict[str, object]:
    """A trace of its own task: the worked example's steps and a call of the task's own words
    (without it, traces that differ only by a short objective are copies of one another: the
    same steps, reworded)."""
    from _helpers import make_trace

    trace = make_trace(trace_id=trace_id, objective=objective)
    steps: list[dict[str, object]] = trace["steps"]
    words = " ".join(f"{word}n{k}" for word in objective.split()[-2:] for k in range(30))
    steps.append(
        {
            "step_id": len(steps),
            "type": "tool_call",
            "tool": {"name": "note"},
            "input": {"task": objective},
            "content": f"{objective} {words}",
        }
    )
    return trace


def contribute(location: str, worker: int, shared: int, own: int = 0) -> list[str | None]:
    """Score copies of the same ``shared`` tasks and ``own`` tasks nobody else has; keep what
    is novel. Returns the ids this writer added."""
    import knowledgepulse as kp
    from _helpers import HashingEmbedder
    from knowledgepulse.kb import EmbeddingIdentity, open_knowledge_base

    identity = EmbeddingIdentity(model="hashing", dimensions=384, windowing="whole")
    batch = [task_trace(f"kp:trace:w{worker}-{i}", task(i)) for i in range(shared)] + [
        task_trace(
            f"kp:trace:own{worker}-{i}",
            f"own {worker} {i}: " + " ".join(f"o{worker}y{i}z{k}" for k in range(8)),
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
