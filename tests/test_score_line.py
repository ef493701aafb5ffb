"""The score line ``kp score`` writes is built directly; it must equal the validated record."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import knowledgepulse as kp
from knowledgepulse.memory._cache import Nearest
from knowledgepulse.records import ScoreRecord

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "traces.jsonl"


def scored() -> list[tuple[kp.ValueScore, kp.ReasoningTrace]]:
    traces = [
        kp.ReasoningTrace.model_validate_json(line)
        for line in EXAMPLES.read_bytes().splitlines()
        if line.strip()
    ]
    return list(zip(kp.Scorer(embedder=None).score_many(traces), traces))


VARIANTS: list[dict[str, Any]] = [
    {},
    {"nearest": Nearest("kp:trace:other", 0.91), "novelty_source": "embedding"},
    {"nearest": Nearest(None, 1)},
    {"stored": "already_stored"},
    {"weights": (1, 0, 0, 0)},
    {"value": 1, "rules": ("single_thought",)},
]
PLACES: list[dict[str, Any]] = [
    {},
    {"source": "traces.jsonl", "line": 17},
    {"source": "<stdin>", "line": 3, "index": 0},
    {"threshold": 0.5},
    {"threshold": 1, "source": "a.json", "line": 1, "index": 4},
]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("place", PLACES)
def test_a_line_built_directly_equals_the_validated_record(
    variant: dict[str, Any], place: dict[str, Any]
) -> None:
    for score, trace in scored():
        score = replace(score, **variant)
        validated = ScoreRecord.of(score, trace, **place)
        direct = ScoreRecord.data_of(score, trace, **place)
        assert direct == validated.to_dict()
        assert json.dumps(direct, ensure_ascii=False, separators=(",", ":")) == validated.to_json()
        assert ScoreRecord.model_validate(direct) == validated
