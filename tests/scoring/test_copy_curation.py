"""kp curate by copies (the default): groups of copies of one run, the best of each kept,
order-free, no embedder; the same decision against a knowledge base."""

from __future__ import annotations

import copy
import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import knowledgepulse as kp
from _helpers import TAU_BENCH, load_tau_bench
from knowledgepulse.cli import main
from knowledgepulse.copies import COPY_SIMILARITY, copy_facets, estimated_similarity
from knowledgepulse.importers import from_openai
from knowledgepulse.scoring._copy_curation import curate_copies


def tau_dicts(limit: int | None = None) -> list[dict[str, Any]]:
    records = load_tau_bench()[:limit]
    return [t.to_dict() for record in records for t in from_openai(record)]


def edited(trace: dict[str, Any], k: int, rng: random.Random) -> dict[str, Any]:
    """A copy: 1-4 % of the words of each step replaced, one step dropped in a third."""
    trace = copy.deepcopy(trace)
    trace["id"] = f"{trace['id']}:copy-{k}"
    rate = rng.uniform(0.01, 0.04)
    for step in trace["steps"]:
        if step.get("content"):
            step["content"] = " ".join(
                f"zz{rng.randrange(10**6)}" if rng.random() < rate else word
                for word in step["content"].split(" ")
            )
    if len(trace["steps"]) > 2 and rng.random() < 1 / 3:
        del trace["steps"][rng.randrange(1, len(trace["steps"]))]
        for i, step in enumerate(trace["steps"]):
            step["step_id"] = i
    return trace


def family(trace_id: str) -> str:
    return trace_id.split(":copy-")[0]


def pile(conversations: int = 40, copies: int = 60) -> list[dict[str, Any]]:
    base = tau_dicts(conversations)
    rng = random.Random(7)
    return base + [edited(base[k % len(base)], k, rng) for k in range(copies)]


def test_every_conversation_is_kept_and_no_copy_is_missed() -> None:
    traces = pile()
    result = curate_copies(traces)
    kept = [t.id for t in result.kept]
    # One trace per conversation: every family kept once, no other.
    assert sorted(family(i) for i in kept) == sorted(t["id"] for t in traces[:40])
    assert result.dropped == 60
    for group in result.groups:
        assert group.relation == "near_copy"
        for member in group.duplicates:
            assert family(member.id) == family(group.kept)
            assert member.relation == "near_copy"
            assert member.similarity >= COPY_SIMILARITY
    # Every member is a copy of the kept trace itself (no chain through another member).
    facets = {
        t.id: f
        for t, f in zip(map(kp.parse_trace, traces), copy_facets(map(kp.parse_trace, traces)))
    }
    for group in result.groups:
        for member in group.duplicates:
            found = estimated_similarity(facets[group.kept].signature, facets[member.id].signature)  # type: ignore[arg-type]
            assert found == pytest.approx(member.similarity, abs=1e-6)


def test_tau_bench_keeps_all_200_conversations() -> None:
    result = curate_copies(tau_dicts())
    assert len(result.kept) == 200
    assert result.groups == []


def test_exact_copies_are_named_exact_and_ties_go_to_the_trace_with_most_copies() -> None:
    base = tau_dicts(3)
    twins = []
    for k in range(2):
        twin = copy.deepcopy(base[0])
        twin["id"] = f"{base[0]['id']}:exact-{k}"
        twin["steps"][0]["content"] = "  " + twin["steps"][0]["content"].upper() + " "
        twins.append(twin)
    result = curate_copies(base + twins)
    assert len(result.kept) == 3
    (group,) = result.groups
    assert group.relation == "exact"
    assert [d.relation for d in group.duplicates] == ["exact", "exact"]
    assert [d.similarity for d in group.duplicates] == [1.0, 1.0]
    assert "exact copies" in group.reason
    line = group.record().to_dict()
    assert line["relation"] == "exact" and line["duplicates"][0]["relation"] == "exact"


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False))
def test_the_decision_does_not_depend_on_the_order(rnd: Any) -> None:
    traces = pile(12, 30)
    reference = curate_copies(traces)
    shuffled = list(traces)
    rnd.shuffle(shuffled)
    again = curate_copies(shuffled)
    assert sorted(t.id for t in again.kept) == sorted(t.id for t in reference.kept)
    assert [g.to_dict() for g in again.groups] == [g.to_dict() for g in reference.groups]


def test_kp_curate_decides_copies_without_an_embedder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "pile.jsonl"
    source.write_text("".join(json.dumps(t) + "\n" for t in pile()) + "{broken\n")
    kept, groups = tmp_path / "kept.jsonl", tmp_path / "groups.jsonl"
    code = main(["curate", str(source), "-o", str(kept), "--groups", str(groups)])
    _, err = capsys.readouterr()
    assert code == 1  # the broken line, reported
    assert "records in: 101 = processed 100 + rejected 1" in err
    assert (
        "traces: 100   kept 40   dropped 60 as copies in 40 groups "
        "(exact, or estimated Jaccard ≥ 0.6)" in err
    )
    assert "dropped by relation: near_copy 60" in err
    lines = [json.loads(line) for line in groups.read_text().splitlines()]
    assert len(lines) == 40
    assert {line["relation"] for line in lines} == {"near_copy"}
    assert sum(len(line["duplicates"]) for line in lines) == 60
    assert len(kept.read_text().splitlines()) == 40
    assert not (tmp_path / ".kept.jsonl.kp-curate").exists()  # the work files are gone


def test_kp_curate_on_tau_bench_keeps_every_conversation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kept, groups = tmp_path / "kept.jsonl", tmp_path / "groups.jsonl"
    argv = ["curate", "--from", "openai", str(TAU_BENCH), "-o", str(kept), "--groups", str(groups)]
    assert main(argv) == 0
    _, err = capsys.readouterr()
    assert "traces: 200   kept 200   dropped 0 as copies in 0 groups" in err
    assert groups.read_text() == ""


def test_embedder_options_belong_to_by_embedding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["curate", str(TAU_BENCH), "-o", str(tmp_path / "k"), "--groups", str(tmp_path / "g")]
    assert main([*argv, "--first-pass", "static"]) == 2
    assert (
        "--first-pass and --candidate-similarity go with --by embedding" in capsys.readouterr().err
    )


def test_a_copy_of_a_stored_trace_is_dropped_in_its_favour(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from _helpers import HashingEmbedder
    from knowledgepulse.kb import EmbeddingIdentity, open_knowledge_base

    traces = pile(6, 6)
    location = tmp_path / "team.sqlite"
    embedder = HashingEmbedder()
    with open_knowledge_base(location, EmbeddingIdentity.of(embedder)) as base:
        scorer = kp.Scorer(embedder=embedder, memory=base)
        scorer.score_many(traces[:3])  # stored: three conversations
    source = tmp_path / "new.jsonl"
    source.write_text("".join(json.dumps(t) + "\n" for t in traces[3:]))
    kept, groups = tmp_path / "kept.jsonl", tmp_path / "groups.jsonl"
    argv = ["curate", str(source), "--kb", str(location), "-o", str(kept), "--groups", str(groups)]
    assert main(argv) == 0
    lines = [json.loads(line) for line in groups.read_text().splitlines()]
    stored = [line for line in lines if line["reason"].startswith("already in the knowledge base")]
    # The copies of the three stored conversations (copy-0, -1, -2) go to them.
    assert sorted(line["kept"] for line in stored) == sorted(t["id"] for t in traces[:3])
    assert sorted(d["id"] for line in stored for d in line["duplicates"]) == sorted(
        f"{t['id']}:copy-{k}" for k, t in enumerate(traces[:3])
    )
    kept_ids = {json.loads(line)["id"] for line in kept.read_text().splitlines()}
    assert sorted(map(family, kept_ids)) == sorted(t["id"] for t in traces[3:6])


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stopped_run_writes_nothing_and_says_so(tmp_path: Path, sig: int) -> None:
    """Stopped while it reads (standard input held open): the accounting line, exit 128 + N,
    no output file, and the work directory cleared; the next run starts afresh."""
    kept, groups, work = tmp_path / "kept.jsonl", tmp_path / "g.jsonl", tmp_path / "work"
    argv = [sys.executable, "-m", "knowledgepulse", "curate", "-", "-o", str(kept)]
    argv += ["--groups", str(groups), "--work-dir", str(work)]
    process = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL
    )
    assert process.stdin is not None
    for trace in tau_dicts(30):
        process.stdin.write((json.dumps(trace) + "\n").encode())
    process.stdin.flush()
    spool = work / "traces.jsonl"
    deadline = time.monotonic() + 120
    while (not spool.exists() or spool.stat().st_size == 0) and time.monotonic() < deadline:
        assert process.poll() is None
        time.sleep(0.05)
    time.sleep(0.5)  # the lines written so far are read
    process.send_signal(sig)
    _, err_bytes = process.communicate(timeout=60)
    err = err_bytes.decode()
    assert process.returncode == 128 + sig, err
    assert "records in: 30 = processed 0 + rejected 0 + not processed 30" in err
    assert "interrupted before curating: nothing was written" in err
    assert not kept.exists() and not groups.exists()
    assert not work.exists()


def reworded_word(word: str, rng: random.Random) -> str:
    """``word`` replaced by a new word 45 % of the time, unless it names a value (a word with
    a digit: an id, an amount, a date), which a rewording keeps."""
    if any(c.isdigit() for c in word) or rng.random() >= 0.45:
        return word
    return "w" + "".join(rng.choice("bcdfghjklmnpqrstvwxz") for _ in range(6))


def test_a_reworded_copy_with_the_same_steps_is_a_copy() -> None:
    """Its prose reworded (45 % of the words of every message replaced, its values kept), its
    tool calls and results kept: the run text's estimate falls below S, the steps say it is
    the same run."""
    from knowledgepulse.copies import DEFAULT_SCHEME

    base = tau_dicts(8)
    rng = random.Random(5)
    reworded = []
    for trace in base:
        data = copy.deepcopy(trace)
        data["id"] += ":reworded"
        for step in data["steps"]:
            if step.get("content") and not (step["type"] == "observation" and step.get("tool")):
                step["content"] = " ".join(
                    reworded_word(word, rng) for word in step["content"].split(" ")
                )
        reworded.append(data)
    facets = copy_facets(kp.parse_trace(t) for t in base + reworded)
    estimates = [
        float(estimated_similarity(a.signature, b.signature))  # type: ignore[arg-type]
        for a, b in zip(facets[:8], facets[8:])
    ]
    with_steps = [i for i in range(8) if facets[i].steps is not None]
    assert with_steps and all(facets[i].steps == facets[8 + i].steps for i in with_steps)
    result = curate_copies(base + reworded)
    joined = {d.id for g in result.groups for d in g.duplicates} | {g.kept for g in result.groups}
    for i in range(8):
        expected = estimates[i] >= COPY_SIMILARITY or (
            i in with_steps and estimates[i] >= DEFAULT_SCHEME.reworded
        )
        assert (reworded[i]["id"] in joined) == expected, (i, estimates[i])
    # Four of the eight keep ≥ 0.17 of their run text (0.19-0.27); three fall below it
    # (0.12-0.16); one has no tool call and its messages name no value, so no steps to say it
    # is the same run. All are below S: the steps alone joined them.
    assert sum(reworded[i]["id"] in joined for i in range(8)) == 4
    assert max(estimates) < COPY_SIMILARITY


def test_a_short_trace_held_in_runs_of_other_tasks_joins_one_and_drops_none() -> None:
    """A short trace whose words are held in several longer runs that are not copies of one
    another (the opening turns they share) is a truncated copy of one of them at most: it
    joins the group of the run it is most like and never leads a group that drops the runs.
    Before, the containment pair went both ways, the short trace counted every run as its
    copy, led and dropped them all (issue 33: 129 of 410 families lost at 10^6). The runs are
    made from tau-bench conversations: the first four steps of one, then each a different
    conversation's steps appended (the old code kept the short trace and dropped three)."""
    base = tau_dicts(12)
    short = copy.deepcopy(base[0])
    short["id"] = "kp:trace:short"
    short["steps"] = short["steps"][:4]
    runs = []
    for k, other in enumerate(base[5:6] + base[7:12]):
        run = copy.deepcopy(base[0])
        run["id"] = f"kp:trace:run-{k}"
        run["steps"] = run["steps"][:4] + copy.deepcopy(other["steps"][1:16])
        for i, step in enumerate(run["steps"]):
            step["step_id"] = i
        runs.append(run)
    traces = [short, *runs]
    signatures = []
    for facet in copy_facets([kp.ReasoningTrace.model_validate(t) for t in traces]):
        assert facet.signature is not None
        signatures.append(facet.signature)
    held = [float(estimated_similarity(signatures[0], s)) for s in signatures[1:]]
    apart = [
        float(estimated_similarity(signatures[a], signatures[b]))
        for a in range(1, 7)
        for b in range(a + 1, 7)
    ]
    # The construction: each run holds the short trace, below the threshold, and the runs are
    # no copies of one another.
    assert all(0.25 <= j < COPY_SIMILARITY for j in held), held
    assert max(apart) < COPY_SIMILARITY, apart
    result = curate_copies(traces)
    assert sorted(t.id for t in result.kept) == [f"kp:trace:run-{k}" for k in range(6)]
    (group,) = result.groups
    most_like = f"kp:trace:run-{max(range(6), key=lambda k: (held[k], -k))}"
    assert group.kept == most_like
    assert [d.id for d in group.duplicates] == ["kp:trace:short"]


def test_a_short_run_of_another_task_held_in_a_run_is_no_copy_of_it() -> None:
    """A truncated copy starts as its run starts: the same objective. A short run of another
    task whose turns a longer run holds (here: another tau-bench task's objective over the
    first four steps of a conversation) is its own run, kept beside it. Before, containment
    alone joined them and the short run's family was lost (issue 33: at 10^5, 8 held pairs
    of different families, every one with another objective; 1,736 of one family, every one
    with the same objective after normalising). A truncation of the run (same objective)
    still joins it."""
    from knowledgepulse.copies._pairs import contained

    base = tau_dicts(3)
    run = copy.deepcopy(base[0])
    other = copy.deepcopy(base[0])
    other["id"] = "kp:trace:other-task"
    other["task"]["objective"] = base[2]["task"]["objective"]
    other["steps"] = other["steps"][:4]
    truncated = copy.deepcopy(base[0])
    truncated["id"] = "kp:trace:truncated"
    truncated["steps"] = truncated["steps"][:4]
    traces = [kp.ReasoningTrace.model_validate(t) for t in (run, other, truncated)]
    facets = copy_facets(traces)
    signatures = [f.signature for f in facets]
    assert all(s is not None for s in signatures)
    j = float(estimated_similarity(signatures[0], signatures[1]))  # type: ignore[arg-type]
    held = float(
        contained(np.array([j]), np.array([facets[1].words]), np.array([facets[0].words]))[0]
    )
    # The construction: the short run is held in the run, below the threshold.
    assert 0.25 <= j < COPY_SIMILARITY and held >= 0.85, (j, held)
    assert facets[0].objective != facets[1].objective
    assert facets[0].objective == facets[2].objective
    result = curate_copies([run, other, truncated])
    assert sorted(t.id for t in result.kept) == sorted([run["id"], "kp:trace:other-task"])
    (group,) = result.groups
    assert group.kept == run["id"]
    assert [d.id for d in group.duplicates] == ["kp:trace:truncated"]


@pytest.mark.parametrize("content", ["", 'not json\n{"id": 3}\n'])
def test_kp_curate_of_a_pile_with_no_trace_keeps_none_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str
) -> None:
    """An empty file, or one whose every line is rejected, leaves no trace to group: before,
    the copy decision reshaped its empty message sketches and ``kp curate`` ended with an
    internal error."""
    source = tmp_path / "pile.jsonl"
    source.write_text(content, encoding="utf-8")
    kept, groups = tmp_path / "kept.jsonl", tmp_path / "groups.jsonl"
    argv = ["curate", str(source), "-o", str(kept), "--groups", str(groups)]
    code = main(argv)
    err = capsys.readouterr().err
    assert "internal error" not in err
    assert code == (0 if not content else 1), err
    assert kept.read_text() == "" and groups.read_text() == ""
