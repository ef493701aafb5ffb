"""What value scoring says about the tau-bench airline conversations: solved vs unsolved.

    python examples/tau_bench_scores.py [path/to/gpt-4o-airline.json[.gz]]

Imports the 200 conversations (OpenAI format, reward 1.0 = solved), scores them in file order
with one scorer (novelty against the conversations scored before), and compares the groups.
"""

from __future__ import annotations

import gzip
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import knowledgepulse as kp
from knowledgepulse.importers import convert

DEFAULT = Path(__file__).resolve().parent / "tau-bench" / "gpt-4o-airline.json.gz"


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT
    opener: Any = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        records = json.load(handle)
    traces = convert("openai", records, task_domain="customer_service")
    scorer = kp.Scorer()
    scores = scorer.score_many(traces)
    source = "MiniLM" if scorer.embedder is not None else "no embedder (novelty 0.5)"
    print(
        f"{len(traces)} conversations from {path.name}, profile customer_service, novelty: {source}\n"
    )
    header = f"{'group':<10} {'n':>4} {'value':>7} {'complexity':>11} {'novelty':>8} {'tools':>6} {'outcome':>8} {'steps':>6} {'recovery':>9} {'≥ 0.6':>6}"
    print(header)
    print("-" * len(header))
    for name, wanted in (("solved", True), ("unsolved", False), ("all", None)):
        group = [
            (t, s) for t, s in zip(traces, scores) if wanted is None or t.metadata.success is wanted
        ]
        values = [s for _, s in group]
        recovered = sum(any(step.type == "error_recovery" for step in t.steps) for t, _ in group)
        print(
            f"{name:<10} {len(group):>4} {statistics.mean(s.value for s in values):>7.3f} "
            f"{statistics.mean(s.complexity for s in values):>11.3f} "
            f"{statistics.mean(s.novelty for s in values):>8.3f} "
            f"{statistics.mean(s.tool_diversity for s in values):>6.3f} "
            f"{statistics.mean(s.outcome for s in values):>8.3f} "
            f"{statistics.median(len(t.steps) for t, _ in group):>6.0f} "
            f"{recovered / len(group):>9.0%} "
            f"{sum(s.value >= 0.6 for s in values) / len(group):>6.0%}"
        )
    repeats = sum(s.novelty < 0.05 for s in scores)
    print(f"\nnear-repeats (novelty < 0.05): {repeats} of {len(scores)}")
    rules = [rule for s in scores for rule in s.rules]
    for rule in sorted(set(rules)):
        print(f"rule {rule}: fired on {rules.count(rule)} conversations")


if __name__ == "__main__":
    main()
