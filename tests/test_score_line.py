"""The score line ``kp score`` writes is built directly; it must equal the validated record,
and ``ValueScore.from_record`` must read back any score from it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

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


# Any score a scorer can produce: dimensions and weights in [0, 1], the value rounded as
# compose rounds it, the weighted sum recomputed as from_record recomputes it (the line does
# not hold it), and every optional part present or absent.
_unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
_names = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)


@st.composite
def value_scores(draw: st.DrawFn) -> kp.ValueScore:
    dims = draw(st.tuples(_unit, _unit, _unit, _unit))
    weights = draw(st.tuples(_unit, _unit, _unit, _unit))
    nearest = draw(
        st.none() | st.builds(Nearest, st.none() | _names, st.floats(min_value=-1.0, max_value=1.0))
    )
    return kp.ValueScore(
        value=draw(_unit),
        complexity=dims[0],
        novelty=dims[1],
        tool_diversity=dims[2],
        outcome=dims[3],
        profile=draw(_names),
        weights=weights,
        rules=draw(st.lists(st.sampled_from(["single_thought", "single_tool_penalty"]))),
        novelty_source=draw(st.sampled_from(["embedding", "empty_cache", "no_embedder"])),
        trace_id=draw(_names),
        weighted_sum=sum(d * w for d, w in zip(dims, weights)),
        nearest=nearest,
        stored=draw(st.sampled_from([None, "added", "already_stored", "not_added"])),
    )


_TRACES = [trace for _, trace in scored()]


@settings(max_examples=300, deadline=None)
@given(
    score=value_scores(),
    trace_at=st.integers(min_value=0, max_value=len(_TRACES) - 1),
    place=st.sampled_from(PLACES),
)
def test_any_score_survives_its_line(
    score: kp.ValueScore, trace_at: int, place: dict[str, Any]
) -> None:
    trace = _TRACES[trace_at]
    score = replace(score, trace_id=trace.id)
    line = ScoreRecord.of(score, trace, **place).to_json()
    assert ScoreRecord.data_of(score, trace, **place) == json.loads(line)
    back = kp.ValueScore.from_record(json.loads(line))
    assert back == score
    assert back.explanation == score.explanation
    assert kp.ValueScore.from_record(ScoreRecord.model_validate_json(line)) == score


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("score", 1.5, "score"),
        ("weights", {"complexity": 1, "novelty": 0, "tool_diversity": 0}, "weights.outcome"),
        ("novelty_source", "guess", "novelty_source"),
        ("nearest", {"id": "x"}, "nearest.similarity"),
    ],
)
def test_a_broken_line_is_refused_by_field(field: str, value: Any, named: str) -> None:
    score, trace = scored()[0]
    data = {**ScoreRecord.data_of(score, trace), field: value}
    with pytest.raises(ValidationError) as raised:
        kp.ValueScore.from_record(data)
    assert [".".join(map(str, e["loc"])) for e in raised.value.errors()] == [named]
