"""ScoreSummary: the score distribution ``kp score`` prints and the HTML report draws."""

from __future__ import annotations

import pytest

from _helpers import approx_float
from knowledgepulse.records import ScoreRecord, Weights
from knowledgepulse.reporting import DomainStats, ScoreSummary, score_bin


@pytest.mark.parametrize("bins", [10, 20])
def test_every_edge_starts_its_bin(bins: int) -> None:
    assert [score_bin(i / bins, bins) for i in range(bins + 1)] == [*range(bins), bins - 1]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0.0, 0),
        (0.09999, 0),
        (0.1, 1),
        (0.6999999, 6),
        (0.7, 7),
        (0.25 + 0.25 + 0.2, 7),
        (0.1 + 0.2 + 0.4, 7),
        (0.35 + 0.05, 4),  # 0.39999999999999997
        (0.15 + 0.2 + 0.05, 4),
        (0.99, 9),
        (1.0, 9),
    ],
)
def test_score_bin_of_tenths(value: float, expected: int) -> None:
    assert score_bin(value, 10) == expected


def sample(threshold: float | None = 0.6) -> ScoreSummary:
    summary = ScoreSummary(threshold)
    for value, domain in [
        (0.7, "finance"),
        (0.35, "code"),
        (0.65, "code"),
        (1.0, "medical"),
        (0.1, "finance"),
        (0.6, "code"),
    ]:
        summary.add(value, domain)
    return summary


def test_figures() -> None:
    summary = sample()
    assert summary.count == 6
    assert (summary.minimum, summary.maximum) == (0.1, 1.0)
    assert summary.median == pytest.approx(0.625)
    assert summary.mean == pytest.approx(3.4 / 6)
    assert summary.passed == 4  # 0.7, 0.65, 1.0 and 0.6 are at or above 0.6
    assert summary.all_judged
    assert summary.histogram() == [0, 1, 0, 1, 0, 0, 2, 1, 0, 1]
    assert summary.passed_histogram() == [0, 0, 0, 0, 0, 0, 2, 1, 0, 1]
    assert summary.bin_edges() == [i / 10 for i in range(11)]
    assert summary.domains() == [
        DomainStats("code", 3, approx_float(1.6 / 3), 2),
        DomainStats("finance", 2, approx_float(0.4), 1),
        DomainStats("medical", 1, 1.0, 1),
    ]


def test_passed_flags_without_a_threshold() -> None:
    summary = ScoreSummary()
    summary.add(0.9, "code", passed=True)
    summary.add(0.2, "code")
    assert (summary.passed, summary.all_judged) == (1, False)
    summary.add(0.3, "code", passed=False)
    assert summary.all_judged is False  # the second trace was never judged


def test_add_record_uses_its_flag_unless_the_summary_has_a_threshold() -> None:
    record = ScoreRecord(
        id="kp:trace:x",
        score=0.5,
        complexity=0.5,
        novelty=0.5,
        tool_diversity=0.5,
        outcome=0.5,
        profile="default",
        weights=Weights(complexity=0.25, novelty=0.25, tool_diversity=0.25, outcome=0.25),
        novelty_source="no_embedder",
        domain="legal",
        success=True,
        threshold=0.4,
        passed=True,
    )
    flagged = ScoreSummary()
    flagged.add_record(record)
    assert (flagged.passed, flagged.all_judged) == (1, True)
    stricter = ScoreSummary(0.6)
    stricter.add_record(record)
    assert (stricter.passed, stricter.domains()) == (0, [DomainStats("legal", 1, 0.5, 0)])


def test_empty() -> None:
    summary = ScoreSummary()
    assert summary.render_text() == ""
    assert summary.histogram() == [0] * 10
    with pytest.raises(ValueError, match="no scores"):
        summary.median  # noqa: B018


def test_terminal_text() -> None:
    assert sample().render_text() == (
        "traces scored: 6   score min 0.100  median 0.625  mean 0.567  max 1.000\n"
        "  0.0–0.1 │ 0\n"
        "  0.1–0.2 │████████████████████ 1\n"
        "  0.2–0.3 │ 0\n"
        "  0.3–0.4 │████████████████████ 1\n"
        "  0.4–0.5 │ 0\n"
        "  0.5–0.6 │ 0\n"
        "  0.6–0.7 │████████████████████████████████████████ 2 ◀ threshold\n"
        "  0.7–0.8 │████████████████████ 1\n"
        "  0.8–0.9 │ 0\n"
        "  0.9–1.0 │████████████████████ 1\n"
        "per domain                 \n"
        "domain   traces  mean score\n"
        "code          3       0.533\n"
        "finance       2       0.400\n"
        "medical       1       1.000\n"
        "passed threshold 0.6: 4 of 6 (67%)\n"
    )


def test_terminal_text_counts_a_summed_edge_score_in_the_bin_above() -> None:
    summary = ScoreSummary()
    summary.add(0.35 + 0.05, "code")  # 0.39999999999999997, meant as 0.4
    lines = summary.render_text().splitlines()
    assert lines[4:6] == ["  0.3–0.4 │ 0", "  0.4–0.5 │████████████████████████████████████████ 1"]


def test_domain_names_are_not_markup() -> None:
    summary = ScoreSummary()
    summary.add(0.5, "[bold]ops[/bold]")
    assert "[bold]ops[/bold]       1       0.500" in summary.render_text()


def test_finer_bins_label_with_two_decimals() -> None:
    summary = ScoreSummary(bins=20)
    summary.add(0.7, "code")
    assert "  0.70–0.75 │████████████████████████████████████████ 1" in summary.render_text()
    with pytest.raises(ValueError, match="bins"):
        ScoreSummary(bins=0)


def test_novelty_is_reported_and_a_crowded_end_warned_of() -> None:
    summary = ScoreSummary(threshold=0.6)
    for k in range(10):
        summary.add(0.5, "d", novelty=0.05 if k < 7 else 0.4)
    summary.add(0.5, "d")  # no embedder: no novelty of its own
    assert summary.novelty_lines() == [
        "novelty (vs traces seen before, 10 traces): min 0.050  median 0.050  max 0.400",
        "warning: novelty ≤ 0.1 for 7 of 10 traces (70%): nearly every trace repeats one seen "
        "before, so novelty hardly tells them apart and a threshold on value weighs the other "
        "dimensions (docs/scoring.md#a-threshold-you-can-trust)",
    ]
    new = ScoreSummary()
    for k in range(10):
        new.add(0.5, "d", novelty=1.0 if k < 8 else 0.3)
    assert new.novelty_lines()[1].startswith(
        "warning: novelty ≥ 0.9 for 8 of 10 traces (80%): nearly every trace is a task not seen "
        "before, so"
    )
    assert "novelty (vs traces seen before" in summary.render_text(width=200)
    spread = ScoreSummary()
    for k in range(10):
        spread.add(0.5, "d", novelty=k / 10)
    assert len(spread.novelty_lines()) == 1
    assert ScoreSummary().novelty_lines() == []
