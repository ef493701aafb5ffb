"""knowledgepulse benchmarks: every figure with its target and the ratio to it.

    python -m benchmarks            # everything (a few minutes)
    python -m benchmarks --quick    # small sizes, for a smoke run
    python -m benchmarks --json out.json
    python -m benchmarks ann --sizes 200000,1000000    # only the named sections
    python -m benchmarks curation-scale --curation-sizes 10000,100000
    python -m benchmarks copies --copies-sizes 100000,1000000

Sentence-transformers (the reference for the embedder ratio) is run in a subprocess with the
interpreter of ``KP_BENCH_ST_PYTHON`` (default: this one); when it is not installed there, that
figure is reported as skipped.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from knowledgepulse.embedding._openvino import check_openvino_runtime
from knowledgepulse.embedding._torch_bf16 import bf16_cpu_path, check_bf16_runtime

from . import _corpus, _windowing
from ._embedders import SentenceTransformersReference, bench_default_embedder
from ._matmul import measure_matmul_gflops

# FLOPs of one all-MiniLM-L6-v2 pass per token: 6 layers of QKV, attention output and FFN
# matmuls (2·384·384·4 + 2·2·384·1536 = 3,538,944) plus attention scores and mixing
# (4·384·seq). 21.8 MFLOP per token at 66 tokens.
LINEAR_FLOPS_PER_TOKEN_PER_LAYER = 2 * 384 * 384 * 4 + 2 * 2 * 384 * 1536
LAYERS = 6


def model_flops(tokens: int) -> float:
    return tokens * LAYERS * (LINEAR_FLOPS_PER_TOKEN_PER_LAYER + 4 * 384 * tokens)


from ._figures import FIGURES, Figure, report, timed  # noqa: E402

# -- figures -----------------------------------------------------------------------------


def bench_import() -> None:
    code = "import time; t = time.perf_counter(); import knowledgepulse; print(time.perf_counter() - t)"
    samples = [
        float(subprocess.check_output([sys.executable, "-c", code], text=True)) for _ in range(7)
    ]
    report(
        Figure(
            "import knowledgepulse (median of 7 fresh processes)",
            statistics.median(samples) * 1e3,
            "ms",
            150,
        )
    )


def bench_scoring_without_embedder(quick: bool) -> None:
    import knowledgepulse as kp

    traces = [kp.ReasoningTrace.model_validate(t) for t in _corpus.realistic_traces()]
    batch = traces * (20 if quick else 200)
    scorer = kp.Scorer(embedder=None)
    best = min(timed(lambda: scorer.score_many(batch), 3))
    report(
        Figure("scoring without embedder, per validated trace", best / len(batch) * 1e6, "µs", 20)
    )
    raw = _corpus.realistic_traces() * (2 if quick else 10)
    best = min(timed(lambda: [kp.ReasoningTrace.model_validate(t) for t in raw], 3))
    report(
        Figure(
            "schema validation, per trace (dict -> ReasoningTrace)",
            best / len(raw) * 1e6,
            "µs",
            None,
            note=f"mean {statistics.mean(len(t['steps']) for t in raw):.0f} steps/trace",
        )
    )


def bench_cache(quick: bool) -> None:
    import numpy as np

    import knowledgepulse as kp

    rng = np.random.default_rng(0)
    cache = kp.VectorCache(max_elements=1000, dimensions=384)
    for row in rng.normal(size=(1000, 384)).astype(np.float32):
        cache.add(row)
    queries = rng.normal(size=(256, 384)).astype(np.float32)
    n = 200 if quick else 2000
    best = min(timed(lambda: [cache.max_cosine_similarity(queries[i % 256]) for i in range(n)], 3))
    report(Figure("cache scan 1,000×384, single query", best / n * 1e6, "µs", 30))
    best = min(timed(lambda: cache.max_cosine_similarities(queries), 20))
    report(
        Figure("cache scan 1,000×384, batched (256 queries), per query", best / 256 * 1e6, "µs", 5)
    )
    fresh = kp.VectorCache(max_elements=1000, dimensions=384)
    for row in rng.normal(size=(1000, 384)).astype(np.float32):
        fresh.add(row)
    best = min(timed(lambda: fresh.query_then_add_many(queries[:64]), 20))
    report(
        Figure(
            "batch novelty (query-then-add, 64 traces vs 1,000), per trace",
            best / 64 * 1e6,
            "µs",
        )
    )


def bench_embedder(quick: bool) -> dict[str, Any]:
    from knowledgepulse import embedding

    if not embedding.embedder_available():
        report(Figure("embedder figures", None, "", note="embedder not installed"))
        return {}
    import knowledgepulse as kp

    code = (
        "import time; t = time.perf_counter(); from knowledgepulse.embedding import choose_embedder; "
        "e = choose_embedder('auto').embedder; e.warm_up(); print(time.perf_counter() - t, e.name)"
    )
    out = subprocess.check_output([sys.executable, "-c", code], text=True).strip().splitlines()
    load, default_name = out[-1].split(" ", 1)
    report(
        Figure(
            "default model load (fresh process, import + warm-up)",
            float(load) * 1e3,
            "ms",
            1000,
            note=default_name,
        )
    )

    tokenizer = _corpus.tokenizer()
    examples = [kp.ReasoningTrace.model_validate(t) for t in _corpus.example_traces()]
    tau = [kp.ReasoningTrace.model_validate(t) for t in _corpus.tau_bench_traces()[:60]]
    texts = _corpus.texts_of_tokens(tokenizer, [t.embedding_text for t in examples + tau], 66, 60)
    short = _corpus.traces_with_objectives(texts, "s")
    rounds = 2 if quick else 5
    embedders = _embedders_to_measure(embedding.default_embedder())
    default = embedding.choose_embedder("auto").embedder
    if default is not None and default not in embedders:
        embedders.insert(0, default)
    cases = [
        (embedder, label, traces, target)
        for label, traces, target in (
            ("66-token traces", short, True),
            ("bundled example traces", examples, False),
            ("tau-bench conversations", tau, False),
        )
        for embedder in embedders
        if traces
    ]
    for embedder, label, traces, target in cases:
        try:
            embedder.warm_up()
        except embedding.EmbedderUnavailable:
            continue
        scorer = kp.Scorer(embedder=embedder)
        samples = []
        for trace in traces * rounds:
            start = time.perf_counter()
            scorer.score(trace)
            samples.append(time.perf_counter() - start)
        samples.sort()
        p50 = samples[len(samples) // 2] * 1e3
        p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))] * 1e3
        tokens = statistics.mean(len(tokenizer.encode(t.embedding_text).ids) for t in traces)
        # "all-MiniLM-L6-v2 (openvino bf16)" -> "openvino bf16"; the targets are the default's.
        runtime = str(embedder.name).partition("(")[2].rstrip(")") or str(embedder.name)
        target = target and embedder is default
        note = f"mean {tokens:.0f} tokens, {embedder.name}" + (" (the default)" if target else "")
        report(
            Figure(
                f"single-trace evaluation, {label}, {runtime}, p50",
                p50,
                "ms",
                5 if target else None,
                note=note,
            )
        )
        report(
            Figure(
                f"single-trace evaluation, {label}, {runtime}, p99",
                p99,
                "ms",
                20 if target else None,
            )
        )
    return {}


def bench_bulk(quick: bool) -> None:
    """Batch scoring throughput of each embedder, against sentence-transformers and the FLOP bound."""
    from knowledgepulse import embedding

    if not embedding.embedder_available():
        return
    import knowledgepulse as kp

    tokenizer = _corpus.tokenizer()
    source = [
        kp.ReasoningTrace.model_validate(t).embedding_text for t in _corpus.realistic_traces()
    ]
    count = 128 if quick else 512
    texts = _corpus.texts_of_tokens(tokenizer, source, 66, count)
    tokens = [len(tokenizer.encode(t).ids) for t in texts]
    flops = statistics.mean(model_flops(t) for t in tokens)
    traces = _corpus.traces_with_objectives(texts, "b")
    note = f"{count} texts of {statistics.mean(tokens):.0f} tokens, {flops / 1e6:.0f} MFLOP each"

    reference = SentenceTransformersReference.start(texts)
    try:
        st = bench_default_embedder(texts, reference, quick, note)
    finally:
        if reference is not None:
            reference.close()

    embedders = _embedders_to_measure(embedding.MiniLMEmbedder())
    bulk_choice = embedding.choose_embedder("auto", bulk=True)
    print(f"kp score --embedder auto would use: {bulk_choice.kind} ({bulk_choice.reason})")
    cpu_path = bf16_cpu_path()
    print(f"bf16 CPU path: {cpu_path.name} ({cpu_path.reason})")
    for embedder in embedders:
        try:
            embedder.warm_up()
        except embedding.EmbedderUnavailable as exc:
            report(
                Figure(f"batch scoring with {embedder.name}", None, "traces/s", note=str(exc)[:60])
            )
            continue
        scorer = kp.Scorer(
            embedder=embedder, cache=kp.VectorCache(max_elements=1000), batch_size=64
        )
        scorer.score_many(traces[:64])  # warm
        best = min(timed(functools.partial(scorer.score_many, traces), 2 if quick else 3))
        ours = len(traces) / best
        report(
            Figure(
                f"batch scoring with embedder: {embedder.name}",
                ours,
                "traces/s",
                None,
                lower_is_better=False,
                note=note,
            )
        )
        if st is not None:
            # The 2.5x target is for bulk scoring, which uses the embedder the bulk policy
            # picks (kp score --embedder auto); the other ratios are shown for comparison.
            bulk = embedder is bulk_choice.embedder
            report(
                Figure(
                    "  ratio to sentence-transformers fp32",
                    ours / st,
                    "×",
                    2.5 if bulk else None,
                    lower_is_better=False,
                    note="the bulk path (kp score)" if bulk else "for comparison",
                )
            )
        precision = getattr(embedder, "precision", "fp32")
        gflops, engine = matmul_gflops(precision)
        limit = gflops * 1e9 / flops
        report(
            Figure(
                f"  matmul peak, MiniLM shapes ({precision}, {engine})",
                gflops,
                "GFLOP/s",
                None,
                lower_is_better=False,
            )
        )
        report(
            Figure(
                "  FLOP-bound limit for these texts", limit, "texts/s", None, lower_is_better=False
            )
        )
        # On AMX the bf16 path is held to half its matmul peak; elsewhere there is no target
        # (AVX512-BF16 keeps the ratio it had, which the table shows).
        amx_bf16 = (
            precision == "bf16" and cpu_path.name == "amx" and embedder is bulk_choice.embedder
        )
        report(
            Figure(
                "  achieved / FLOP-bound limit",
                ours / limit,
                "",
                0.5 if amx_bf16 else None,
                lower_is_better=False,
                note=f"bf16 CPU path: {cpu_path.name}" if precision == "bf16" else "",
            )
        )


def _embedders_to_measure(onnx_embedder: Any) -> list[Any]:
    """The ONNX embedder, and the bf16 ones (OpenVINO, torch) where they are installed and the
    CPU has native bf16 (elsewhere bf16 is emulated: slower than fp32 and not what kp score
    would use)."""
    from knowledgepulse import embedding

    embedders = [onnx_embedder]
    if embedding.cpu_has_native_bf16():
        for kind in ("openvino", "bf16"):
            with contextlib.suppress(embedding.EmbedderUnavailable):  # runtime not installed
                embedders.append(embedding.select_embedder(kind))
    return embedders


def matmul_gflops(precision: str) -> tuple[float, str]:
    """Best sustained GFLOP/s of MiniLM-shaped matmuls (2112×384 @ 384×1536 and its transpose)
    in ``precision``, on the engine the embedder uses: oneDNN bf16 (torch) or MLAS fp32 (ONNX
    Runtime), 2 threads."""
    backend = "torch" if precision == "bf16" else "onnxruntime"
    best = max(
        measure_matmul_gflops(precision, backend=backend, m=2112, k=k, n=n, threads=2, repeats=20)  # type: ignore[arg-type]
        for k, n in ((384, 1536), (1536, 384))
    )
    return best, backend


def bench_cli(quick: bool, embed_traces: int | None = None) -> None:
    """kp score throughput and peak memory on generated files of realistic traces."""
    sizes = [2_000, 10_000] if quick else [10_000, 100_000]
    with tempfile.TemporaryDirectory() as tmp:
        rss = {}
        for size in sizes:
            path = _corpus.write_trace_file(Path(tmp) / f"traces-{size}.jsonl.gz", size)
            rate, peak = run_kp_score(path, size, embed=False)
            rss[size] = peak
            report(
                Figure(
                    f"kp score --no-embed, {size:,} traces",
                    rate,
                    "traces/s",
                    None,
                    lower_is_better=False,
                    note=f"peak RSS {peak:.0f} MiB",
                )
            )
        small, large = sizes
        report(
            Figure(
                f"peak memory growth {small:,} -> {large:,} traces",
                rss[large] / rss[small],
                "×",
                1.1,
                note="streams: must not grow with input size",
            )
        )
        from knowledgepulse.embedding import choose_embedder, embedder_available

        if embedder_available():
            size = embed_traces or (2_000 if quick else 10_000)
            path = Path(tmp) / f"traces-{size}.jsonl.gz"
            if not path.exists():
                _corpus.write_trace_file(path, size)
            chosen = choose_embedder("auto", bulk=True)
            used = chosen.embedder.name if chosen.embedder is not None else "none"
            print(f"kp score --embedder auto uses: {used} ({chosen.reason})")
            rate, peak = run_kp_score(path, size, embed=True)
            report(
                Figure(
                    f"kp score with embedder, {size:,} traces",
                    rate,
                    "traces/s",
                    None,
                    lower_is_better=False,
                    note=used,
                )
            )
            report(Figure(f"  peak RSS, {size:,} traces", peak, "MiB", 350, note=used))
            bench_cli_memory_per_embedder(Path(tmp))


def bench_cli_memory_per_embedder(tmp: Path) -> None:
    """Peak RSS of kp score with each embedder installed here, on a short file (the peak is
    reached within the first batches: it does not grow with the input)."""
    from knowledgepulse import embedding

    size = 128
    path = _corpus.write_trace_file(tmp / f"traces-{size}.jsonl.gz", size)
    kinds = ["onnx"]
    if embedding.cpu_has_native_bf16():
        for kind, check in (("openvino", check_openvino_runtime), ("bf16", check_bf16_runtime)):
            with contextlib.suppress(embedding.MissingEmbedderRuntime):
                check()
                kinds.append(kind)
    for kind in kinds:
        _, peak = run_kp_score(path, size, embed=True, extra=["--embedder", kind])
        report(
            Figure(
                f"  peak RSS with --embedder {kind}, {size} traces",
                peak,
                "MiB",
                None,
                note="for comparison",
            )
        )


def bench_kb_score(quick: bool) -> None:
    """kp score --kb against a fresh base versus in memory, same traces, same run."""
    from knowledgepulse.embedding import embedder_available

    if not embedder_available():
        report(Figure("kp score --kb vs in memory", None, "×", 0.9, False, note="no embedder"))
        return
    size = 1_000 if quick else 5_000
    with tempfile.TemporaryDirectory() as tmp:
        path = _corpus.write_trace_file(Path(tmp) / f"traces-{size}.jsonl.gz", size)
        memory_rate, _ = run_kp_score(path, size, embed=True)
        kb_rate, peak = run_kp_score(
            path, size, embed=True, extra=["--kb", str(Path(tmp) / "kb.sqlite")]
        )
    report(
        Figure(
            f"kp score --kb (new SQLite base) vs in memory, {size:,} traces",
            kb_rate / memory_rate,
            "×",
            0.9,
            lower_is_better=False,
            note=f"{kb_rate:,.0f} vs {memory_rate:,.0f} traces/s; peak RSS {peak:.0f} MiB",
        )
    )


def run_kp_score(
    path: Path, size: int, *, embed: bool, extra: list[str] | None = None
) -> tuple[float, float]:
    args = [sys.executable, "-m", "knowledgepulse", "score", str(path), "-q", "-o", os.devnull]
    if not embed:
        args.append("--no-embed")
    args.extend(extra or [])
    wrapper = (
        "import resource, subprocess, sys, time; t = time.perf_counter(); "
        "code = subprocess.call(sys.argv[1:]); d = time.perf_counter() - t; "
        "print(d, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, code)"
    )
    env = {**os.environ, "KNOWLEDGEPULSE_EMBEDDER": "auto" if embed else "none"}
    out = subprocess.check_output([sys.executable, "-c", wrapper, *args], text=True, env=env)
    seconds, max_rss_kib, code = out.split()
    if code != "0":
        raise RuntimeError(f"kp score exited {code}")
    return size / float(seconds), int(max_rss_kib) / 1024


def bench_curation(quick: bool, copies: int | None) -> None:
    """Tiered curation (static first pass, MiniLM decides) against MiniLM-only."""
    from knowledgepulse import embedding

    if (
        not embedding.embedder_available()
        or not _corpus.TAU_BENCH.is_file()
        or embedding.choose_embedder("auto", bulk=True).embedder is None
    ):
        report(Figure("tiered curation", None, "", note="embedder or tau-bench not installed"))
        return
    from ._curation import measure

    # --quick: 60 conversations and 20 copies (MiniLM embeds every trace once for the reference)
    r = measure(
        copies if copies is not None else (20 if quick else 200),
        conversations=60 if quick else None,
    )
    size = f"{r['traces']:,} traces ({r['copies']} copies), S={r['similarity']:g}"
    report(
        Figure(
            f"static embedder, tokens/s ({r['tokens']:,} tokens, whole traces)",
            r["static_tokens_per_s"],
            "tokens/s",
            note=f"{r['traces'] / r['static_seconds']:.0f} traces/s; {r['minilm_name']}: "
            f"{r['traces'] / r['minilm_seconds']:.1f} traces/s",
        )
    )
    report(
        Figure(
            f"tiered curation pair recall vs MiniLM-only, {size}",
            r["pair_recall"],
            "",
            0.99,
            lower_is_better=False,
            note=f"{r['reference_pairs']} MiniLM pairs, {r['pairs_at_threshold']:,} of all "
            f"pairs within 0.001 of S; candidate threshold {r['candidate_similarity']:.3f}; "
            f"{r['candidate_pairs']:,} candidate pairs",
        )
    )
    report(
        Figure(
            "tiered curation: traces with the same kept/dropped decision as MiniLM-only",
            r["kept_agreement"],
            "",
            0.99,
            lower_is_better=False,
            note=f"kept {r['kept_tiered']} vs {r['kept_reference']}",
        )
    )
    report(
        Figure(
            "tiered curation: share of traces MiniLM embeds",
            (r["embedded"] or 0) / r["traces"],
            "",
            note=f"estimated speed-up {r['minilm_seconds'] / r['tiered_seconds_estimate']:.2f}x "
            "(static pass + that share of the MiniLM time)",
        )
    )
    best = max(r["static_only"].items(), key=lambda item: item[1][1])
    report(
        Figure(
            "static vectors deciding alone: best share with MiniLM-only's decision",
            best[1][1],
            "",
            0.99,
            lower_is_better=False,
            note=f"at static cosine {best[0]:g} ({best[1][0]} kept); "
            + ", ".join(f"{t:g}: {share:.3f}" for t, (_, share) in r["static_only"].items()),
        )
    )


def _cpu_name() -> str:
    """The CPU's model name, so that every figure printed says where it was measured."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine() or "unknown CPU"


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "sections",
        nargs="*",
        metavar="SECTION",
        help=f"run only these sections ({', '.join(SECTIONS)}); default: all of them",
    )
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument(
        "--skip",
        action="append",
        default=[],
        choices=[
            "embedder",
            "bulk",
            "windowing",
            "cli",
            "kb",
            "redaction",
            "speed",
            "agent",
            "mcp",
            "curation",
            "ann",
            "curation-scale",
            "copy-hashing",
            "copies",
        ],
        help="leave a group out (repeatable)",
    )
    parser.add_argument(
        "--sizes",
        metavar="N,N",
        help="vectors in the ann section (default 200000,1000000; --quick 50000)",
    )
    parser.add_argument(
        "--ann-kinds",
        metavar="KIND,KIND",
        default="uniform,clustered,traces",
        help="data kinds of the ann section (default uniform,clustered,traces)",
    )
    parser.add_argument(
        "--curation-sizes",
        metavar="N,N",
        help="traces in the curation-scale section (default 10000,100000,1000000; --quick "
        "2000): a size that would exceed --curation-budget at the rate measured on the "
        "previous one is reported as not measured",
    )
    parser.add_argument(
        "--curation-budget",
        type=float,
        default=1800.0,
        metavar="SECONDS",
        help="the longest kp curate run the curation-scale section starts (default 1800)",
    )
    parser.add_argument(
        "--copies-sizes",
        metavar="N,N",
        help="traces of the realistic pile in the copies section (default 10000; --quick 2000): "
        "kp curate at each, the --similarity sweep, SemHash and MiniLM at the smallest",
    )
    parser.add_argument(
        "--copies-budget",
        type=float,
        default=1800.0,
        metavar="SECONDS",
        help="the longest kp curate run the copies section starts, at the rate kp curate has "
        "on a 200-trace pile (default 1800; 0: no kp curate run)",
    )
    parser.add_argument(
        "--copies-minilm",
        type=int,
        metavar="N",
        help="traces (the pile's first) of today's whole-trace MiniLM curation in the copies "
        "section (default 2,000; --quick 200; 0: not run): ~0.3 s each on 2 cores",
    )
    parser.add_argument(
        "--copies-seed", type=int, default=0, metavar="N", help="the copies pile's seed"
    )
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    parser.add_argument(
        "--tau-bench",
        type=Path,
        metavar="FILE",
        help="the tau-bench results file (.json or .json.gz) of the agent rubric and MCP "
        f"recall figures (default: {_corpus.TAU_BENCH.relative_to(_corpus.ROOT)})",
    )
    parser.add_argument(
        "--holdout",
        type=Path,
        metavar="DIR",
        help="the folder of human-labelled runs (who-and-when/, agentrx/) of the agent "
        "rubric's human-agreement card (default: $KP_HOLDOUT, else "
        "shared/data/behaviour-holdout beside the repository)",
    )
    parser.add_argument(
        "--holdout-sets",
        default="who-and-when,agentrx",
        metavar="NAMES",
        help="the labelled sets of the human-agreement card, comma-separated (default "
        "who-and-when,agentrx): name one to grade it alone, e.g. who-and-when while developing "
        "rules, agentrx being a judging set",
    )
    parser.add_argument(
        "--kb-ann-vectors",
        type=int,
        metavar="N",
        help="vectors in the kb section's ANN figure (default 200,000; --quick 50,000; the ann "
        "section measures 10^6)",
    )
    parser.add_argument(
        "--embed-traces",
        type=int,
        metavar="N",
        help="traces in the kp score run with the embedder (default 10,000; --quick 2,000): "
        "whole-trace embedding of realistic traces takes ~3 s per 100 on 2 cores",
    )
    parser.add_argument(
        "--mcp-traces",
        type=int,
        metavar="N",
        help="traces in the base of the MCP latency figures (default 20,000; --quick 5,000)",
    )
    parser.add_argument(
        "--recall-traces",
        type=int,
        metavar="N",
        help="traces in the base of the recall latency figure, part of the mcp section "
        "(default 100,000; --quick 10,000)",
    )
    parser.add_argument(
        "--recall-base",
        type=Path,
        metavar="PATH",
        help="keep the recall latency base there and reuse it in a later run (10^5 traces "
        "and their HNSW graph took ~14 min to build on 2 busy cores)",
    )
    parser.add_argument(
        "--curate-copies",
        type=int,
        metavar="N",
        help="edited copies added to the 200 tau-bench conversations in the tiered-curation "
        "figures (default 200; --quick 20): MiniLM embeds all of them once, ~0.1-1 s each",
    )
    args = parser.parse_args()
    unknown = [name for name in args.sections if name not in SECTIONS]
    if unknown:
        parser.error(f"unknown section {', '.join(unknown)}; choose from {', '.join(SECTIONS)}")
    args.holdout_sets = [name.strip() for name in args.holdout_sets.split(",") if name.strip()]
    unknown = [name for name in args.holdout_sets if name not in HOLDOUT_SETS]
    if unknown:
        parser.error(
            f"--holdout-sets: unknown set {', '.join(unknown)}; choose from "
            f"{', '.join(HOLDOUT_SETS)}"
        )
    run(args)


#: The labelled sets the human-agreement card reads (``--holdout-sets``).
HOLDOUT_SETS = ("who-and-when", "agentrx")


#: The sections, in the order they run; ``python -m benchmarks NAME…`` runs only those named.
SECTIONS = (
    "basics",
    "speed",
    "agent",
    "compare",
    "novelty",
    "embedder",
    "bulk",
    "windowing",
    "cli",
    "redaction",
    "kb",
    "mcp",
    "copy-hashing",
    "curation",
    "ann",
    "curation-scale",
    "copies",
)


def _sizes(text: str | None, default: list[int]) -> list[int]:
    return [int(part) for part in text.split(",")] if text else default


def run(args: argparse.Namespace) -> None:  # noqa: C901  (one line per section)
    """Run the sections ``args`` selects and print the figures (and write the JSON)."""
    skip = set(args.skip) | {
        name for name in SECTIONS if args.sections and name not in args.sections
    }
    print(
        f"knowledgepulse benchmarks — python {sys.version.split()[0]}, {os.cpu_count()} CPUs"
        f" ({_cpu_name()})",
        flush=True,
    )
    if "basics" not in skip:
        bench_import()
    if "speed" not in skip:
        from ._speed import bench_speed

        bench_speed(args.quick)
    if "basics" not in skip:
        bench_scoring_without_embedder(args.quick)
        bench_cache(args.quick)
    if "agent" not in skip:
        from ._agent_rubric import bench_agent_rubric

        bench_agent_rubric(args.tau_bench)
        from ._human_agreement import bench_human_agreement

        bench_human_agreement(args.holdout, args.holdout_sets)
    if "compare" not in skip:
        from ._compare import bench_compare

        bench_compare(args.quick, args.tau_bench)
    if "novelty" not in skip:
        from ._novelty import bench_novelty

        bench_novelty(args.quick, args.tau_bench)
    if "embedder" not in skip:
        bench_embedder(args.quick)
    if "bulk" not in skip:
        bench_bulk(args.quick)
    if not {"embedder", "windowing"} & skip:
        for figure in _windowing.figures(args.quick):
            report(Figure(**figure))
    if "cli" not in skip:
        bench_cli(args.quick, args.embed_traces)
    if "redaction" not in skip:
        from ._redaction import bench_redaction

        bench_redaction(args.quick)
    if "kb" not in skip:
        from ._kb import bench_kb

        bench_kb(args.quick, args.kb_ann_vectors or (50_000 if args.quick else 200_000))
        bench_kb_score(args.quick)
    if "mcp" not in skip:
        from ._mcp import bench_mcp
        from ._recall import bench_recall

        bench_recall(args.quick, args.tau_bench, args.recall_traces, args.recall_base)
        bench_mcp(args.quick, args.tau_bench, args.mcp_traces)
    if "copy-hashing" not in skip:
        from ._copy_hashing import bench_copy_hashing

        bench_copy_hashing()
    if "curation" not in skip:
        bench_curation(args.quick, args.curate_copies)
    if "ann" not in skip:
        from ._ann_sweep import bench_ann

        bench_ann(
            _sizes(args.sizes, [50_000] if args.quick else [200_000, 1_000_000]),
            tuple(args.ann_kinds.split(",")),
        )
    if "curation-scale" not in skip:
        from ._curation_scale import bench_curation_scale

        default = [2_000] if args.quick else [10_000, 100_000, 1_000_000]
        bench_curation_scale(_sizes(args.curation_sizes, default), args.curation_budget)
    if "copies" not in skip:
        from ._copy_pile import bench_copies

        bench_copies(
            _sizes(args.copies_sizes, [2_000] if args.quick else [10_000]),
            args.copies_budget,
            args.copies_minilm
            if args.copies_minilm is not None
            else (200 if args.quick else 2_000),
            args.copies_seed,
        )
    missed = [f.name.strip() for f in FIGURES if f.status == "NOT met"]
    print(f"\n{len(FIGURES)} figures; targets not met: {', '.join(missed) if missed else 'none'}")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                [{**asdict(f), "ratio": f.ratio, "status": f.status} for f in FIGURES], indent=2
            )
        )


if __name__ == "__main__":
    main()
