"""The agent rubric against people: how its verdicts agree with human labels of failed runs.

Two labelled sets are read when present (``--holdout DIR``, default ``shared/data/behaviour-holdout``
beside the repository):

- ``who-and-when/`` (Who&When, MIT): 184 failed multi-agent runs (Magentic-One and AG2
  CaptainAgent), each labelled with the agent responsible and the decisive step (an index into
  ``history``);
- ``agentrx/`` (AgentRx, MIT): 100 tau-bench retail runs with their reward, the 27 failed ones
  labelled with their failures' steps (1-based indexes into ``traj``, the system message
  first) and the root cause.

For each set the card gives, per criterion, how often it fails on the runs people call failed
(recall) and how often a run it fails is one people call failed (precision; every Who&When run
is failed, so there it is 1 by construction), and how often the step it names is the people's
step (exactly, within 3); then the first failing step the result names (exact, within 3) and,
for multi-agent runs, the agent it names. Runs are graded without their reward or labels.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import _corpus
from ._figures import Figure, report

DEFAULT_HOLDOUT = _corpus.ROOT / "shared" / "data" / "behaviour-holdout"
WITHIN = 3


@dataclass
class LabelledRun:
    """A run and what people said of it: ``failed`` (``None``: not labelled), the decisive
    ``step`` and ``agent``, and ``message_of`` mapping a trace step id to the source's index
    in the people's coordinates."""

    trace: Any
    failed: bool | None
    step: int | None = None
    agent: str | None = None
    message_of: dict[int, int] = field(default_factory=dict)
    #: the part of the set it belongs to (Who&When: ``Hand-Crafted``, ``Algorithm-Generated``)
    group: str = ""
    #: the built-in agent rubric's result, once graded
    result: Any = None
    #: people say the agent acted without confirming with the user (AgentRx: an instruction
    #: adherence failure whose reasons speak of confirming)
    unconfirmed: bool = False


@dataclass
class CriterionTally:
    flagged: int = 0
    flagged_failed: int = 0
    stepped: int = 0
    exact: int = 0
    near: int = 0


@dataclass
class Card:
    """What the card prints for one set."""

    name: str
    runs: int
    failed: int
    criteria: dict[str, CriterionTally]
    located: int = 0
    step_exact: int = 0
    step_near: int = 0
    multi_agent: int = 0
    agent_right: int = 0
    not_successful: int = 0
    outcome_agree: int = 0
    outcome_counted: int = 0
    #: (the people's agent, the agent named or "none") → runs, over the multi-agent runs.
    agents: Counter[tuple[str, str]] = field(default_factory=Counter)
    #: runs people say acted without confirming, and those failing ``confirmed_before_write``
    unconfirmed: int = 0
    unconfirmed_caught: int = 0


def holdout_dir(given: Path | None = None) -> Path:
    if given is not None:
        return given
    env = os.environ.get("KP_HOLDOUT")
    return Path(env) if env else DEFAULT_HOLDOUT


# -- reading the sets --------------------------------------------------------------------------


def who_and_when_runs(folder: Path, *, with_answer: bool = True) -> list[LabelledRun]:
    """The Who&When runs under ``folder`` (``Hand-Crafted``, ``Algorithm-Generated``), each
    converted without its labels (the importer drops them) and without its ``is_correct``;
    without its expected answer (``ground_truth``) too unless ``with_answer``."""
    from knowledgepulse.importers import convert

    hidden = {"is_correct"} if with_answer else {"is_correct", "ground_truth"}
    runs: list[LabelledRun] = []
    for path in sorted(folder.glob("*/*.json"), key=lambda p: (p.parent.name, _number(p))):
        record = json.loads(path.read_text(encoding="utf-8"))
        seen = {key: value for key, value in record.items() if key not in hidden}
        (trace,) = convert("who-and-when", seen)
        message_of = message_of_steps(trace)
        runs.append(
            LabelledRun(
                trace,
                True,
                _int(record.get("mistake_step")),
                str(record.get("mistake_agent") or "") or None,
                message_of,
                path.parent.name,
            )
        )
    return runs


def agentrx_runs(folder: Path) -> list[LabelledRun]:
    """The AgentRx retail runs: tau-bench records graded without their reward; the failed ones
    labelled with the root cause's step (``root_cause.failure_id`` among ``failures``)."""
    from knowledgepulse.importers import convert

    records = json.loads((folder / "tau_dataset_full.json").read_text(encoding="utf-8"))
    truth = json.loads((folder / "tau_ground_truth.json").read_text(encoding="utf-8"))
    labels = _agentrx_labels(truth)
    unconfirmed = _agentrx_unconfirmed(truth)
    runs: list[LabelledRun] = []
    for record in records:
        blind = {key: value for key, value in record.items() if key != "reward"}
        (trace,) = convert("openai", blind)
        failed = not (isinstance(record.get("reward"), (int, float)) and record["reward"] >= 1)
        step = labels.get(str(record.get("task_id"))) if failed else None
        run = LabelledRun(trace, failed, step, None, message_of_steps(trace))
        run.unconfirmed = failed and str(record.get("task_id")) in unconfirmed
        runs.append(run)
    return runs


def _agentrx_items(truth: Any) -> list[dict[str, Any]]:
    items = truth if isinstance(truth, list) else truth.get("tasks", truth)
    if isinstance(items, dict):
        items = [dict(value, task_id=key) for key, value in items.items()]
    return list(items)


def _agentrx_unconfirmed(truth: Any) -> set[str]:
    """The task ids people label as acting without the user's confirmation: a failure of the
    category "Instruction Adherence Failure" whose reasons speak of confirming (the policy's
    explicit yes, the payment method to confirm)."""
    found: set[str] = set()
    for item in _agentrx_items(truth):
        for failure in item.get("failures") or []:
            said = f"{failure.get('step_reason', '')} {failure.get('category_reason', '')}"
            if failure.get("failure_category") == "Instruction Adherence Failure" and (
                "confirm" in said.lower()
            ):
                found.add(str(item.get("trajectory_id", item.get("task_id"))))
    return found


def _agentrx_labels(truth: Any) -> dict[str, int]:
    """task id → the root cause's step as a 0-based index into ``traj``."""
    labels: dict[str, int] = {}
    for item in _agentrx_items(truth):
        failures = {f.get("failure_id"): f for f in item.get("failures") or []}
        root = (item.get("root_cause") or {}).get("failure_id")
        chosen = failures.get(root) or next(iter(failures.values()), None)
        step = _int(chosen.get("step_number")) if chosen else None
        task = item.get("trajectory_id", item.get("task_id"))
        if step is not None and task is not None:
            labels[str(task)] = step - 1
    return labels


def message_of_steps(trace: Any) -> dict[int, int]:
    """Trace step id → the index of the message it came from (the step's ``origin``, which the
    importers write: ``{"message": 5}``, the people's numbering of ``traj`` and ``history``)."""
    found: dict[int, int] = {}
    for step in trace.steps:
        origin = (step.model_extra or {}).get("origin") or {}
        if isinstance(origin.get("message"), int):
            found[step.step_id] = origin["message"]
    return found


def _int(value: Any) -> int | None:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


def _number(path: Path) -> int:
    return _int(path.stem) or 0


# -- the card ----------------------------------------------------------------------------------


def human_card(name: str, runs: Sequence[LabelledRun], rubric: Any = None) -> Card:
    """The agreement of ``rubric`` (default: the built-in agent rubric) with the labels."""
    from knowledgepulse.behaviours import AGENT_RUBRIC
    from knowledgepulse.rubrics import Case, OutcomeType

    rubric = rubric or AGENT_RUBRIC
    card = Card(name, len(runs), sum(1 for run in runs if run.failed), {})
    for run in runs:
        if rubric is not AGENT_RUBRIC:
            result = rubric.evaluate(Case(trace=run.trace, case_id=run.trace.id))
        else:  # graded once: the card of each part of the set reads it again
            if run.result is None:
                run.result = rubric.evaluate(Case(trace=run.trace, case_id=run.trace.id))
            result = run.result
        successful = result.outcome_type is OutcomeType.SUCCESSFUL_COMPLETION
        if run.failed is not None:
            card.outcome_counted += 1
            card.outcome_agree += successful != run.failed
            card.not_successful += not successful and run.failed
        for criterion, verdict in result.verdicts.items():
            tally = card.criteria.setdefault(criterion, CriterionTally())
            if verdict.passed is not False:
                continue
            tally.flagged += 1
            tally.flagged_failed += bool(run.failed)
            if run.step is not None and verdict.steps:
                tally.stepped += 1
                at = run.message_of.get(min(verdict.steps))
                tally.exact += at == run.step
                tally.near += at is not None and abs(at - run.step) <= WITHIN
        for criterion in result.details:
            card.criteria.setdefault(criterion, CriterionTally())
        if run.unconfirmed:
            card.unconfirmed += 1
            consent = result.verdicts.get("confirmed_before_write")
            card.unconfirmed_caught += consent is not None and consent.passed is False
        if run.failed and run.step is not None:
            card.located += 1
            first = result.first_failing_step
            at = run.message_of.get(first) if first is not None else None
            card.step_exact += at == run.step
            card.step_near += at is not None and abs(at - run.step) <= WITHIN
        if run.agent is not None and _agents(run.trace) > 1:
            card.multi_agent += 1
            named = (result.first_failing_agent or "").lower()
            card.agent_right += named == run.agent.lower()
            card.agents[(run.agent, result.first_failing_agent or "none")] += 1
    return card


def _agents(trace: Any) -> int:
    return len({(s.model_extra or {}).get("agent") for s in trace.steps} - {None})


def print_card(card: Card) -> None:
    print(f"\nhuman agreement on {card.name}: {card.runs} runs, {card.failed} failed by the labels")
    print(
        f"{'criterion':<24} {'fails':>6} {'precision':>10} {'recall':>8} "
        f"{'step =':>8} {'step ±3':>8}"
    )
    for criterion, tally in card.criteria.items():
        precision = _share(tally.flagged_failed, tally.flagged)
        recall = _share(tally.flagged_failed, card.failed)
        exact = _share(tally.exact, tally.stepped)
        near = _share(tally.near, tally.stepped)
        print(
            f"{criterion:<24} {tally.flagged:>6} {precision:>10} {recall:>8} {exact:>8} {near:>8}"
        )
    print(
        f"first failing step: exact {card.step_exact}/{card.located}, within {WITHIN} "
        f"{card.step_near}/{card.located}"
    )
    if card.multi_agent:
        print(f"agent of the first failing step: {card.agent_right}/{card.multi_agent}")
        print_agent_confusion(card)
    print(
        f"outcome (successful_completion vs the labels): {card.outcome_agree}/"
        f"{card.outcome_counted} agree; {card.not_successful}/{card.failed} failed runs "
        "not called successful"
    )
    if card.unconfirmed:
        print(
            f"runs people label 'did not confirm': {card.unconfirmed_caught}/{card.unconfirmed} "
            "fail confirmed_before_write"
        )


def agent_confusion(card: Card, least: int = 3) -> list[tuple[str, int, int, str]]:
    """Per agent the people blame in at least ``least`` runs (names compared case-blind):
    (agent, runs, runs naming it, the agents named instead, most often first); the others
    pooled as ``(other agents)``."""
    blamed: Counter[str] = Counter()
    for (agent, _), count in card.agents.items():
        blamed[agent.lower()] += count
    rows: dict[str, tuple[str, int, int, Counter[str]]] = {}
    for (agent, named), count in card.agents.items():
        key = agent.lower() if blamed[agent.lower()] >= least else "(other agents)"
        label, runs, right, instead = rows.get(key, (agent, 0, 0, Counter()))
        if key == "(other agents)":
            label = key
        if named.lower() == agent.lower():
            right += count
        else:
            instead["another" if key == "(other agents)" else named] += count
        rows[key] = (label, runs + count, right, instead)
    ordered = sorted(rows.values(), key=lambda row: (row[0] == "(other agents)", -row[1], row[0]))
    return [(label, runs, right, _most(instead)) for label, runs, right, instead in ordered]


def _most(named: Counter[str], shown: int = 3) -> str:
    """``"Orchestrator 12, WebSurfer 2"``: the most named first, at most ``shown``, then how
    many runs named the rest."""
    common = named.most_common()
    text = ", ".join(f"{name} {count}" for name, count in common[:shown])
    rest = sum(count for _, count in common[shown:])
    return f"{text}, {rest} more" if rest else text


def print_agent_confusion(card: Card) -> None:
    print(f"{'people blame':<22} {'runs':>5} {'named':>6}  named instead")
    for label, runs, right, instead in agent_confusion(card):
        print(f"{label[:22]:<22} {runs:>5} {right:>6}  {instead or '-'}")


def _share(part: int, whole: int) -> str:
    return f"{part / whole:.1%}" if whole else "-"


def bench_human_agreement(
    holdout: Path | None = None, sets: Iterable[str] = ("who-and-when",)
) -> None:
    """Print the card for each labelled set found under ``holdout``, with its figures."""
    folder = holdout_dir(holdout)
    for name in sets:
        where = folder / name
        figure = f"agent rubric vs people on {name}"
        if not where.is_dir():
            report(Figure(figure, None, "", None, False, note=f"no folder {where}"))
            continue
        runs = who_and_when_runs(where) if name == "who-and-when" else agentrx_runs(where)
        card = human_card(name, runs)
        print_card(card)
        if name == "who-and-when":
            print_groups(runs)
            _print_without_answer(where)
        if card.multi_agent:
            _report_share(
                f"{figure}: agent of the first failing step",
                card.agent_right,
                card.multi_agent,
                0.55,
            )
        if card.unconfirmed:
            _report_share(
                f"{figure}: 'did not confirm' runs failing confirmed_before_write",
                card.unconfirmed_caught,
                card.unconfirmed,
                1.0,
            )
        if card.located:
            who = name == "who-and-when"
            _report_share(
                f"{figure}: first failing step exact",
                card.step_exact,
                card.located,
                0.15 if who else 9 / 27,
            )
            _report_share(
                f"{figure}: first failing step within {WITHIN}",
                card.step_near,
                card.located,
                None if who else 18 / 27,
            )


def _report_share(name: str, part: int, whole: int, target: float | None) -> None:
    """A figure that is a share of runs (higher is better), with its count as the note."""
    report(
        Figure(name, part / whole, "", target, lower_is_better=False, note=f"{part}/{whole} runs")
    )


def group_cards(runs: Sequence[LabelledRun]) -> list[Card]:
    """The card of each part of a set (its runs' ``group``), then of its halves by position
    (even- and odd-numbered runs in the set's order): no rule was fitted to one part, so the
    parts' figures agreeing says the rules carry over to runs of another kind."""
    groups = sorted({run.group for run in runs if run.group})
    cards = [human_card(group, [run for run in runs if run.group == group]) for group in groups]
    cards.append(human_card("even runs", list(runs[0::2])))
    cards.append(human_card("odd runs", list(runs[1::2])))
    return cards


def print_groups(runs: Sequence[LabelledRun]) -> None:
    print(f"{'part of the set':<22} {'runs':>5} {'step =':>13} {'step ±3':>13} {'agent':>13}")
    for card in group_cards(runs):
        print(
            f"{card.name:<22} {card.runs:>5} {_count(card.step_exact, card.located):>13} "
            f"{_count(card.step_near, card.located):>13} "
            f"{_count(card.agent_right, card.multi_agent):>13}"
        )


def _count(part: int, whole: int) -> str:
    return f"{part}/{whole} {_share(part, whole)}" if whole else "-"


def _print_without_answer(where: Path) -> None:
    """The first failing step and agent once the runs' expected answers are hidden too: what
    the rubric finds in a log that carries no ground truth at all."""
    blind = human_card("who-and-when", who_and_when_runs(where, with_answer=False))
    print(
        f"without the expected answer (ground_truth hidden): first failing step exact "
        f"{blind.step_exact}/{blind.located}, within {WITHIN} {blind.step_near}/{blind.located}; "
        f"agent {blind.agent_right}/{blind.multi_agent}; {blind.not_successful}/{blind.failed} "
        "failed runs not called successful"
    )
