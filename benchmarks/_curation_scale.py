"""Curation at scale: ``kp curate`` on realistic piles of 10^4, 10^5, 10^6 traces, and SemHash
on the same pile in the same run.

The pile of size N: the 200 tau-bench conversations, then edited copies of them in turn (1-5 %
of the words replaced by words of the corpus, one step dropped in a third of them:
:func:`benchmarks._curation.edited_copy`), written as gzip JSONL.

Per size, each measured in its own process (so that each peak RSS is its own):

- ``kp curate --first-pass static`` through the CLI (whichever version is installed): wall time,
  traces/s, tokens/s, peak RSS;
- the static pass alone (``knowledgepulse`` static embedder over the whole traces, 10,000 at a
  time): tokenising and pooling timed apart, which says which of the two bounds it;
- SemHash (``semhash``) self-deduplication with the same static table as a model2vec model
  (SemHash reads each text's first 512 tokens: compared per token read; each text is handed to
  it cut to the characters that hold those tokens, :func:`semhash_input`, so that 10^6 fit in
  memory; its embedding alone is timed on the first 100,000);
- SemHash with sentence-transformers all-MiniLM-L6-v2 (cut at 256 tokens), on the first
  ``minilm_traces`` traces only: its time per trace is the point, not the whole pile.

``kp curate`` runs first on a small pile (100 traces) for its rate; a size that a measurement
would take longer than the time budget for, at the rate measured before, is printed as not
measured, with that reason.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ._figures import Figure, report

#: kp curate's default near-duplicate similarity; SemHash runs at the same threshold.
SIMILARITY = 0.95
#: The tokens of a text that SemHash's model2vec encoder reads (its default max_length).
SEMHASH_TOKENS = 512
#: Characters of a text handed to SemHash when they hold its SEMHASH_TOKENS tokens
#: (:func:`semhash_input`); ~4.2 characters per token in these traces.
SEMHASH_CHARS = 4_096
#: Texts whose embedding alone SemHash is timed on (the per-token comparison).
SEMHASH_ENCODE_SAMPLE = 100_000


def write_pile(path: Path, size: int, seed: int = 11) -> Path:
    """A gzip JSONL of ``size`` traces: the tau-bench conversations, then edited copies."""
    from ._curation import pile_traces

    with gzip.open(path, "wt", encoding="utf-8", compresslevel=1) as handle:
        for trace in pile_traces(size, seed=seed):
            handle.write(json.dumps(trace, separators=(",", ":")) + "\n")
    return path


def _text_chunks(path: Path, limit: int | None, size: int = 10_000) -> Iterator[list[str]]:
    """The embedded text of each trace of the pile (its first ``limit``), ``size`` at a time:
    a worker holds one chunk of texts, not the pile (10^6 traces are ~10 GB of text)."""
    for chunk in _trace_chunks(path, limit, size):
        yield [text for _, text in chunk]


def _trace_chunks(
    path: Path, limit: int | None, size: int = 10_000
) -> Iterator[list[tuple[str, str]]]:
    """The id and embedded text of each trace of the pile (its first ``limit``), ``size`` at
    a time."""
    import knowledgepulse as kp

    chunk: list[tuple[str, str]] = []
    read = 0
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            if limit is not None and read >= limit:
                break
            trace = kp.ReasoningTrace.model_validate_json(line)
            chunk.append((trace.id, trace.embedding_text))
            read += 1
            if len(chunk) == size:
                yield chunk
                chunk = []
    if chunk:
        yield chunk


def semhash_input(text: str, tokens: Callable[[str], int]) -> tuple[str, int]:
    """What SemHash is handed for ``text``, and the tokens of it that SemHash reads.

    SemHash's model2vec encoder reads a text's first :data:`SEMHASH_TOKENS` tokens. Handing it
    the text's first :data:`SEMHASH_CHARS` characters, cut after a whitespace character, keeps
    those tokens whole (BERT's pre-tokeniser splits at whitespace, so the cut text's tokens are
    the first tokens of the text) where the cut text still has that many: then its embedding is
    the same, and 10^6 texts fit in memory. The whole text's digest follows the cut, past the
    tokens read: SemHash first merges exactly equal texts, and two texts equal only up to the
    cut must stay two. A cut text with fewer tokens is not used: the whole text is. ``tokens``
    counts a text's tokens (with no [UNK]s: never more than the tokenizer's).
    """
    if len(text) > SEMHASH_CHARS:
        end = max(text.rfind(" ", 0, SEMHASH_CHARS), text.rfind("\n", 0, SEMHASH_CHARS)) + 1
        cut = text[:end]
        if cut and tokens(cut) >= SEMHASH_TOKENS:
            digest = hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()
            return f"{cut} {digest}", SEMHASH_TOKENS
    return text, min(tokens(text), SEMHASH_TOKENS)


def _peak_mib() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _worker(
    kind: str, path: Path, limit: int | None, groups_dir: Path | None = None
) -> dict[str, Any]:
    """One measurement in this process (see the module); a JSON-able result. With
    ``groups_dir`` (SemHash with the static model only), SemHash is handed each trace's id
    with its text, and its decision is written there as ``kept.txt`` (one kept id a line) and
    ``groups.jsonl`` (``knowledgepulse.groups/1`` lines), for the copies benchmark to score."""
    from knowledgepulse.embedding._static import StaticEmbedder

    if groups_dir is not None and kind != "semhash-static":
        raise ValueError(f"the decision is written for semhash-static only, not {kind}")
    static = StaticEmbedder()
    static.warm_up()
    if kind == "static":
        # The pass as kp curate runs it (embed: chunk cache, counts), chunk by chunk, then the
        # tokens it read (token_ids: the same tokens in text order), timed apart for the split
        # below; reading the pile is not timed.
        traces = tokens = 0
        seconds = token_ids_s = 0.0
        for texts in _text_chunks(path, limit):
            started = time.perf_counter()
            static.embed(texts)
            done = time.perf_counter()
            ids = static.token_ids(texts)
            seconds += done - started
            token_ids_s += time.perf_counter() - done
            traces += len(texts)
            tokens += sum(len(i) for i in ids)
        return {
            "traces": traces,
            "tokens": tokens,
            "token_ids_s": token_ids_s,
            "seconds": seconds,
            "peak_mib": _peak_mib(),
        }
    from semhash import SemHash

    texts = []
    trace_ids: list[str] = []
    seen = cut = 0
    encode_tokens = 0  # the tokens SemHash reads of its first SEMHASH_ENCODE_SAMPLE texts
    if kind == "semhash-static":
        import tokenizers
        from model2vec import StaticModel

        loaded = static.model
        tokenizer = tokenizers.Tokenizer.from_file(str(loaded.model_dir / "tokenizer.json"))
        model: Any = StaticModel(vectors=loaded.table, tokenizer=tokenizer, normalize=True)
        for chunk in _trace_chunks(path, limit):
            for trace_id, text in chunk:
                handed, read = semhash_input(text, lambda t: len(static.token_ids([t])[0]))
                texts.append(handed)
                trace_ids.append(trace_id)
                seen += read
                cut += handed != text
                if len(texts) <= SEMHASH_ENCODE_SAMPLE:
                    encode_tokens += read
        # The embedding alone, to compare with the static pass per token: on the first
        # SEMHASH_ENCODE_SAMPLE texts (its rate per token does not depend on the pile's size).
        sample = texts[:SEMHASH_ENCODE_SAMPLE]
        started = time.perf_counter()
        model.encode(sample)
        encode_s: float | None = time.perf_counter() - started
    else:
        import torch
        from sentence_transformers import SentenceTransformer

        from knowledgepulse.embedding._minilm import resolve_model_dir

        torch.set_num_threads(os.cpu_count() or 1)
        model = SentenceTransformer(str(resolve_model_dir(None)[0]), device="cpu")
        tokenizer = model.tokenizer
        window = int(model.max_seq_length)
        texts = [t for chunk in _text_chunks(path, limit) for t in chunk]
        seen = sum(min(len(tokenizer(t)["input_ids"]), window) for t in texts)
        encode_s = None
    records: Any = texts
    if groups_dir is not None:  # the same texts, each with its trace's id
        records = [{"id": i, "text": t} for i, t in zip(trace_ids, texts)]
        del trace_ids
    started = time.perf_counter()
    semhash = SemHash.from_records(records, model=model, columns=["text"] if groups_dir else None)
    indexed = time.perf_counter()
    result = semhash.self_deduplicate(threshold=SIMILARITY)
    done = time.perf_counter()
    if groups_dir is not None:
        _write_semhash_decision(result, groups_dir)
    return {
        "traces": len(texts),
        "tokens_seen": seen,
        "cut": cut,
        "encode_s": encode_s,
        "encode_tokens": encode_tokens,
        "index_s": indexed - started,
        "dedup_s": done - indexed,
        "seconds": done - started,
        "kept": len(result.selected),
        "peak_mib": _peak_mib(),
    }


def _write_semhash_decision(result: Any, out: Path) -> None:
    """SemHash's kept ids and groups (each filtered record under the selected one it points
    to) as ``kept.txt`` and ``groups.jsonl`` in ``out``."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for dropped in result.filtered:
        groups.setdefault(dropped.duplicate_of["id"], []).append(
            {
                "id": dropped.record["id"],
                "similarity": round(float(dropped.score), 6),
                "relation": "exact" if dropped.exact else "near_copy",
            }
        )
    with (out / "kept.txt").open("w", encoding="utf-8") as kept:
        kept.writelines(f"{record['id']}\n" for record in result.selected)
    with (out / "groups.jsonl").open("w", encoding="utf-8") as lines:
        for leader, members in groups.items():
            line = {"schema": "knowledgepulse.groups/1", "kept": leader, "duplicates": members}
            lines.write(json.dumps({**line, "reason": f"semhash cosine >= {SIMILARITY}"}) + "\n")


def _run_worker(
    kind: str, path: Path, limit: int | None, groups_dir: Path | None = None
) -> dict[str, Any] | str:
    """The worker's result, or why there is none (its last line of error)."""
    command = [sys.executable, "-m", "benchmarks._curation_scale", kind, str(path)]
    command.append("all" if limit is None else str(limit))
    if groups_dir is not None:
        command.append(str(groups_dir))
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode < 0:  # no word from the worker (SIGKILL: the out-of-memory killer?)
        return f"killed by signal {-done.returncode}"
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        return lines[-1] if lines else f"exit {done.returncode}"
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def run_kp_curate(path: Path, out: Path) -> tuple[float, float, int] | str:
    """Seconds, peak RSS (MiB) and kept count of ``kp curate --by embedding --first-pass
    static`` on ``path``, or why it failed."""
    args = [
        sys.executable, "-m", "knowledgepulse", "curate", str(path), "-q",
        "-o", str(out / "kept.jsonl"), "--groups", str(out / "groups.jsonl"),
        "--by", "embedding", "--first-pass", "static",
    ]  # fmt: skip
    wrapper = (
        "import resource, subprocess, sys, time; t = time.perf_counter(); "
        "p = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
        "d = time.perf_counter() - t; "
        "print(p.stderr.strip().splitlines()[-1:] if p.returncode else '', file=sys.stderr); "
        "print(d, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, p.returncode)"
    )
    done = subprocess.run(
        [sys.executable, "-c", wrapper, *args], capture_output=True, text=True, check=False
    )
    seconds, max_rss_kib, code = done.stdout.split()
    if code != "0":
        return f"kp curate exited {code}: {done.stderr.strip()[-200:]}"
    with (out / "kept.jsonl").open(encoding="utf-8") as kept:
        count = sum(1 for _ in kept)
    return float(seconds), int(max_rss_kib) / 1024, count


def bench_curation_scale(
    sizes: list[int], budget_s: float = 1800.0, minilm_traces: int = 200, probe: int = 100
) -> None:
    """The figures of the module, per size (see the module). ``kp curate`` first runs on a
    pile of ``probe`` traces, whose rate says which sizes fit ``budget_s``; the static pass and
    SemHash likewise run on a size only where their rate on the previous size says it fits."""
    from . import _corpus

    if not _corpus.TAU_BENCH.is_file():
        report(Figure("curation at scale", None, "", note="tau-bench not installed"))
        return
    rates: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        _curate(write_pile(Path(tmp) / "pile.jsonl.gz", probe), probe, None, rates)
    for size in sizes:

        def fits(kind: str, size: int = size) -> str | None:
            rate = rates.get(kind)
            if rate is None or size / rate <= budget_s:
                return None
            return (
                f"not measured (at the {rate:,.1f} traces/s measured on the previous size, "
                f"~{size / rate / 60:,.0f} min > the {budget_s / 60:.0f} min budget)"
            )

        if all(fits(kind) for kind in ("curate", "static", "semhash-static")):
            report(Figure(f"curation, {size:,} traces", None, "", note=str(fits("static"))))
            continue
        with tempfile.TemporaryDirectory() as tmp:
            path = write_pile(Path(tmp) / "pile.jsonl.gz", size)
            static = fits("static") or _run_worker("static", path, None)
            if isinstance(static, dict):
                rates["static"] = size / static["seconds"]
            _curate(path, size, static, rates, fits("curate"))
            _report_static(static)
            semhash = fits("semhash-static") or _run_worker("semhash-static", path, None)
            if isinstance(semhash, dict):
                rates["semhash-static"] = size / semhash["seconds"]
            _report_semhash(semhash, "same static model", static)
            minilm = _run_worker("semhash-minilm", path, min(size, minilm_traces))
            _report_semhash(minilm, "sentence-transformers MiniLM", None)


def _curate(
    path: Path,
    size: int,
    static: dict[str, Any] | str | None,
    rates: dict[str, float],
    skipped: str | None = None,
) -> None:
    """Run and report ``kp curate --first-pass static`` on ``path`` (unless ``skipped``)."""
    label = f"curation, {size:,} traces: kp curate --first-pass static"
    if skipped:
        report(Figure(label, None, "traces/s", note=skipped))
        return
    with tempfile.TemporaryDirectory() as out:
        curated = run_kp_curate(path, Path(out))
    load = f"load {os.getloadavg()[0]:.2f}"
    if isinstance(curated, str):
        report(Figure(label, None, "traces/s", note=curated))
        return
    seconds, peak, kept = curated
    rates["curate"] = size / seconds
    tokens = static.get("tokens") if isinstance(static, dict) else None
    per_token = f", {tokens / seconds:,.0f} tokens/s" if tokens else ""
    report(
        Figure(
            label,
            size / seconds,
            "traces/s",
            370,
            False,
            note=f"{seconds:.0f} s{per_token}, kept {kept:,}, {load}",
        )
    )
    report(Figure("  peak RSS", peak, "MiB", 1536))


def _report_static(static: dict[str, Any] | str) -> None:
    """Report the static pass (or why it was not measured)."""
    if isinstance(static, str):
        report(Figure("  static pass", None, "tokens/s", note=static))
        return
    report(
        Figure(
            f"  static pass, whole traces ({static['tokens'] / static['traces']:,.0f} tokens each)",
            static["tokens"] / static["seconds"],
            "tokens/s",
            note=f"{static['traces'] / static['seconds']:,.0f} traces/s "
            f"({static['seconds']:.1f} s); token ids alone, after it "
            f"{static['token_ids_s']:.1f} s; peak RSS {static['peak_mib']:.0f} MiB",
        )
    )


def _report_semhash(
    result: dict[str, Any] | str, model: str, static: dict[str, Any] | str | None
) -> None:
    """Report a SemHash run (or why it was not measured), against the static pass if given."""
    if isinstance(result, str):
        report(Figure(f"  SemHash, {model}", None, "tokens/s", note=result))
        return
    rate = result["tokens_seen"] / result["seconds"]
    report(
        Figure(
            f"  SemHash, {model}, {result['traces']:,} traces, per token seen",
            rate,
            "tokens/s",
            note=f"{result['traces'] / result['seconds']:,.1f} traces/s; embed+index "
            f"{result['index_s']:.1f} s, dedup {result['dedup_s']:.1f} s; kept "
            f"{result['kept']:,} at {SIMILARITY}; peak RSS {result['peak_mib']:.0f} MiB"
            + (
                f"; {result['cut']:,} texts handed cut to their first {SEMHASH_TOKENS} tokens"
                if result.get("cut")
                else ""
            ),
        )
    )
    if isinstance(static, dict) and result["encode_s"]:
        ours = static["tokens"] / static["seconds"]
        theirs = result["encode_tokens"] / result["encode_s"]
        report(
            Figure(
                "  static pass / SemHash's embedding (model2vec), per token",
                ours / theirs,
                "×",
                1.0,
                False,
                note=f"{ours:,.0f} vs {theirs:,.0f} tokens/s",
            )
        )


if __name__ == "__main__":
    limit = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[3] != "all" else None
    groups_dir = Path(sys.argv[4]) if len(sys.argv) > 4 else None
    print(json.dumps(_worker(sys.argv[1], Path(sys.argv[2]), limit, groups_dir)))
