from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import knowledgepulse as kp
from _helpers import HashingEmbedder, make_trace
from knowledgepulse.scoring._formulas import STEP_CAP, TraceFacts, complexity

THOUGHT = {"type": "thought", "content": "think"}
OBS = {"type": "observation", "content": "saw"}


def tool(name: str, kind: str = "tool_call") -> dict[str, Any]:
    return {"type": kind, "tool": {"name": name}, "input": {}}


def score(trace: dict[str, Any], **kwargs: Any) -> kp.ValueScore:
    return kp.Scorer(embedder=None, **kwargs).score(trace)


def test_worked_example_scores_0_66875(worked_example: dict[str, Any]) -> None:
    result = score(worked_example)
    assert result.value == 0.66875
    assert result.complexity == pytest.approx(0.425)
    assert result.novelty == 0.5
    assert result.tool_diversity == 1.0
    assert result.outcome == pytest.approx(0.95)
    assert result.profile == "default"
    assert result.rules == []
    assert result.novelty_source == "no_embedder"
    assert result.trace_id == worked_example["id"]


def test_evaluate_value_module_level(worked_example: dict[str, Any]) -> None:
    assert kp.evaluate_value(worked_example) == 0.66875
    trace = kp.ReasoningTrace.model_validate(worked_example)
    assert kp.evaluate_value(trace) == 0.66875


def test_evaluate_value_async(worked_example: dict[str, Any]) -> None:
    assert asyncio.run(kp.evaluate_value_async(worked_example)) == 0.66875


@pytest.mark.parametrize(
    ("domain", "expected"),
    [
        ("default", 0.66875),
        ("finance", 0.7375),
        ("code", 0.725),
        ("medical", 0.78625),
        ("customer_service", 0.72),
        ("code-review", 0.66875),
        ("Code", 0.66875),  # exact, case-sensitive match; otherwise default
        ("FINANCE", 0.66875),
    ],
)
def test_every_profile(domain: str, expected: float) -> None:
    result = score(make_trace(domain=domain))
    assert result.value == expected
    assert result.profile == (domain if domain in kp.BUILTIN_PROFILES else "default")


def test_single_thought_sets_0_1() -> None:
    result = score(make_trace([THOUGHT], confidence=1.0))
    assert result.value == 0.1
    assert result.rules == ["single_thought"]
    assert result.complexity == pytest.approx(0.135)


def test_single_thought_carrying_a_tool_then_penalised() -> None:
    result = score(make_trace([{"type": "thought", "tool": {"name": "search"}}]))
    assert result.rules == ["single_thought", "single_tool_penalty"]
    assert result.value == 0.0


def test_single_non_thought_step_is_not_rule_1() -> None:
    result = score(make_trace([OBS], confidence=1.0))
    assert "single_thought" not in result.rules


RECOVERY_STEPS = [
    THOUGHT,
    tool("git"),
    tool("pytest", "error_recovery"),
    tool("ruff", "error_recovery"),
    {"type": "error_recovery", "content": "retry"},
    OBS,
]


def test_error_recovery_bonus() -> None:
    result = score(make_trace(RECOVERY_STEPS, confidence=0.8))
    assert result.complexity == pytest.approx(0.86)
    assert result.tool_diversity == 1.0
    assert result.value == pytest.approx(0.84, abs=1e-12)
    assert result.rules == ["error_recovery_bonus"]


def test_error_recovery_bonus_needs_success() -> None:
    result = score(make_trace(RECOVERY_STEPS, confidence=0.8, success=False))
    assert result.outcome == pytest.approx(0.24)
    assert result.value == pytest.approx(0.6, abs=1e-12)
    assert result.rules == []


def test_error_recovery_bonus_needs_more_than_two() -> None:
    steps = [s for s in RECOVERY_STEPS if s.get("content") != "retry"]
    result = score(make_trace(steps, confidence=0.8))
    assert "error_recovery_bonus" not in result.rules


def test_single_tool_penalty() -> None:
    result = score(make_trace([THOUGHT, tool("grep"), OBS, tool("grep"), OBS]))
    assert result.tool_diversity == pytest.approx(0.6)
    assert result.value == pytest.approx(0.50875, abs=1e-12)
    assert result.rules == ["single_tool_penalty"]


def test_no_tools_no_penalty() -> None:
    result = score(make_trace([THOUGHT, OBS, THOUGHT]))
    assert result.tool_diversity == 0.0
    assert result.rules == []


def test_bonus_and_penalty_together() -> None:
    steps = [
        THOUGHT,
        tool("shell"),
        tool("shell", "error_recovery"),
        tool("shell", "error_recovery"),
        tool("shell", "error_recovery"),
        OBS,
    ]
    result = score(make_trace(steps, confidence=0.8))
    assert result.rules == ["error_recovery_bonus", "single_tool_penalty"]
    assert result.value == pytest.approx(0.665, abs=1e-12)


def test_tools_on_any_step_type_count() -> None:
    result = score(make_trace([tool("a", "thought"), tool("b", "observation"), OBS]))
    assert result.tool_diversity == 1.0
    assert result.rules == []


def test_clamped_below_at_zero() -> None:
    profiles = {"outcome_only": kp.DomainProfile("outcome_only", 0.0, 0.0, 0.0, 1.0)}
    trace = make_trace([tool("a")], domain="outcome_only", success=False, confidence=0.05)
    result = score(trace, profiles=profiles)
    assert result.rules == ["single_tool_penalty"]
    assert result.value == 0.0


def test_clamped_above_at_one() -> None:
    profiles = {"outcome_only": kp.DomainProfile("outcome_only", 0.0, 0.0, 0.0, 1.0)}
    trace = make_trace(RECOVERY_STEPS, domain="outcome_only", confidence=1.0)
    result = score(trace, profiles=profiles)
    assert result.rules == ["error_recovery_bonus"]
    assert result.value == 1.0


@pytest.mark.parametrize(("steps", "expected"), [(1, 0.135), (10, 0.225), (20, 0.325), (40, 0.325)])
def test_step_count_term_capped_at_20(steps: int, expected: float) -> None:
    result = score(make_trace([THOUGHT] * steps))
    assert result.complexity == pytest.approx(expected)


def test_complexity_never_above_one() -> None:
    steps = [THOUGHT, tool("a"), OBS, {"type": "error_recovery"}] * 10
    facts = TraceFacts.of(kp.ReasoningTrace.model_validate(make_trace(steps)))
    assert complexity(facts) == 1.0
    assert STEP_CAP == 20


def test_explanation_names_parts(worked_example: dict[str, Any]) -> None:
    text = score(worked_example).explanation
    assert "0.66875" in text and "'default'" in text and "no embedder" in text
    single = score(make_trace([THOUGHT]))
    assert "rules fired: single_thought" in single.explanation


def test_score_record_of_a_value_score(worked_example: dict[str, Any]) -> None:
    # The score line is the ScoreRecord; ValueScore has no renaming to_dict of its own.
    from knowledgepulse.records import ScoreRecord

    data = ScoreRecord.of(score(worked_example), kp.parse_trace(worked_example)).to_dict()
    assert data["score"] == 0.66875
    assert data["profile"] == "default"
    assert data["novelty_source"] == "no_embedder"
    assert set(data) >= {"id", "complexity", "novelty", "tool_diversity", "outcome", "rules"}


def test_invalid_trace_raises_validation_error(worked_example: dict[str, Any]) -> None:
    worked_example["steps"][0]["type"] = "plan"
    with pytest.raises(kp.TraceValidationError, match=r"steps\[0\]\.type"):
        score(worked_example)


# -- novelty ---------------------------------------------------------------------------------


def test_novelty_with_embedder(hashing_embedder: HashingEmbedder) -> None:
    scorer = kp.Scorer(embedder=hashing_embedder)
    first = scorer.score(make_trace())
    assert (first.novelty, first.novelty_source) == (0.5, "empty_cache")
    again = scorer.score(make_trace(trace_id="kp:trace:again"))
    assert again.novelty_source == "embedding"
    assert again.novelty == pytest.approx(0.0, abs=1e-6)
    other = scorer.score(
        make_trace(
            [{"type": "thought", "content": "refund order 991 shipping label"}],
            objective="Customer wants a refund for a damaged blender",
        )
    )
    assert other.novelty > 0.9
    assert scorer.cache.size == 3  # type: ignore[attr-defined]


def test_no_embedder_never_fills_the_cache(worked_example: dict[str, Any]) -> None:
    scorer = kp.Scorer(embedder=None)
    for _ in range(3):
        assert scorer.score(worked_example).novelty == 0.5
    assert scorer.embedder is None


def test_env_disables_auto_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KNOWLEDGEPULSE_EMBEDDER", "none")
    assert kp.Scorer().embedder is None


def test_auto_falls_back_and_says_so_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import logging
    import warnings

    from knowledgepulse.embedding import _onnx, _select

    monkeypatch.delenv("KNOWLEDGEPULSE_EMBEDDER")
    monkeypatch.setattr(_onnx, "_RUNTIME_MODULES", ("no_such_module_kp",))
    monkeypatch.setattr(_select, "_warned", False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said as a log record only, not also as a warning
        with caplog.at_level(logging.WARNING, logger="knowledgepulse"):
            assert kp.Scorer().embedder is None
            assert kp.Scorer().embedder is None  # said once, not again
    fallbacks = [r for r in caplog.records if "novelty falls back to 0.5" in r.getMessage()]
    assert len(fallbacks) == 1


def test_bad_embedder_argument() -> None:
    with pytest.raises(TypeError, match="embedder must be"):
        _ = kp.Scorer(embedder="minilm").embedder  # type: ignore[arg-type]


def test_score_many_equals_score_one_by_one(hashing_embedder: HashingEmbedder) -> None:
    texts = ["alpha beta", "alpha beta", "gamma", "delta alpha", "gamma", "epsilon zeta"] * 3
    traces = [
        make_trace(
            [{"type": "thought", "content": t}], objective=f"task {i % 4}", trace_id=f"kp:trace:{i}"
        )
        for i, t in enumerate(texts)
    ]
    cache_a = kp.VectorCache(max_elements=4)
    cache_b = kp.VectorCache(max_elements=4)
    batched = kp.Scorer(embedder=hashing_embedder, cache=cache_a, batch_size=7).score_many(traces)
    sequential = [kp.Scorer(embedder=HashingEmbedder(), cache=cache_b).score(t) for t in traces]
    assert [r.trace_id for r in batched] == [t["id"] for t in traces]
    for got, want in zip(batched, sequential):
        assert got.novelty == pytest.approx(want.novelty, abs=1e-6)
        assert got.novelty_source == want.novelty_source
        assert got.value == pytest.approx(want.value, abs=1e-6)


# -- properties ------------------------------------------------------------------------------

step_strategy = st.fixed_dictionaries(
    {"type": st.sampled_from(["thought", "tool_call", "observation", "error_recovery"])},
    optional={
        "content": st.text(max_size=30),
        "tool": st.fixed_dictionaries({"name": st.sampled_from(["a", "b", "c", "d", "e"])}),
    },
)


@settings(max_examples=300, deadline=None)
@given(
    steps=st.lists(step_strategy, min_size=1, max_size=45),
    domain=st.sampled_from([*kp.BUILTIN_PROFILES, "other", "Finance"]),
    success=st.booleans(),
    confidence=st.floats(min_value=0.0, max_value=1.0),
)
def test_value_always_in_unit_interval(
    steps: list[dict[str, Any]], domain: str, success: bool, confidence: float
) -> None:
    result = score(make_trace(steps, domain=domain, success=success, confidence=confidence))
    for part in (
        result.value,
        result.complexity,
        result.novelty,
        result.tool_diversity,
        result.outcome,
    ):
        assert not math.isnan(part)
        assert 0.0 <= part <= 1.0
    # The formula, independently.
    types = {s["type"] for s in steps}
    recoveries = sum(s["type"] == "error_recovery" for s in steps)
    tools = {s["tool"]["name"] for s in steps if "tool" in s}
    c = min(1, len(types) / 4 * 0.5 + (0.3 if recoveries else 0) + min(len(steps), 20) / 20 * 0.2)
    d = min(1, len(tools) / max(1, len(steps)) * 3)
    o = confidence * (1.0 if success else 0.3)
    w = kp.BUILTIN_PROFILES.get(domain, kp.BUILTIN_PROFILES["default"]).weights
    value = c * w[0] + 0.5 * w[1] + d * w[2] + o * w[3]
    if len(steps) == 1 and steps[0]["type"] == "thought":
        value = 0.1
    if recoveries > 2 and success:
        value = min(1, value + 0.1)
    if len(tools) <= 1 and tools:
        value = max(0, value - 0.1)
    assert result.value == pytest.approx(value, abs=1e-9)


class NaNEmbedder:
    name = "nan"
    dimensions = 4

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return np.full((len(texts), 4), np.nan, dtype=np.float32)


def test_never_nan_even_with_a_broken_embedder() -> None:
    scorer = kp.Scorer(embedder=NaNEmbedder(), cache=kp.VectorCache(dimensions=4))
    for i in range(3):
        result = scorer.score(make_trace(trace_id=f"kp:trace:{i}"))
        assert not math.isnan(result.value)
        assert 0.0 <= result.novelty <= 1.0


def test_score_record_leaves_out_unset_gate_fields(worked_example: dict[str, Any]) -> None:
    from knowledgepulse.records import ScoreRecord

    trace = kp.parse_trace(worked_example)
    plain = ScoreRecord.of(score(worked_example), trace).to_dict()
    assert {"threshold", "passed", "index"}.isdisjoint(plain)
    gated = ScoreRecord.of(score(worked_example), trace, threshold=0.5, index=3).to_dict()
    assert (gated["threshold"], gated["passed"], gated["index"]) == (0.5, True, 3)
