"""Realistic benchmark inputs: the bundled example traces and the tau-bench conversations."""

from __future__ import annotations

import copy
import gzip
import json
import random
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "traces.jsonl"
TAU_BENCH = ROOT / "examples" / "tau-bench" / "gpt-4o-airline.json.gz"


def load_tau_bench(path: Path = TAU_BENCH) -> list[dict[str, Any]]:
    """The records of a tau-bench results file (``.json`` or ``.json.gz``)."""
    opener: Any = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        records: list[dict[str, Any]] = json.load(handle)
    return records


def example_traces() -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for line in EXAMPLES.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]


def tau_bench_traces() -> list[dict[str, Any]]:
    """The 200 tau-bench conversations as ReasoningTraces (empty when the corpus is absent)."""
    if not TAU_BENCH.is_file():
        return []
    from knowledgepulse.importers import convert

    records = load_tau_bench()
    traces: list[dict[str, Any]] = []
    for record in records:
        traces.extend(trace.to_dict() for trace in convert("openai", record))
    return traces


def realistic_traces() -> list[dict[str, Any]]:
    return example_traces() + tau_bench_traces()


def texts_of_tokens(tokenizer: Any, source_texts: list[str], tokens: int, count: int) -> list[str]:
    """``count`` distinct texts of about ``tokens`` tokens, cut from realistic text."""
    words = " ".join(source_texts).split()
    rng = random.Random(7)
    out: list[str] = []
    while len(out) < count:
        start = rng.randrange(0, max(1, len(words) - 400))
        text = " ".join(words[start : start + tokens])
        ids = tokenizer.encode(text).ids
        # Trim to the token budget ([CLS] and [SEP] included).
        while len(ids) > tokens and " " in text:
            text = text.rsplit(" ", 1)[0]
            ids = tokenizer.encode(text).ids
        out.append(text)
    return out


def write_trace_file(path: Path, count: int) -> Path:
    """A gzip JSONL of ``count`` traces, variations of the realistic ones with unique ids."""
    base = realistic_traces()
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        for i in range(count):
            trace = copy.deepcopy(base[i % len(base)])
            trace["id"] = f"kp:trace:bench-{i}"
            trace["task"]["objective"] = f"{trace['task']['objective']} (case {i})"
            handle.write(json.dumps(trace, separators=(",", ":")) + "\n")
    return path


def tokenizer() -> Any:
    """The model's tokenizer as the embedders use it (256-token truncation, no padding)."""
    from knowledgepulse.embedding._minilm import MiniLMTokenizer, require_model_dir

    return MiniLMTokenizer(require_model_dir(None, "The benchmark tokenizer"))


def traces_with_objectives(texts: list[str], prefix: str) -> list[Any]:
    """One minimal validated trace per text, the text as its objective (its embedded text)."""
    import knowledgepulse as kp

    template = example_traces()[0]
    return [
        kp.ReasoningTrace.model_validate(
            {
                **template,
                "id": f"kp:trace:{prefix}{i}",
                "task": {"objective": text},
                "steps": [{"step_id": 0, "type": "thought", "content": ""}],
            }
        )
        for i, text in enumerate(texts)
    ]
