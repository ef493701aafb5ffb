"""A realistic pile with truth, for measuring how curation decides copies (``python -m
benchmarks copies``).

Every trace of the pile belongs to a **family**: the run it is a copy of. A family is one run
of an agent at a task: one of the 200 bundled tau-bench conversations (50 tasks x 4 attempts:
4 families), or a synthetic run. Each trace records its family, its task and its kind:

- ``novel`` (46 %): a family's first trace, at a task not seen before. The first 50 are the
  tau-bench conversations of attempt 0; the others are synthetic (:meth:`_Material.synthetic`):
  a tau-bench conversation as skeleton, each of its units (a message, or a tool call with its
  result) replaced by a unit of the same kind drawn from all the conversations, its opening
  message made of as many sentences drawn from all the openings (:meth:`_Material._opening`:
  the skeleton's own opening, kept, made the ~2,300 runs on one skeleton at 10^6 alike where
  their runs are short), then every value swapped (names, user ids, e-mails, airports, cities,
  flight numbers, reservation codes, dates, "May 20th", numbers of 3 or more digits), so that
  the text really differs from every other family's;
- ``rerun`` (8 %): a family's first trace, at a task seen before: another attempt at it, which
  is its own family (re-runs must not be grouped as copies; scored apart). The 150 tau-bench
  attempts 1-3, then synthetic ones: the same synthetic task (same value swaps, a share of the
  same tool calls and user turns, :data:`SHARED`) on another attempt of the tau-bench task as
  skeleton;
- ``copy`` (20 %): an exact or trivial copy of a family: ``exact`` (a new trace id only),
  ``whitespace`` (spaces doubled, lines ended with a space), ``ids`` (the run's source id
  changed), ``timestamps`` (creation time and every timestamp in the text moved);
- ``edit`` (18 %): an edited copy: ``entity_swap`` (the customer's names, ids and e-mails
  swapped for another's), ``truncation`` (the first 50-90 % of the steps), ``dropped_steps``
  (1-3 steps dropped), ``reordered_tool_results`` (the items of list tool results shuffled, or
  two different tool calls swapped with their results where no result is a list); an edit
  with nothing to act on (no name to swap, nothing to reorder) drops steps instead, and the
  truth says ``dropped_steps``;
- ``paraphrase`` (8 %): the family reworded: its prose turns taken from the shipped paraphrase
  table (:mod:`benchmarks._paraphrase`, with how it was made), then its value swaps.

The kinds are drawn in blocks of 50 (23 novel, 4 re-runs, 10 copies, 9 edits, 4 paraphrases,
shuffled per block), so every share holds at every size that is a multiple of 50; a copy's
family is drawn uniformly from the families before it. Deterministic by seed; streamed: a
trace is made when it is written, and what is kept per family is two small integers (plus the
last 4,096 synthetic tasks still open for re-runs): 2,000 and 40,000 traces were written with
the same peak RSS (56 and 58 MiB).
"""

from __future__ import annotations

import datetime
import functools
import gzip
import hashlib
import json
import math
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from array import array
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from . import _corpus

#: Traces of each kind in every block of :data:`BLOCK_SIZE` (their shares of the pile).
BLOCK = {"novel": 23, "rerun": 4, "copy": 10, "edit": 9, "paraphrase": 4}
BLOCK_SIZE = sum(BLOCK.values())
TRIVIAL = ("exact", "whitespace", "ids", "timestamps")
EDITS = ("entity_swap", "truncation", "dropped_steps", "reordered_tool_results")
#: The chance that a unit of a synthetic run is the one every attempt at its task has, by the
#: unit's kind (a tool call with its result, a user's turn, an agent's message; any other
#: unit is its attempt's own; the sentences of an opening as a user's turn); one tool call of
#: each attempt is always its own (:meth:`_Material.synthetic`). Chosen so that synthetic
#: re-runs are as alike as the tau-bench attempts at one task on the run text copies are
#: decided on (the whole text less tool results; the copy facet's estimated Jaccard) and as
#: rarely make the same steps. tau-bench's 300 pairs: run text median 0.109, 90th percentile
#: 0.212, 99th 0.359, none at 0.5; 1 pair with the same steps; whole text (word 3-shingles)
#: median 0.279. Synthetic, 250 tasks x 4 attempts: 0.109, 0.219, 0.321, 1 of 1,500 at 0.5;
#: none with the same steps; whole text 0.186 (an own tool call brings its own result, so the
#: whole texts are less alike than tau-bench's). The first calibration (tool 0.9, user 0.85,
#: on the whole text alone: 0.273) made run texts half as alike again as real attempts'
#: (median 0.172, 99th percentile 0.406, a fifth of their messages word for word alike where
#: real attempts have none, 3 % with the same steps): at 10^6, 220 of the 410 families lost
#: were re-runs grouped with their task's first run.
SHARED = {"tool": 1.0, "user": 0.55, "thought": 0.4}
#: Attempts per tau-bench task (and so per synthetic task).
ATTEMPTS = 4
#: Synthetic tasks kept open for re-runs (the most recent ones): bounds the memory.
OPEN_TASKS = 4096
SCHEMA = "knowledgepulse.copies-truth/1"


@dataclass(frozen=True, slots=True)
class Truth:
    """What a trace of the pile is: its family (the run it is a copy of), that run's task, its
    kind and, for copies and edits, which one."""

    id: str
    family: int
    task: str
    kind: str
    detail: str = ""

    @property
    def row(self) -> str:
        """The row of the per-kind tables: ``copy:whitespace``, ``edit:truncation``, ``novel``…"""
        return f"{self.kind}:{self.detail}" if self.kind in ("copy", "edit") else self.kind

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, **asdict(self)}

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> Truth:
        return cls(
            id=record["id"],
            family=int(record["family"]),
            task=record["task"],
            kind=record["kind"],
            detail=record.get("detail", ""),
        )


def _hash(*parts: object) -> int:
    """A 64-bit integer of ``parts`` (stable across processes, unlike ``hash``)."""
    text = "\x1f".join(str(p) for p in parts).encode("utf-8")
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big")


#: More names to swap in than the corpus has (so swapped runs meet new customers).
_FIRST_TEXT = (
    "Ava Liam Zoe Ethan Maya Lucas Nora Leo Iris Owen Ruby Felix Clara Hugo Alma Theo Jade "
    "Ezra Luna Milo Vera Axel Nina Otto Ines Cyrus Lea Jonah Elif Tariq Yuki Kenji Priya "
    "Ravi Ana Diego Sofia Mateo Chloe Adam Sara Omar Lina Karim Ada Ivo Mira Pavel Hana Emil"
)
_LAST_TEXT = (
    "Nakamura Okafor Lindqvist Moreau Petrov Costa Schmidt Rossi Novak Haddad Kowalski "
    "Tanaka Fischer Dubois Alvarez Romero Bianchi Jensen Larsen Varga Horvat Kaya Demir "
    "Yilmaz Sato Kim Park Chen Wong Singh Mehta Reyes Cruz Ortiz Flores Baker Carter Hughes "
    "Price Bennett Wood Gray James Watson Brooks Kelly Sanders Ross Foster Powell"
)
EXTRA_FIRST = tuple(_FIRST_TEXT.split())
EXTRA_LAST = tuple(_LAST_TEXT.split())
#: The cities a user names, swapped in every message: the first 17 are those tau-bench's users
#: name, the others are there for them to become.
CITIES = (
    "New York", "Chicago", "Houston", "Las Vegas", "Seattle", "Atlanta", "Denver", "Newark",
    "Philadelphia", "Los Angeles", "Boston", "San Francisco", "Miami", "Dallas", "Minneapolis",
    "Phoenix", "Orlando", "Detroit", "Charlotte", "Portland", "San Diego", "Austin", "Nashville",
    "Salt Lake City", "Baltimore", "Pittsburgh", "Cleveland", "Tampa", "Honolulu", "Anchorage",
    "Kansas City", "St. Louis", "Sacramento", "Raleigh", "Indianapolis", "Columbus",
    "Milwaukee", "Albuquerque", "Tucson", "Omaha", "Memphis", "Buffalo", "Boise", "Spokane",
)  # fmt: skip
MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)  # fmt: skip
#: Where an opening message is cut into sentences (recombined across conversations).
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def sentences(text: str) -> list[str]:
    """``text``'s sentences (at least one: the text itself when it has no end mark)."""
    return [s for s in _SENTENCE_END.split(text.strip()) if s] or [text]


def _ordinal(day: int) -> str:
    if 11 <= day % 100 <= 13:
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")


class _Swapper:
    """Swaps the values of a text, the same value always for the same one (per seed)."""

    def __init__(self, material: _Material, seed: str, *, names_only: bool = False) -> None:
        self.material = material
        self.seed = seed
        self.names_only = names_only
        self.days = 1 + _hash(seed, "days") % 300
        self.done: dict[str, str] = {}  # value -> its swap (the same token, the same swap)

    def _pick(self, token: str, pool: tuple[str, ...]) -> str:
        return pool[_hash(self.seed, token) % len(pool)]

    def _digits(self, digits: str) -> str:
        return str(_hash(self.seed, digits) % 10 ** len(digits)).zfill(len(digits))

    def _name(self, name: str) -> str:
        capitalised = name[:1].isupper()
        pool = self.material.first_names if name.lower() in self.material.first_set else None
        new = self._pick(name.lower(), pool or self.material.last_names)
        return new if capitalised else new.lower()

    def _sub(self, match: re.Match[str]) -> str:
        kind = match.lastgroup
        token = match.group(0)
        if kind == "userid":
            first, last, digits = match.group("uf"), match.group("ul"), match.group("ud")
            if first not in self.material.first_set:
                return token if self.names_only else f"{first}_{last}_{self._digits(digits)}"
            return f"{self._name(first)}_{self._name(last)}_{self._digits(digits)}"
        if kind == "email":
            first, last, digits = match.group("ef"), match.group("el"), match.group("ed")
            return f"{self._name(first)}.{self._name(last)}{self._digits(digits)}@"
        if kind == "name":
            return self._name(token)
        if self.names_only:
            return token
        if kind in ("datetime", "date"):
            try:
                day = datetime.date.fromisoformat(token[:10]) + datetime.timedelta(days=self.days)
            except ValueError:
                return token
            return day.isoformat() + token[10:]
        if kind == "code":
            if token.startswith("HAT") and token[3:].isdigit():
                return "HAT" + self._digits(token[3:])
            if token.isdigit():
                return self._digits(token)
            if token.isalpha():
                return token
            alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
            value = _hash(self.seed, token)
            return "".join(alphabet[(value >> (6 * i)) % 36] for i in range(6))
        if kind == "airport":
            return self._pick(token, self.material.airports)
        if kind == "city":
            return self._pick(token, CITIES)
        if kind == "monthday":
            month, said, suffix = match.group("mm"), int(match.group("md")), match.group("ms")
            moved = datetime.date(2024, MONTHS.index(month) + 1, min(said, 28))
            moved += datetime.timedelta(days=self.days)
            new_day = str(moved.day) + (_ordinal(moved.day) if suffix else "")
            return f"{MONTHS[moved.month - 1]} {new_day}"
        return self._digits(token)  # digits

    def text(self, text: str) -> str:
        # The corpus's texts are cut once and kept; a text already swapped (an entity swap
        # of a synthetic run) is new each time: cut, not kept, so memory stays bounded.
        parts = self.material.template(text, keep=not self.names_only)
        if len(parts) == 1:
            return text
        done = self.done
        out = []
        for part in parts:
            if isinstance(part, str):
                out.append(part)
                continue
            token = part.group(0)
            new = done.get(token)
            if new is None:
                new = done[token] = self._sub(part)
            out.append(new)
        return "".join(out)

    def value(self, value: Any) -> Any:
        """``value`` (a tool input: strings in dicts and lists) with its strings swapped."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items()}
        return value

    def trace(self, trace: dict[str, Any]) -> None:
        """Swap the values of ``trace``'s objective and steps, in place."""
        trace["task"]["objective"] = self.text(trace["task"]["objective"])
        for step in trace["steps"]:
            if isinstance(step.get("content"), str):
                step["content"] = self.text(step["content"])
            if "input" in step:
                step["input"] = self.value(step["input"])


@dataclass
class _Unit:
    """A run of steps that travels together: a message, or a tool call and its result."""

    key: str
    steps: list[int]


class _Material:
    """The tau-bench conversations cut into units, the donors of each unit kind, the names and
    airports to swap, and the paraphrase table."""

    def __init__(self) -> None:
        from ._paraphrase import load_paraphrases

        self.conversations = _corpus.tau_bench_traces()
        if not self.conversations:
            raise FileNotFoundError(
                f"the tau-bench conversations are not installed: {_corpus.TAU_BENCH}"
            )
        self.paraphrases = load_paraphrases()["conversations"]
        self._templates: dict[str, list[str | re.Match[str]]] = {}
        #: (task, attempt) -> conversation index
        self.by_attempt: dict[tuple[int, int], int] = {}
        for index, trace in enumerate(self.conversations):
            origin = trace["metadata"]["kp_import"]
            self.by_attempt[(int(origin["task"]), int(origin["trial"]))] = index
        self.tasks = sorted({task for task, _ in self.by_attempt})
        self.units = [self._units(trace) for trace in self.conversations]
        self.donors: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for c, units in enumerate(self.units):
            for u, unit in enumerate(units):
                self.donors[unit.key].append((c, u))
        text = json.dumps(self.conversations)
        user_ids = re.findall(r"\b([a-z]+)_([a-z]+)_\d+\b", text)
        firsts = {f for f, _ in user_ids if f not in ("credit", "gift")}
        lasts = {last for f, last in user_ids if f in firsts}
        firsts |= {n.lower() for n in re.findall(r'first_name\\?": \\?"(\w+)', text)}
        lasts |= {n.lower() for n in re.findall(r'last_name\\?": \\?"(\w+)', text)}
        self.first_set = frozenset(firsts)
        self.first_names = tuple(sorted(firsts | {n.lower() for n in EXTRA_FIRST}))
        self.last_names = tuple(sorted(lasts | {n.lower() for n in EXTRA_LAST}))
        self.airports = tuple(
            sorted(set(re.findall(r'(?:origin|destination)\\?": \\?"([A-Z]{3})', text)))
        )
        names = sorted({n.capitalize() for n in firsts | lasts}, key=len, reverse=True)
        #: Every sentence of every opening message: (conversation, sentence).
        self.openings = [
            (c, k)
            for c, trace in enumerate(self.conversations)
            for k in range(len(sentences(trace["task"]["objective"])))
        ]
        self.values = re.compile(
            r"(?P<datetime>\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})"
            r"|(?P<date>\b\d{4}-\d{2}-\d{2}\b)"
            r"|(?P<userid>\b(?P<uf>[a-z]+)_(?P<ul>[a-z]+)_(?P<ud>\d+)\b)"
            r"|(?P<email>\b(?P<ef>[a-z]+)\.(?P<el>[a-z]+)(?P<ed>\d*)@)"
            r"|(?P<code>\b[A-Z0-9]{6}\b)"
            rf"|(?P<airport>\b(?:{'|'.join(self.airports)})\b)"
            rf"|(?P<city>\b(?:{'|'.join(re.escape(c) for c in CITIES)})\b)"
            rf"|(?P<monthday>\b(?P<mm>{'|'.join(MONTHS)}) (?P<md>\d{{1,2}})(?P<ms>st|nd|rd|th)?\b)"
            rf"|(?P<name>\b(?:{'|'.join(names)})\b)"
            r"|(?P<digits>\d{3,})"
        )

    def template(self, text: str, keep: bool = True) -> list[str | re.Match[str]]:
        """``text`` cut into its literal parts and its values (matches of ``values``), made
        once per text when ``keep``: the corpus has ~15,000 distinct texts (with their
        paraphrases), each swapped many times."""
        parts = self._templates.get(text)
        if parts is None:
            parts = []
            start = 0
            for match in self.values.finditer(text):
                parts.append(text[start : match.start()])
                parts.append(match)
                start = match.end()
            parts.append(text[start:])
            if keep:
                self._templates[text] = parts
        return parts

    @staticmethod
    def _units(trace: dict[str, Any]) -> list[_Unit]:
        steps = trace["steps"]
        units: list[_Unit] = []
        i = 0
        while i < len(steps):
            step = steps[i]
            tool = (step.get("tool") or {}).get("name")
            if step["type"] == "tool_call" and i + 1 < len(steps):
                following = steps[i + 1]
                if (following.get("tool") or {}).get("name") == tool and "input" not in following:
                    units.append(_Unit(f"tool:{tool}", [i, i + 1]))
                    i += 2
                    continue
            units.append(_Unit(f"{step['type']}:{tool}:{step.get('source')}", [i]))
            i += 1
        return units

    def _step(self, conversation: int, index: int, paraphrased: bool) -> dict[str, Any]:
        # A shallow copy: what is changed later is a step's own keys (content, input, step_id),
        # each replaced, never changed inside.
        step = dict(self.conversations[conversation]["steps"][index])
        if paraphrased:
            table = self.paraphrases.get(self.conversations[conversation]["id"], {})
            reworded = table.get("steps", {}).get(str(index))
            if reworded is not None:
                step["content"] = reworded
        return step

    def real(self, conversation: int, paraphrased: bool) -> dict[str, Any]:
        """A tau-bench conversation (reworded if ``paraphrased``)."""
        source = self.conversations[conversation]
        trace = _head(source)
        trace["steps"] = [
            self._step(conversation, i, paraphrased) for i in range(len(source["steps"]))
        ]
        if paraphrased:
            trace["task"]["objective"] = self.paraphrases[source["id"]]["objective"]
        return trace

    def _opening(self, task_seed: str, attempt: int, skeleton: int, paraphrased: bool) -> str:
        """A synthetic run's opening message: as many sentences as ``skeleton``'s, each drawn
        from every opening of the corpus (an opening shared by thousands of runs at 10^6
        would make short runs alike), the task's with the user's :data:`SHARED` chance, else
        its attempt's own; a paraphrased run takes the same sentences of the paraphrases."""
        count = len(sentences(self.conversations[skeleton]["task"]["objective"]))
        parts = []
        for k in range(count):
            own = _hash(task_seed, attempt, "opening", k) % 1000 >= SHARED["user"] * 1000
            value = _hash(task_seed, attempt if own else "task", "opening", k)
            conversation, sentence = self.openings[value % len(self.openings)]
            text = self.conversations[conversation]["task"]["objective"]
            if paraphrased:
                text = self.paraphrases[self.conversations[conversation]["id"]]["objective"]
            cut = sentences(text)
            parts.append(cut[min(sentence, len(cut) - 1)])
        return " ".join(parts)

    def synthetic(
        self, task_seed: str, attempt: int, skeleton: int, paraphrased: bool, label: str
    ) -> dict[str, Any]:
        """A synthetic run: ``skeleton``'s units, each replaced by a donor unit of its kind,
        then its values swapped by ``task_seed``. Attempts at one task share what such runs
        share (the task's data, the user's wishes): the k-th unit of a kind takes the task's
        donor with the kind's :data:`SHARED` chance, else one of its own attempt."""
        source = self.conversations[skeleton]
        trace = _head(source)
        trace["metadata"].pop("ground_truth", None)  # the skeleton's, not this run's
        trace["metadata"]["kp_import"]["source_id"] = label
        trace["task"]["objective"] = self._opening(task_seed, attempt, skeleton, paraphrased)
        seen: Counter[str] = Counter()
        steps: list[dict[str, Any]] = []
        units = self.units[skeleton]
        # One tool call of each attempt is always its own: real attempts at one task differ
        # in at least one call (1 of tau-bench's 300 pairs has the same steps), so a re-run
        # is not a same-steps rewording of its task's first run.
        tools = [k for k, unit in enumerate(units) if unit.key.startswith("tool")]
        forced = tools[_hash(task_seed, attempt, "own tool") % len(tools)] if tools else -1
        for k, unit in enumerate(units):
            occurrence = seen[unit.key]
            seen[unit.key] += 1
            shared = SHARED.get(unit.key.split(":", 1)[0] if ":user" not in unit.key else "user")
            own = k == forced or (
                _hash(task_seed, attempt, unit.key, occurrence) % 1000 >= (shared or 0) * 1000
            )
            value = _hash(task_seed, attempt if own else "task", unit.key, occurrence)
            pool = self.donors[unit.key]
            conversation, u = pool[value % len(pool)]
            chosen = self.units[conversation][u]
            steps.extend(self._step(conversation, i, paraphrased) for i in chosen.steps)
        trace["steps"] = steps
        _renumber(trace)
        _Swapper(self, task_seed).trace(trace)
        return trace


def _head(source: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``source`` without its steps, deep where it is changed later (task, metadata,
    its kp_import), shared elsewhere (ground truth, outcome: never changed)."""
    trace = {k: v for k, v in source.items() if k != "steps"}
    trace["task"] = dict(source["task"])
    trace["metadata"] = dict(source["metadata"])
    trace["metadata"]["kp_import"] = dict(source["metadata"]["kp_import"])
    return trace


@functools.cache
def _material() -> _Material:
    return _Material()


def _renumber(trace: dict[str, Any]) -> None:
    for i, step in enumerate(trace["steps"]):
        step["step_id"] = i


_SPACE = re.compile(r" ")
_TIMESTAMP = re.compile(r"\b(\d{4}-\d{2}-\d{2})T(\d{2}):(\d{2}):(\d{2})")


def _trivial(trace: dict[str, Any], detail: str, rng: random.Random, label: str) -> None:
    """Make ``trace`` a trivial copy, in place (see the module)."""
    if detail == "whitespace":
        for step in trace["steps"]:
            content = step.get("content")
            if isinstance(content, str) and content:
                content = _SPACE.sub(lambda m: "  " if rng.random() < 0.05 else " ", content)
                step["content"] = content.replace("\n", " \n") + " "
        trace["task"]["objective"] = "  " + trace["task"]["objective"]
    elif detail == "ids":
        trace["metadata"]["kp_import"]["source_id"] += f":replay-{label}"
    elif detail == "timestamps":
        seconds = rng.randrange(1, 86_400)

        def moved(match: re.Match[str]) -> str:
            clock = int(match.group(2)) * 3600 + int(match.group(3)) * 60 + int(match.group(4))
            clock = (clock + seconds) % 86_400
            return f"{match.group(1)}T{clock // 3600:02d}:{clock // 60 % 60:02d}:{clock % 60:02d}"

        for step in trace["steps"]:
            if isinstance(step.get("content"), str):
                step["content"] = _TIMESTAMP.sub(moved, step["content"])
        trace["metadata"]["created_at"] = _TIMESTAMP.sub(moved, trace["metadata"]["created_at"])


def _reorder_tool_results(steps: list[dict[str, Any]], rng: random.Random) -> bool:
    """Shuffle the items of every list tool result of ``steps``, or where there is none swap
    two different tool calls with their results; whether anything moved."""
    shuffled = False
    for step in steps:
        content = step.get("content")
        if step.get("tool") is None or not isinstance(content, str) or content[:1] != "[":
            continue
        try:
            items = json.loads(content)
        except ValueError:
            continue
        if isinstance(items, list) and len({json.dumps(item) for item in items}) >= 2:
            before = list(items)
            while items == before:
                rng.shuffle(items)
            step["content"] = json.dumps(items)
            shuffled = True
    if shuffled:
        return True
    calls = [
        i for i in range(len(steps) - 1) if steps[i]["type"] == "tool_call"
        and steps[i + 1].get("tool") == steps[i]["tool"] and "input" not in steps[i + 1]
    ]  # fmt: skip

    def unit(i: int) -> list[dict[str, Any]]:  # a call and its result, less their step ids
        return [{k: v for k, v in s.items() if k != "step_id"} for s in steps[i : i + 2]]

    pairs = [(i, j) for i in calls for j in calls if i + 2 <= j and unit(i) != unit(j)]
    if not pairs:
        return False
    i, j = rng.choice(pairs)
    steps[i : i + 2], steps[j : j + 2] = steps[j : j + 2], steps[i : i + 2]
    return True


def _edit(trace: dict[str, Any], detail: str, rng: random.Random, seed: str) -> str:
    """Make ``trace`` an edited copy, in place (see the module); the edit made (a reordering
    with nothing to reorder, or a swap with no name to swap, drops steps instead)."""
    steps = trace["steps"]
    if detail == "entity_swap":
        before = copy_text(trace)
        _Swapper(_material(), seed, names_only=True).trace(trace)
        if copy_text(trace) == before:  # no name in it: nothing to swap
            return _edit(trace, "dropped_steps", rng, seed)
    elif detail == "truncation":
        # At most all but the last step: ceil of 90 % of a short run is the whole run.
        keep = max(2, min(len(steps) - 1, math.ceil(len(steps) * rng.uniform(0.5, 0.9))))
        trace["steps"] = steps[:keep]
    elif detail == "dropped_steps":
        for _ in range(min(rng.randint(1, 3), len(steps) - 2)):
            del steps[rng.randrange(1, len(steps))]
    elif detail == "reordered_tool_results" and not _reorder_tool_results(steps, rng):
        # nothing to reorder (no list result, fewer than two different tool calls)
        return _edit(trace, "dropped_steps", rng, seed)
    _renumber(trace)
    return detail


class _Families:
    """Which run each family is: its task and the conversation used as its skeleton (two small
    integers per family), and the tasks still open for re-runs."""

    def __init__(self, seed: int, material: _Material) -> None:
        self.seed = seed
        self.material = material
        self.rng = random.Random(f"copies-pile:{seed}:families")
        self.real_tasks = list(material.tasks)
        self.rng.shuffle(self.real_tasks)
        self.task_of = array("q")  # family -> task (tau-bench task number, or synthetic)
        self.attempt_of = array("b")  # family -> attempt (the skeleton's trial)
        self.base_of = array("l")  # synthetic task - SYNTHETIC -> its tau-bench task
        self.used: dict[int, int] = {}  # open task -> bitmask of attempts used
        self.open_real: list[int] = []
        self.open_synthetic: list[int] = []
        self.next_real = 0

    SYNTHETIC = 1_000_000  # synthetic task numbers start here

    def __len__(self) -> int:
        return len(self.task_of)

    def _add(self, task: int, attempt: int) -> int:
        self.task_of.append(task)
        self.attempt_of.append(attempt)
        mask = self.used.get(task, 0) | (1 << attempt)
        opened = self.open_real if task < self.SYNTHETIC else self.open_synthetic
        if mask == (1 << ATTEMPTS) - 1:
            self.used.pop(task, None)
            if task in opened:
                opened.remove(task)
        else:
            if task not in self.used:
                opened.append(task)
                if len(self.open_synthetic) > OPEN_TASKS:
                    self.used.pop(self.open_synthetic.pop(0), None)
            self.used[task] = mask
        return len(self.task_of) - 1

    def novel(self) -> int:
        if self.next_real < len(self.real_tasks):
            self.next_real += 1
            return self._add(self.real_tasks[self.next_real - 1], 0)
        task = self.SYNTHETIC + len(self.base_of)
        self.base_of.append(self.rng.choice(self.material.tasks))
        return self._add(task, self.rng.randrange(ATTEMPTS))

    def rerun(self) -> int:
        opened = self.open_real or self.open_synthetic
        if not opened:
            return self.novel()
        task = self.rng.choice(opened)
        free = [a for a in range(ATTEMPTS) if not self.used[task] >> a & 1]
        return self._add(task, self.rng.choice(free))

    def task_name(self, family: int) -> str:
        task = self.task_of[family]
        return (
            f"tau-bench:{task}" if task < self.SYNTHETIC else f"synthetic:{task - self.SYNTHETIC}"
        )

    def trace(self, family: int, paraphrased: bool = False) -> dict[str, Any]:
        """The family's run (reworded if ``paraphrased``), as a fresh dict."""
        task, attempt = self.task_of[family], self.attempt_of[family]
        if task < self.SYNTHETIC:
            trace = self.material.real(self.material.by_attempt[(task, attempt)], paraphrased)
        else:
            base = self.base_of[task - self.SYNTHETIC]
            skeleton = self.material.by_attempt[(base, attempt)]
            label = f"synthetic:{task - self.SYNTHETIC}:attempt-{attempt}"
            trace = self.material.synthetic(
                f"{self.seed}:{task}", attempt, skeleton, paraphrased, label
            )
        created = datetime.datetime(2024, 6, 1) + datetime.timedelta(seconds=37 * family)
        trace["metadata"]["created_at"] = created.isoformat() + "Z"
        return trace


def realistic_pile(size: int, seed: int = 0) -> Iterator[tuple[dict[str, Any], Truth]]:
    """``size`` traces of the realistic pile with their truth, one at a time (see the module)."""
    material = _material()
    families = _Families(seed, material)
    rng = random.Random(f"copies-pile:{seed}:kinds")
    block: list[str] = []
    for i in range(size):
        if not block:
            block = [kind for kind, count in BLOCK.items() for _ in range(count)]
            rng.shuffle(block)
            if i == 0:  # the pile starts with a run: a copy needs a family before it
                block.remove("novel")
                block.append("novel")
        kind = block.pop()
        trace_id = f"kp:trace:pile-{i:07d}"
        detail = ""
        if kind in ("novel", "rerun"):
            family = families.novel() if kind == "novel" else families.rerun()
            trace = families.trace(family)
            detail = "tau-bench" if families.task_of[family] < families.SYNTHETIC else "synthetic"
        else:
            family = rng.randrange(len(families))
            trace = families.trace(family, paraphrased=kind == "paraphrase")
            if kind == "copy":
                detail = rng.choice(TRIVIAL)
                _trivial(trace, detail, rng, str(i))
            elif kind == "edit":
                detail = _edit(trace, rng.choice(EDITS), rng, f"{seed}:edit:{i}")
        trace["id"] = trace_id
        yield trace, Truth(trace_id, family, families.task_name(family), kind, detail)


def truth_path(pile: Path) -> Path:
    """Where :func:`write_pile` writes the truth of ``pile``: beside it, ``NAME.truth.jsonl.gz``."""
    name = pile.name.removesuffix(".gz").removesuffix(".jsonl")
    return pile.with_name(f"{name}.truth.jsonl.gz")


def write_pile(path: Path, size: int, seed: int = 0) -> Path:
    """Write the pile as gzip JSONL at ``path`` and its truth beside it (:func:`truth_path`),
    one trace at a time; the truth file's path."""
    truth = truth_path(path)
    with (
        gzip.open(path, "wt", encoding="utf-8", compresslevel=1) as traces,
        gzip.open(truth, "wt", encoding="utf-8", compresslevel=1) as truths,
    ):
        for trace, record in realistic_pile(size, seed):
            traces.write(json.dumps(trace, separators=(",", ":")) + "\n")
            truths.write(json.dumps(record.to_dict(), separators=(",", ":")) + "\n")
    return truth


def read_truth(path: Path, limit: int | None = None) -> dict[str, Truth]:
    """The truth file :func:`write_pile` wrote (its first ``limit`` lines), by trace id."""
    truth: dict[str, Truth] = {}
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if limit is not None and number > limit:
                break
            record = Truth.from_dict(json.loads(line))
            truth[record.id] = record
    return truth


# -- word shingles (the truth check of the tests) ------------------------------------------

_WORDS = re.compile(r"\w+")


def copy_text(trace: Mapping[str, Any]) -> str:
    """The words of a trace that a copy decision reads: objective, step contents, tool names
    and tool inputs."""
    parts = [str(trace["task"]["objective"])]
    for step in trace["steps"]:
        if step.get("content"):
            parts.append(str(step["content"]))
        if step.get("tool"):
            parts.append(str(step["tool"].get("name", "")))
        if step.get("input") is not None:
            parts.append(json.dumps(step["input"], sort_keys=True))
    return " ".join(parts)


def shingles(trace: Mapping[str, Any], size: int = 3) -> frozenset[tuple[str, ...]]:
    """The word ``size``-shingles of :func:`copy_text`, lower-cased."""
    words = _WORDS.findall(copy_text(trace).lower())
    return frozenset(tuple(words[i : i + size]) for i in range(max(1, len(words) - size + 1)))


def jaccard(a: frozenset[Any], b: frozenset[Any]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


# -- scoring a curation against the truth ---------------------------------------------------


@dataclass
class PairScore:
    """Grouped pairs against family truth: pairs of one family (truth), pairs grouped, pairs
    grouped that are of one family (correct)."""

    traces: int = 0
    truth_pairs: int = 0
    grouped_pairs: int = 0
    correct_pairs: int = 0
    #: Copies of the kind whose family's run is in the pile, and those in its group: the
    #: copy found against its source, whatever became of the family's other copies.
    with_source: int = 0
    found: int = 0

    @property
    def precision(self) -> float:
        """Correct / grouped (1.0 when nothing is grouped: nothing was grouped wrongly)."""
        return self.correct_pairs / self.grouped_pairs if self.grouped_pairs else 1.0

    @property
    def recall(self) -> float:
        """Correct / truth (1.0 when the truth has no pair)."""
        return self.correct_pairs / self.truth_pairs if self.truth_pairs else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    @property
    def found_share(self) -> float | None:
        """Found / with source (None for a kind that is no copy: a family's run)."""
        return self.found / self.with_source if self.with_source else None

    def line(self) -> str:
        return f"{self.precision:.3f} / {self.recall:.3f} / {self.f1:.3f}"


@dataclass
class CopyScore:
    """How a curation's groups and kept set stand against the truth (:func:`measure_curation`)."""

    overall: PairScore
    per_kind: dict[str, PairScore]
    traces: int
    families: int
    kept: int
    #: Families none of whose traces is kept, a trace of which was grouped under a kept trace
    #: of another family: the user lost that run.
    families_lost: int
    #: Families none of whose traces is kept, for any reason (lost, or rejected by the decider).
    families_without_kept: int
    #: Kept traces beyond one per family.
    redundant_kept: int
    #: Pairs of two runs at one task (different families): in the pile, and grouped.
    rerun_pairs: int
    rerun_pairs_grouped: int
    notes: list[str] = field(default_factory=list)

    @property
    def redundant_share(self) -> float:
        return self.redundant_kept / self.traces if self.traces else 0.0


def _pairs(n: int) -> int:
    return n * (n - 1) // 2


def _with_kind(total: int, of_kind: int) -> int:
    """Pairs among ``total`` items that involve at least one of ``of_kind`` of them."""
    return _pairs(total) - _pairs(total - of_kind)


def _read_groups(
    truth: Mapping[str, Truth], groups_lines: Iterable[str | Mapping[str, Any]]
) -> tuple[list[list[str]], dict[str, int]]:
    """The groups (kept id first) and the group of each grouped id (see measure_curation)."""
    group_of: dict[str, int] = {}
    groups: list[list[str]] = []
    for number, line in enumerate(groups_lines, 1):
        record = json.loads(line) if isinstance(line, str) else line
        members = [record["kept"], *(d["id"] for d in record.get("duplicates", []))]
        for member in members:
            if member not in truth:
                raise ValueError(f"groups line {number}: {member!r} is not in the pile's truth")
            if member in group_of:
                raise ValueError(f"groups line {number}: {member!r} is already in a group")
            group_of[member] = len(groups)
        groups.append(members)

    return groups, group_of


def _count_found(
    truth: Mapping[str, Truth], group_of: Mapping[str, int], per_kind: dict[str, PairScore]
) -> None:
    """Count, per kind, the copies grouped with their family's run (PairScore.found)."""
    run_of = {t.family: t.id for t in truth.values() if t.kind in ("novel", "rerun")}
    for record in truth.values():
        source = run_of.get(record.family)
        if record.kind in ("novel", "rerun") or source is None:
            continue
        per_kind[record.row].with_source += 1
        group = group_of.get(record.id)
        per_kind[record.row].found += group is not None and group == group_of.get(source)


def measure_curation(
    truth: Mapping[str, Truth],
    kept_ids: Iterable[str],
    groups_lines: Iterable[str | Mapping[str, Any]],
) -> CopyScore:
    """Score a curation of the pile whose truth is ``truth`` (by trace id).

    A pair of traces is grouped when both are in one group (its kept trace included). Per kind
    (:attr:`Truth.row`), a pair counts for every kind of its two traces. ``groups_lines`` are
    ``knowledgepulse.groups/1`` lines (text or parsed: ``kept``, ``duplicates[].id``; any
    ``relation`` is ignored). Traces in no group are alone. An id not in ``truth`` is an error.

    Raises:
        ValueError: a kept or grouped id is not a trace of the pile, or a trace is in two groups.
    """
    kept = set(kept_ids)
    for trace_id in kept:
        if trace_id not in truth:
            raise ValueError(f"kept trace {trace_id!r} is not in the pile's truth")
    groups, group_of = _read_groups(truth, groups_lines)

    rows = sorted({t.row for t in truth.values()})
    overall = PairScore(traces=len(truth))
    per_kind = {row: PairScore() for row in rows}
    family_size: Counter[int] = Counter()
    family_row: Counter[tuple[int, str]] = Counter()
    task_size: Counter[str] = Counter()
    for record in truth.values():
        family_size[record.family] += 1
        family_row[(record.family, record.row)] += 1
        task_size[record.task] += 1
        per_kind[record.row].traces += 1
    family_task = {t.family: t.task for t in truth.values()}
    overall.truth_pairs = sum(_pairs(n) for n in family_size.values())
    for (family, row), count in family_row.items():
        per_kind[row].truth_pairs += _with_kind(family_size[family], count)
    same_task_pairs = sum(_pairs(n) for n in task_size.values())
    rerun_pairs = same_task_pairs - overall.truth_pairs

    rerun_grouped = 0
    for members in groups:
        records = [truth[m] for m in members]
        size = len(records)
        overall.grouped_pairs += _pairs(size)
        families = Counter(r.family for r in records)
        overall.correct_pairs += sum(_pairs(n) for n in families.values())
        in_row = Counter(r.row for r in records)
        in_family_row = Counter((r.family, r.row) for r in records)
        for row, count in in_row.items():
            per_kind[row].grouped_pairs += _with_kind(size, count)
        for (family, row), count in in_family_row.items():
            per_kind[row].correct_pairs += _with_kind(families[family], count)
        tasks = Counter(r.task for r in records)
        rerun_grouped += sum(_pairs(n) for n in tasks.values()) - sum(
            _pairs(n) for n in families.values()
        )

    _count_found(truth, group_of, per_kind)
    kept_families = {truth[k].family for k in kept}
    lost = set()
    for members in groups:
        leader = truth[members[0]].family
        for member in members[1:]:
            family = truth[member].family
            if family != leader and family not in kept_families:
                lost.add(family)
    return CopyScore(
        overall=overall,
        per_kind=per_kind,
        traces=len(truth),
        families=len(family_size),
        kept=len(kept),
        families_lost=len(lost),
        families_without_kept=len(family_size) - len(kept_families),
        redundant_kept=len(kept) - len(kept_families),
        rerun_pairs=rerun_pairs,
        rerun_pairs_grouped=rerun_grouped,
        notes=[f"{len(family_task)} families"],
    )


# -- the ``copies`` section -----------------------------------------------------------------

#: The thresholds of the sweep (``kp curate --similarity J``), at the smallest size.
SWEEP = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
#: Traces of the pile whose rate says which kp curate runs fit the time budget.
PROBE = 200
#: Today's whole-trace MiniLM curation: its cosine threshold (kp curate's old default).
MINILM_SIMILARITY = 0.95


@dataclass
class Decision:
    """One decider's run on a pile: its score against the truth, or why there is none."""

    decider: str
    traces: int
    score: CopyScore | None = None
    seconds: float | None = None
    peak_mib: float | None = None
    note: str = ""

    @property
    def rate(self) -> float | None:
        return self.traces / self.seconds if self.seconds else None

    @property
    def short(self) -> str:
        """The decider's name in a column of the per-kind table."""
        name = self.decider.rsplit(", ", 1)[0]
        for long, short in (
            ("kp curate (default)", "kp curate"),
            ("kp curate --similarity ", "kp curate J="),
            ("SemHash static, cosine ≥ ", "SemHash "),
            ("MiniLM whole-trace, cosine ≥ ", "MiniLM "),
        ):
            name = name.replace(long, short)
        return name[:24]


_MEASURE = (
    "import resource, subprocess, sys, time; t = time.perf_counter(); "
    "p = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
    "d = time.perf_counter() - t; "
    "print(p.stderr.strip().splitlines()[-1:] if p.returncode else '', file=sys.stderr); "
    "print(d, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, p.returncode)"
)


def run_kp_curate(
    pile: Path, out: Path, similarity: float | None = None
) -> tuple[float, float, list[str], Path] | str:
    """``kp curate PILE -o KEPT --groups GROUPS [--similarity J]`` in a child process: its
    seconds, peak RSS (MiB), kept ids and groups file; or why it failed."""
    kept, groups = out / "kept.jsonl", out / "groups.jsonl"
    args = [sys.executable, "-m", "knowledgepulse", "curate", str(pile), "-q",
            "-o", str(kept), "--groups", str(groups)]  # fmt: skip
    if similarity is not None:
        args += ["--similarity", f"{similarity:g}"]
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, *args], capture_output=True, text=True, check=False
    )
    try:
        seconds, max_rss_kib, code = done.stdout.split()
    except ValueError:
        return f"no measurement: {done.stderr.strip()[-200:]}"
    if code != "0":
        return f"kp curate exited {code}: {done.stderr.strip()[-200:]}"
    with kept.open(encoding="utf-8") as lines:
        ids = [json.loads(line)["id"] for line in lines if line.strip()]
    return float(seconds), int(max_rss_kib) / 1024, ids, groups


def _minilm_worker(pile: Path, limit: int, out: Path) -> dict[str, Any]:
    """Today's whole-trace MiniLM curation (library ``curate``, the bulk embedder, cosine ≥
    :data:`MINILM_SIMILARITY`) on the first ``limit`` traces, in this process; its decision is
    written to ``out`` (``kept.txt``, ``groups.jsonl``)."""
    import resource

    import knowledgepulse as kp
    from knowledgepulse.embedding import choose_embedder
    from knowledgepulse.scoring._curation import curate

    embedder = choose_embedder("auto", bulk=True).embedder
    if embedder is None:
        raise RuntimeError("no MiniLM embedder installed")
    traces = []
    with gzip.open(pile, "rt", encoding="utf-8") as handle:
        for line, _ in zip(handle, range(limit)):
            traces.append(kp.ReasoningTrace.model_validate_json(line))
    embedder.embed(["warm up"])
    started = time.perf_counter()
    result = curate(traces, embedder=embedder, similarity=MINILM_SIMILARITY)
    seconds = time.perf_counter() - started
    (out / "kept.txt").write_text("".join(f"{t.id}\n" for t in result.kept), encoding="utf-8")
    with (out / "groups.jsonl").open("w", encoding="utf-8") as groups:
        groups.writelines(json.dumps(g.to_dict()) + "\n" for g in result.groups)
    return {
        "traces": len(traces),
        "seconds": seconds,
        "embedder": embedder.name,
        "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def _run_minilm(pile: Path, limit: int, out: Path) -> dict[str, Any] | str:
    command = [sys.executable, "-m", "benchmarks._copy_pile", "minilm", str(pile), str(limit)]
    done = subprocess.run([*command, str(out)], capture_output=True, text=True, check=False)
    if done.returncode < 0:
        return f"killed by signal {-done.returncode}"
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        return lines[-1] if lines else f"exit {done.returncode}"
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _decided(out: Path) -> tuple[list[str], list[str]]:
    """The kept ids and group lines a worker wrote to ``out``."""
    kept = (out / "kept.txt").read_text(encoding="utf-8").split()
    groups = (out / "groups.jsonl").read_text(encoding="utf-8").splitlines()
    return kept, groups


def bench_copies(
    sizes: list[int],
    budget_s: float = 1800.0,
    minilm_traces: int = 2_000,
    seed: int = 0,
    sweep: tuple[float, ...] = SWEEP,
) -> list[Decision]:
    """The ``copies`` section: per size, the realistic pile written with its truth and
    ``kp curate`` (its default threshold) run on it in a child process, scored; at the
    smallest size, the threshold sweep, SemHash (static model, cosine ≥ 0.95) and today's
    whole-trace MiniLM curation (first ``minilm_traces`` traces) on the same pile, scored the
    same way. ``kp curate`` first runs on a pile of :data:`PROBE` traces: a run that would
    take longer than ``budget_s`` at that rate is reported as not measured."""
    from ._figures import Figure, report

    if not _corpus.TAU_BENCH.is_file():
        report(Figure("copies", None, "", note="tau-bench not installed"))
        return []
    decisions: list[Decision] = []
    rate = 0.0
    if budget_s > 0:
        with tempfile.TemporaryDirectory() as tmp:
            probe = Path(tmp) / "probe.jsonl.gz"
            probe_truth = read_truth(write_pile(probe, PROBE, seed))
            measured = run_kp_curate(probe, Path(tmp))
            if isinstance(measured, str):
                report(Figure("copies: kp curate", None, "traces/s", note=measured))
                return []
            rate = PROBE / measured[0]
            # The probe pile is the first PROBE traces of every pile of this seed: its
            # decision is scored too (the one kp curate figure where the budget allows none).
            seconds, peak, kept, groups = measured
            with groups.open(encoding="utf-8") as lines:
                score = measure_curation(probe_truth, kept, lines)
            label = f"kp curate (default), first {PROBE} (rate probe)"
            decisions.append(Decision(label, PROBE, score, seconds, peak))
            _report_decision(decisions[-1])
        print(f"copies: kp curate on a {PROBE}-trace pile: {rate:,.1f} traces/s", flush=True)

    def too_long(traces: int) -> str | None:
        if budget_s <= 0:
            return "not measured: no time budget (--copies-budget 0)"
        if traces / rate <= budget_s:
            return None
        return (
            f"not measured: ~{traces / rate / 60:,.0f} min at the probe's {rate:,.1f} traces/s "
            f"> the {budget_s / 60:g} min budget"
        )

    for index, size in enumerate(sorted(sizes)):
        with tempfile.TemporaryDirectory() as tmp:
            pile = Path(tmp) / "pile.jsonl.gz"
            started = time.perf_counter()
            truth = read_truth(write_pile(pile, size, seed))
            print(
                f"copies: pile of {size:,} traces written in {time.perf_counter() - started:,.0f} s "
                f"({len({t.family for t in truth.values()}):,} families, seed {seed})",
                flush=True,
            )
            runs: list[tuple[str, float | None]] = [(f"kp curate (default), {size:,}", None)]
            if index == 0:
                runs += [(f"kp curate --similarity {j:g}, {size:,}", j) for j in sweep]
            for label, similarity in runs:
                decision = Decision(label, size, note=too_long(size) or "")
                if not decision.note:
                    out = Path(tmp) / "curate"
                    out.mkdir(exist_ok=True)
                    curated = run_kp_curate(pile, out, similarity)
                    if isinstance(curated, str):
                        decision.note = curated
                    else:
                        decision.seconds, decision.peak_mib, kept, groups = curated
                        with groups.open(encoding="utf-8") as lines:
                            decision.score = measure_curation(truth, kept, lines)
                decisions.append(decision)
                _report_decision(decision, default=similarity is None, size=size)
            if index != 0:
                continue
            decisions.append(_semhash_decision(pile, Path(tmp), size, truth))
            _report_decision(decisions[-1])
            if min(size, minilm_traces):
                decisions.append(_minilm_decision(pile, Path(tmp), min(size, minilm_traces)))
                _report_decision(decisions[-1])
    print_tables(decisions)
    return decisions


def _semhash_decision(pile: Path, tmp: Path, size: int, truth: Mapping[str, Truth]) -> Decision:
    """SemHash (static model, :func:`benchmarks._curation_scale._worker`) on the pile, scored."""
    from ._curation_scale import SIMILARITY, _run_worker

    out = tmp / "semhash"
    out.mkdir()
    semhash = _run_worker("semhash-static", pile, None, out)
    decision = Decision(f"SemHash static, cosine ≥ {SIMILARITY}, {size:,}", size)
    if isinstance(semhash, str):
        decision.note = semhash
    else:
        decision.seconds, decision.peak_mib = semhash["seconds"], semhash["peak_mib"]
        decision.score = measure_curation(truth, *_decided(out))
        decision.note = "embed+index+dedup timed (reading not)"
    return decision


def _minilm_decision(pile: Path, tmp: Path, limit: int) -> Decision:
    """Today's whole-trace MiniLM curation on the pile's first ``limit`` traces, scored
    against their truth."""
    out = tmp / "minilm"
    out.mkdir()
    minilm = _run_minilm(pile, limit, out)
    label = f"MiniLM whole-trace, cosine ≥ {MINILM_SIMILARITY}, first {limit:,}"
    decision = Decision(label, limit)
    if isinstance(minilm, str):
        decision.note = minilm
    else:
        decision.seconds, decision.peak_mib = minilm["seconds"], minilm["peak_mib"]
        first = read_truth(truth_path(pile), limit)
        decision.score = measure_curation(first, *_decided(out))
        decision.note = f"{minilm['embedder']}; curate() timed (reading not)"
    return decision


def _report_decision(decision: Decision, default: bool = False, size: int = 0) -> None:
    """Report a decision's figures (with the issue's targets for kp curate's default)."""
    from ._figures import Figure, report

    label = f"copies: {decision.decider}"
    score = decision.score
    if score is None:
        report(Figure(label, None, "", note=decision.note))
        return
    report(
        Figure(
            f"{label}, precision",
            score.overall.precision,
            "",
            0.95 if default else None,
            False,
            note=f"recall {score.overall.recall:.3f}, F1 {score.overall.f1:.3f}; "
            f"{score.families_lost} of {score.families:,} families lost",
        )
    )
    if default:
        report(Figure("  recall", score.overall.recall, "", 0.93, False))
        report(
            Figure(
                "  redundant kept traces, share of N",
                score.redundant_share,
                "",
                0.01,
                note=f"{score.redundant_kept:,} of {score.traces:,}",
            )
        )
        report(
            Figure(
                "  re-run pairs grouped (attempts at one task)",
                score.rerun_pairs_grouped,
                "pairs",
                note=f"of {score.rerun_pairs:,}",
            )
        )
        report(
            Figure(
                "  traces/s, end to end",
                decision.rate,
                "traces/s",
                # 10^6 in <= 20 minutes
                10**6 / 1200 if size >= 10**6 else None,
                False,
                note=f"{decision.seconds:,.1f} s",
            )
        )
        report(Figure("  peak RSS", decision.peak_mib, "MiB", 1536))


def print_tables(decisions: list[Decision]) -> None:
    """The deciders side by side, then the per-kind table (pairs involving a trace of that
    kind: precision / recall)."""
    print("\ncopies against family truth (pairs grouped; CPU: " + _cpu() + ")")
    header = (
        f"{'decider':<48} {'traces':>9} {'P / R / F1':>22} {'families lost':>16} "
        f"{'redundant kept':>18} {'re-run pairs':>14} {'traces/s':>10} {'peak RSS':>10}"
    )
    print(header)
    print("-" * len(header))
    for d in decisions:
        if d.score is None:
            print(f"{d.decider:<48} {d.traces:>9,} {d.note}")
            continue
        s = d.score
        lost = f"{s.families_lost:,} of {s.families:,}"
        redundant = f"{s.redundant_kept:,} ({s.redundant_share:.2%})"
        reruns = f"{s.rerun_pairs_grouped:,} of {s.rerun_pairs:,}"
        rate = f"{d.rate:,.1f}" if d.rate else "—"
        peak = f"{d.peak_mib:,.0f} MiB" if d.peak_mib else "—"
        print(
            f"{d.decider:<48} {d.traces:>9,} {s.overall.line():>22} {lost:>16} {redundant:>18} "
            f"{reruns:>14} {rate:>10} {peak:>10}"
        )
    scored = [d for d in decisions if d.score is not None]
    if not scored:
        return
    rows = sorted({row for d in scored for row in d.score.per_kind})  # type: ignore[union-attr]
    largest = max((d.score for d in scored if d.score), key=lambda s: s.traces)
    print(
        "\nper kind (its traces in the largest pile scored): precision / recall of the pairs"
        " involving a trace of the kind / share of its copies grouped with their family's run"
    )
    print(f"{'kind':<36}" + "".join(f" {d.short:>24}" for d in scored))
    for row in rows:
        cells = []
        for d in scored:
            kind = d.score.per_kind.get(row)  # type: ignore[union-attr]
            found = "" if kind is None or kind.found_share is None else f" / {kind.found_share:.2f}"
            cells.append(f"{kind.precision:.2f} / {kind.recall:.2f}{found}" if kind else "—")
        kind = largest.per_kind.get(row)
        traces = kind.traces if kind else 0
        print(f"{row + f' ({traces:,})':<36}" + "".join(f" {c:>24}" for c in cells))


def _cpu() -> str:
    from .__main__ import _cpu_name

    return f"{os.cpu_count()} CPUs, {_cpu_name()}"


if __name__ == "__main__":
    if sys.argv[1] == "minilm":
        print(json.dumps(_minilm_worker(Path(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4]))))
    elif sys.argv[1] == "write":  # python -m benchmarks._copy_pile write PATH SIZE [SEED]
        seed = int(sys.argv[4]) if len(sys.argv) > 4 else 0
        print(write_pile(Path(sys.argv[2]), int(sys.argv[3]), seed))
