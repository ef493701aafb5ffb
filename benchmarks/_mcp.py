"""The MCP server's figures: how well recall finds a same-task attempt, and search latency.

- Retrieval quality on the tau-bench conversations (50 tasks x 4 attempts): each
  conversation's objective (its first user message) is the query, as an agent would ask
  ``search_traces`` before acting; the other 199 conversations are the base. How often is an
  attempt at the same task the first hit, and among the first five?
- Latency: ``search_traces`` calls through ``kp mcp`` over stdio, timed at the client (the
  official ``mcp`` client), on a base of the tau-bench conversations plus synthetic traces
  (clustered unit vectors, as the knowledge-base figures use) up to ``size`` traces.

    python -m benchmarks._mcp [path/to/gpt-4o-airline.json] [--traces N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from . import _corpus
from ._figures import Figure, report

#: Traces in the latency base (20,000 keeps the whole group near a minute on 2 cores).
DEFAULT_SIZE = {False: 20_000, True: 5_000}
CALLS = {False: 100, True: 30}
_FILLER = {
    "task": {"objective": "Synthetic filler trace"},
    "metadata": {"task_domain": "bench", "success": True},
    "steps": [{"step_id": 0, "type": "thought", "content": "filler"}],
    "outcome": {"result_summary": "filler", "confidence": 0.5},
}


def tau_bench(path: Path) -> tuple[list[Any], dict[str, int]]:
    """The conversations as ReasoningTraces, and each one's task number."""
    from knowledgepulse.importers import convert

    records = _corpus.load_tau_bench(path)
    traces, tasks = [], {}
    for record in records:
        for trace in convert("openai", record):
            traces.append(trace)
            tasks[trace.id] = int(record["task_id"])
    return traces, tasks


def bench_mcp(quick: bool, tau_path: Path | None = None, size: int | None = None) -> None:
    from knowledgepulse.embedding import choose_embedder

    path = tau_path or _corpus.TAU_BENCH
    embedder = choose_embedder("auto").embedder
    if embedder is None or not path.is_file():
        report(Figure("MCP figures", None, "", note="embedder or tau-bench corpus not installed"))
        return
    try:
        import mcp  # noqa: F401
    except ImportError:
        report(Figure("MCP figures", None, "", note="the mcp extra is not installed"))
        return
    size = size or DEFAULT_SIZE[quick]
    traces, tasks = tau_bench(path)
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder) / "kb.sqlite"
        start = time.perf_counter()
        _retrieval(base, embedder, traces, tasks)
        _fill(base, embedder, size - len(traces))
        built = time.perf_counter()
        _latency(base, [t.task.objective for t in traces], CALLS[quick], size)
        print(
            f"  (MCP group: base built and searched in {built - start:.0f} s, "
            f"latency measured in {time.perf_counter() - built:.0f} s)",
            flush=True,
        )


def _retrieval(base: Path, embedder: Any, traces: list[Any], tasks: dict[str, int]) -> None:
    from knowledgepulse import Scorer
    from knowledgepulse._recall import search_similar
    from knowledgepulse.kb import EmbeddingIdentity, open_knowledge_base

    with open_knowledge_base(base, EmbeddingIdentity.of(embedder)) as kb:
        Scorer(embedder, memory=kb, remember="all").score_many(traces)
        top1 = top5 = 0
        for trace in traces:
            hits = search_similar(kb, embedder, trace.task.objective, k=6, success_only=False)
            others = [hit.id for hit in hits if hit.id != trace.id][:5]
            same = [tasks[other] == tasks[trace.id] for other in others]
            top1 += bool(same and same[0])
            top5 += any(same)
    note = f"{len(traces)} conversations, query = objective, {embedder.name}"
    for name, count in (("top 1", top1), ("top 5", top5)):
        report(
            Figure(
                f"MCP recall: same-task attempt in {name} (tau-bench)",
                count / len(traces) * 100,
                "%",
                None,
                lower_is_better=False,
                note=note,
            )
        )


def _fill(base: Path, embedder: Any, count: int) -> None:
    from knowledgepulse.kb import EmbeddingIdentity, StoredTrace, open_knowledge_base

    from ._kb import clustered_vectors

    if count <= 0:
        return
    vectors = clustered_vectors(count, seed=3)
    with open_knowledge_base(base, EmbeddingIdentity.of(embedder)) as kb:
        for start in range(0, count, 5000):
            kb.add_many(
                [
                    StoredTrace(id=f"kp:trace:filler:{start + i}", trace=_FILLER, vector=row)
                    for i, row in enumerate(vectors[start : start + 5000])
                ]
            )


def _latency(base: Path, queries: list[str], calls: int, size: int) -> None:
    import anyio

    async def measure() -> list[float]:
        from mcp import ClientSession, StdioServerParameters, stdio_client

        env = {key: value for key, value in os.environ.items() if key != "KNOWLEDGEPULSE_EMBEDDER"}
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "knowledgepulse", "mcp", "--kb", str(base)],
            env=env,
        )
        with open(os.devnull, "w") as quiet:
            async with (
                stdio_client(params, errlog=quiet) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                for query in queries[:5]:  # warm-up: the model loads on the first call
                    await session.call_tool("search_traces", {"query": query})
                seconds = []
                for number in range(calls):
                    query = queries[number % len(queries)]
                    start = time.perf_counter()
                    result = await session.call_tool("search_traces", {"query": query})
                    seconds.append(time.perf_counter() - start)
                    assert not result.is_error, result.content
                return seconds

    seconds = anyio.run(measure)
    ms = np.asarray(seconds) * 1e3
    note = f"{size:,} traces, {calls} calls of search_traces (limit 5), kp mcp over stdio"
    report(Figure("MCP search_traces p50 (stdio)", float(np.percentile(ms, 50)), "ms", None,
                  note=note))  # fmt: skip
    report(Figure("MCP search_traces p99 (stdio)", float(np.percentile(ms, 99)), "ms", None,
                  note=f"mean {statistics.mean(seconds) * 1e3:.1f} ms"))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks._mcp", description=__doc__)
    parser.add_argument("path", nargs="?", type=Path, help="tau-bench gpt-4o-airline.json")
    parser.add_argument(
        "--traces", type=int, help=f"latency base size (default {DEFAULT_SIZE[False]:,})"
    )
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    bench_mcp(args.quick, args.path, args.traces)


if __name__ == "__main__":
    main()
