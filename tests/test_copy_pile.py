"""The copies benchmark's realistic pile (benchmarks/_copy_pile.py): its mix, its truth, the
text of its novel runs, and the scoring of a curation against the truth."""

from __future__ import annotations

import gzip
import json
import random
import sys
from collections import Counter
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import _copy_pile as cp  # noqa: E402
from benchmarks import _corpus  # noqa: E402

pytestmark = pytest.mark.skipif(
    not _corpus.TAU_BENCH.is_file(), reason="the tau-bench conversations are not installed"
)


Pile = list[tuple[dict[str, Any], cp.Truth]]


def truth(*rows: tuple[str, int, str, str, str]) -> dict[str, cp.Truth]:
    return {r[0]: cp.Truth(*r) for r in rows}


# a, b, c: one run (F1) and two copies; d, e: two attempts at task t2 (F2, F3); f, g: F4 and
# its paraphrase; h: F5, alone.
TRUTH = truth(
    ("a", 1, "t1", "novel", "tau-bench"),
    ("b", 1, "t1", "copy", "exact"),
    ("c", 1, "t1", "edit", "truncation"),
    ("d", 2, "t2", "novel", "tau-bench"),
    ("e", 3, "t2", "rerun", "tau-bench"),
    ("f", 4, "t4", "novel", "synthetic"),
    ("g", 4, "t4", "paraphrase", ""),
    ("h", 5, "t5", "novel", "synthetic"),
)
GROUPS: list[str | dict[str, Any]] = [
    # a keeps its copies and h (another run); d keeps e (another attempt at its task)
    '{"schema":"knowledgepulse.groups/1","kept":"a","relation":"near_copy","duplicates":['
    '{"id":"b","similarity":1.0,"value":0.5,"relation":"exact"},'
    '{"id":"c","similarity":0.8,"value":0.5,"relation":"near_copy"},'
    '{"id":"h","similarity":0.6,"value":0.5,"relation":"near_copy"}],"reason":"r"}',
    {"kept": "d", "duplicates": [{"id": "e", "similarity": 0.7}], "reason": "r"},
]


def test_measure_curation_counts_pairs_lost_families_and_redundant_kept() -> None:
    score = cp.measure_curation(TRUTH, ["a", "d", "f", "g"], GROUPS)
    # one-family pairs: ab ac bc fg; grouped: 6 in {a,b,c,h} + de, of which ab ac bc are right
    assert (score.overall.truth_pairs, score.overall.grouped_pairs) == (4, 7)
    assert score.overall.correct_pairs == 3
    assert score.overall.precision == 3 / 7 and score.overall.recall == 3 / 4
    assert Fraction(score.overall.f1).limit_denominator(100) == Fraction(6, 11)
    # F5 (h, under a) and F3 (e, under d) have nothing kept; f and g are both kept
    assert (score.families, score.families_lost, score.families_without_kept) == (5, 2, 2)
    assert (score.kept, score.redundant_kept, score.redundant_share) == (4, 1, 1 / 8)
    assert (score.rerun_pairs, score.rerun_pairs_grouped) == (1, 1)
    novel = score.per_kind["novel"]  # pairs with a, d, f or h in them
    assert (novel.traces, novel.truth_pairs, novel.grouped_pairs, novel.correct_pairs) == (
        4,
        3,
        6,
        2,
    )
    exact = score.per_kind["copy:exact"]
    assert (exact.truth_pairs, exact.grouped_pairs, exact.correct_pairs) == (2, 3, 2)
    paraphrase = score.per_kind["paraphrase"]  # fg, never grouped
    assert (paraphrase.precision, paraphrase.recall) == (1.0, 0.0)
    # found against their family's run: b and c (with a), not g (f alone)
    assert (exact.with_source, exact.found) == (1, 1)
    assert score.per_kind["edit:truncation"].found_share == 1.0
    assert (paraphrase.found_share, novel.found_share) == (0.0, None)
    rerun = score.per_kind["rerun"]  # de grouped, no pair of its own family
    assert (rerun.precision, rerun.recall, rerun.f1) == (0.0, 1.0, 0.0)
    assert set(score.per_kind) == {
        "novel",
        "rerun",
        "copy:exact",
        "edit:truncation",
        "paraphrase",
    }


def test_measure_curation_nothing_grouped_and_bad_ids() -> None:
    score = cp.measure_curation(TRUTH, list(TRUTH), [])
    assert (score.overall.precision, score.overall.recall) == (1.0, 0.0)
    assert (score.families_lost, score.redundant_kept) == (0, 3)
    with pytest.raises(ValueError, match="groups line 1: 'zz' is not in the pile's truth"):
        cp.measure_curation(TRUTH, ["a"], ['{"kept":"a","duplicates":[{"id":"zz"}]}'])
    with pytest.raises(ValueError, match="groups line 2: 'b' is already in a group"):
        cp.measure_curation(TRUTH, [], ['{"kept":"a","duplicates":[{"id":"b"}]}', {"kept": "b"}])
    with pytest.raises(ValueError, match="kept trace 'q' is not in the pile's truth"):
        cp.measure_curation(TRUTH, ["q"], [])


@pytest.fixture(scope="module")
def pile() -> Pile:
    return list(cp.realistic_pile(1_500, 0))


def test_pile_mix_is_exact_deterministic_and_valid(pile: Pile) -> None:
    import knowledgepulse as kp

    kinds = Counter(t.kind for _, t in pile)
    # 30 blocks of 50: 23 novel, 4 re-runs, 10 copies, 9 edits, 4 paraphrases
    assert kinds == {"novel": 690, "rerun": 120, "copy": 300, "edit": 270, "paraphrase": 120}
    assert {t.detail for _, t in pile if t.kind == "copy"} == set(cp.TRIVIAL)
    assert {t.detail for _, t in pile if t.kind == "edit"} == set(cp.EDITS)
    assert len({trace["id"] for trace, _ in pile}) == len(pile)
    assert all(trace["id"] == t.id for trace, t in pile)
    # the first 50 runs are the tau-bench conversations of attempt 0, then synthetic ones
    originals = [t for _, t in pile if t.kind == "novel"]
    assert [t.detail for t in originals[:51]] == ["tau-bench"] * 50 + ["synthetic"]
    seen_families: set[int] = set()
    seen_tasks: set[str] = set()
    for _, t in pile:
        if t.kind in ("novel", "rerun"):  # a new family; a re-run at a task seen before
            assert t.family == len(seen_families) and (t.task in seen_tasks) == (t.kind == "rerun")
            seen_families.add(t.family)
            seen_tasks.add(t.task)
        else:  # a copy of a run before it
            assert t.family in seen_families
    again = list(cp.realistic_pile(200, 0))
    assert again == pile[:200]
    assert [t for _, t in cp.realistic_pile(200, 1)] != [t for _, t in again]
    for trace, _ in pile[::5]:
        kp.ReasoningTrace.model_validate(trace)


def test_synthetic_runs_differ_from_every_other_family(
    pile: Pile,
) -> None:
    """A synthetic run's word 3-shingles against every trace of another task in the pile:
    (a sample of 25 runs) none reaches a Jaccard of 0.25, so grouping two is a decider's
    error, not the pile's (attempts at one task may share more: they are re-runs)."""
    sets = [cp.shingles(trace) for trace, _ in pile]
    synthetic = [i for i, (_, t) in enumerate(pile) if t.detail == "synthetic"]
    worst = 0.0
    for i in random.Random(5).sample(synthetic, 25):
        for j, (_, other) in enumerate(pile):
            if other.task != pile[i][1].task:
                worst = max(worst, cp.jaccard(sets[i], sets[j]))
    assert 0.1 < worst < 0.25


def test_copies_and_edits_are_what_their_truth_says(pile: Pile) -> None:
    first = {t.family: trace for trace, t in pile if t.kind in ("novel", "rerun")}
    words = cp._WORDS.findall
    checked: Counter[str] = Counter()
    for trace, t in pile:
        if t.kind not in ("copy", "edit"):
            continue
        original = first[t.family]
        same_words = cp.shingles(trace) == cp.shingles(original)
        steps, before = trace["steps"], original["steps"]
        if t.detail in ("exact", "ids", "whitespace"):
            assert same_words
            assert (t.detail == "exact") == ({**trace, "id": ""} == {**original, "id": ""})
        elif t.detail == "timestamps":
            assert trace["metadata"]["created_at"] != original["metadata"]["created_at"]
        elif t.detail == "truncation":
            assert steps == before[: len(steps)] and 2 <= len(steps) < len(before)
        elif t.detail == "dropped_steps":
            assert len(before) - 3 <= len(steps) < len(before)
            assert [s["step_id"] for s in steps] == list(range(len(steps)))
        elif t.detail == "reordered_tool_results":
            assert steps != before and len(steps) == len(before)
            assert Counter(words(cp.copy_text(trace))) == Counter(words(cp.copy_text(original)))
        elif t.detail == "entity_swap":
            assert cp.copy_text(trace) != cp.copy_text(original) and len(steps) == len(before)
        checked[t.detail] += 1
    assert set(checked) == set(cp.TRIVIAL) | set(cp.EDITS)


def test_write_pile_writes_the_pile_and_its_truth(tmp_path: Path) -> None:
    path = tmp_path / "pile.jsonl.gz"
    truth_file = cp.write_pile(path, 120, 3)
    assert truth_file == tmp_path / "pile.truth.jsonl.gz"
    expected = list(cp.realistic_pile(120, 3))
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        assert [json.loads(line) for line in lines] == [trace for trace, _ in expected]
    assert list(cp.read_truth(truth_file).values()) == [t for _, t in expected]
    assert len(cp.read_truth(truth_file, limit=10)) == 10
    with gzip.open(truth_file, "rt", encoding="utf-8") as lines:
        assert json.loads(next(lines))["schema"] == "knowledgepulse.copies-truth/1"


def test_shipped_paraphrases_are_what_the_rules_make() -> None:
    from benchmarks import _paraphrase

    assert _paraphrase.paraphrase("Thank you. I'll check your reservation, please wait.") == (
        "I will look at your booking, kindly wait. Many thanks."
    )
    shipped = _paraphrase.load_paraphrases()
    assert shipped == _paraphrase.make_paraphrases(_corpus.tau_bench_traces())
    assert shipped["made_by"].startswith("rule-based rewording")
    assert len(shipped["conversations"]) == 200


def test_copies_section_scores_semhash_on_the_pile(capsys: pytest.CaptureFixture[str]) -> None:
    """The section's code on a small pile: kp curate not run (no budget), SemHash scored."""
    pytest.importorskip("semhash")
    decisions = cp.bench_copies([100], budget_s=0, minilm_traces=0)
    assert [d.decider for d in decisions][:2] == [
        "kp curate (default), 100",
        "kp curate --similarity 0.3, 100",
    ]
    assert all(d.score is None for d in decisions[:7])
    semhash = decisions[7]
    assert semhash.decider == "SemHash static, cosine ≥ 0.95, 100"
    assert semhash.score is not None and semhash.score.traces == 100
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("SemHash static")]
    assert len(rows) == 1 and rows[0].endswith("MiB")  # its table row, every column filled
    assert "\nper kind (its traces in the largest pile scored): precision / recall" in out


def test_kp_curate_decision_is_read_and_scored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``kp curate`` (whichever is installed) on 12 traces of the pile, through the CLI: every
    trace is kept or grouped, and the decision scores against the truth."""
    from knowledgepulse.embedding import embedder_available

    if not embedder_available():
        pytest.skip("kp curate (whole-trace MiniLM until copies are decided by words) needs it")
    monkeypatch.setenv("KNOWLEDGEPULSE_EMBEDDER", "auto")  # the tests turn it off
    pile_file = tmp_path / "pile.jsonl.gz"
    truth_file = cp.write_pile(pile_file, 12, 0)
    curated = cp.run_kp_curate(pile_file, tmp_path)
    assert not isinstance(curated, str), curated
    seconds, peak, kept, groups = curated
    assert seconds > 0 and peak > 0
    lines = groups.read_text(encoding="utf-8").splitlines()
    grouped = [d["id"] for line in lines for d in json.loads(line)["duplicates"]]
    assert sorted(kept + grouped) == sorted(cp.read_truth(truth_file))
    score = cp.measure_curation(cp.read_truth(truth_file), kept, lines)
    assert score.traces == 12 and score.kept == len(kept)


def test_synthetic_reruns_are_as_alike_as_tau_bench_attempts() -> None:
    """Attempts at one task share the task's data and the user's wishes: synthetic attempts
    (30 tasks x 4, built as the pile builds them) are about as alike as the tau-bench attempts
    at one task (median word 3-shingle Jaccard of their pairs), and far from copies."""
    import itertools
    import statistics

    material = cp._material()
    real = [
        cp.jaccard(cp.shingles(material.conversations[a]), cp.shingles(material.conversations[b]))
        for task in material.tasks
        for a, b in itertools.combinations(
            [material.by_attempt[(task, n)] for n in range(cp.ATTEMPTS)], 2
        )
    ]
    synthetic = []
    for task in range(30):
        base = material.tasks[task % len(material.tasks)]
        runs = [
            cp.shingles(
                material.synthetic(f"t:{task}", n, material.by_attempt[(base, n)], False, "x")
            )
            for n in range(cp.ATTEMPTS)
        ]
        synthetic += [cp.jaccard(a, b) for a, b in itertools.combinations(runs, 2)]
    assert (len(real), round(statistics.median(real), 3)) == (300, 0.279)
    assert len(synthetic) == 180
    assert 0.18 < statistics.median(synthetic) < 0.38
    assert max(synthetic) < 0.8


def test_synthetic_reruns_run_texts_are_as_alike_as_tau_bench_attempts() -> None:
    """On the run text copies are decided on (the copy facet's estimated Jaccard), synthetic
    attempts are as alike as tau-bench's: with a user's turn shared at 0.85 their median was
    0.172 against tau-bench's 0.109 (250 tasks x 4), so at 10^6 some re-runs reached the copy
    threshold (155 of the 410 families lost were re-runs grouped under their task's first
    run)."""
    import itertools
    import statistics

    import knowledgepulse as kp
    from knowledgepulse.copies import COPY_SIMILARITY, copy_facets, estimated_similarity

    material = cp._material()

    def run_similarities(groups: list[list[dict[str, Any]]]) -> list[float]:
        flat = [run for group in groups for run in group]
        signatures = []
        for facet in copy_facets([kp.ReasoningTrace.model_validate(run) for run in flat]):
            assert facet.signature is not None
            signatures.append(facet.signature)
        found, start = [], 0
        for group in groups:
            for a, b in itertools.combinations(range(start, start + len(group)), 2):
                found.append(float(estimated_similarity(signatures[a], signatures[b])))
            start += len(group)
        return found

    real = run_similarities(
        [
            [material.conversations[material.by_attempt[(task, n)]] for n in range(cp.ATTEMPTS)]
            for task in material.tasks
        ]
    )
    synthetic = run_similarities(
        [
            [
                material.synthetic(
                    f"t:{task}", n, material.by_attempt[(material.tasks[task], n)], False, "x"
                )
                for n in range(cp.ATTEMPTS)
            ]
            for task in range(30)
        ]
    )
    # Estimated from MinHash signatures (integer hashing): the same on every machine.
    assert round(statistics.median(real), 3) == 0.109
    assert max(real) < COPY_SIMILARITY
    assert abs(statistics.median(synthetic) - statistics.median(real)) < 0.03
    assert max(synthetic) < COPY_SIMILARITY


def test_synthetic_runs_on_one_short_skeleton_differ() -> None:
    """At 10^6 some 2,300 novel runs share each skeleton; on the shortest (4 units) a run is
    little more than its opening, so an opening kept from the skeleton made them copies of
    each other (pile-0764271 and pile-0270683: Jaccard 0.505). 150 runs of different tasks on
    it: no pair reaches 0.25 (with the skeleton's opening kept: 79 pairs did, up to 0.363)."""
    import itertools

    material = cp._material()
    shortest = min(range(len(material.units)), key=lambda c: len(material.units[c]))
    assert len(material.units[shortest]) == 4
    attempt = next(a for (_, a), c in material.by_attempt.items() if c == shortest)
    runs = [material.synthetic(f"s:{k}", attempt, shortest, False, "x") for k in range(150)]
    sets = [cp.shingles(run) for run in runs]
    worst = max(cp.jaccard(a, b) for a, b in itertools.combinations(sets, 2))
    assert 0.1 < worst < 0.25
    openings = {run["task"]["objective"] for run in runs}
    assert len(openings) > 140  # drawn: a few repeat (their other messages differ)
    skeleton_opening = material.conversations[shortest]["task"]["objective"]
    assert len(cp.sentences(next(iter(openings)))) == len(cp.sentences(skeleton_opening))


def test_cities_and_spoken_dates_are_swapped_alike_in_every_message() -> None:
    material = cp._material()
    swapper = cp._Swapper(material, "seed")
    text = "Fly me from New York to Seattle on May 20th, back May 31."
    swapped = swapper.text(text)
    assert "New York" not in swapped or "Seattle" not in swapped
    again = cp._Swapper(material, "seed").text("New York, May 20th")
    assert swapped.startswith(f"Fly me from {again.split(',')[0]} to ")
    assert again.split(", ")[1] in swapped  # the same date moved the same way
    moved = [w for w in swapped.replace(",", "").split() if w in cp.MONTHS]
    assert len(moved) == 2
    names_only = cp._Swapper(material, "seed", names_only=True).text(text)
    assert names_only == text  # an entity swap edit swaps names only
