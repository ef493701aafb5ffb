"""The paraphrases of the copies pile: every prose turn of the 200 tau-bench conversations
reworded by fixed rules, made once and shipped as ``benchmarks/data/tau-bench-paraphrases.json.gz``.

How they were made: no language model runs offline here, so the rewording is rule-based and
deterministic (:func:`paraphrase`): contractions expanded, ~100 words and phrases of these
conversations replaced by synonyms of the same sense (``booking`` for ``reservation``, ``kindly``
for ``please``…), and the first two sentences of a line swapped. Only prose is reworded (the
objective, the agent's messages, the user's turns, error notes without a tool); tool calls and
their results stay as they were, as they would in a re-told conversation. Rebuild the file with
``python -m benchmarks._paraphrase`` (a test checks that the shipped file is what the rules make).
A file of model-made paraphrases of the same shape can replace it.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data" / "tau-bench-paraphrases.json.gz"

MADE_BY = (
    "rule-based rewording (benchmarks/_paraphrase.py): contractions expanded, words and phrases "
    "replaced by synonyms, the first two sentences of a line swapped; prose turns only"
)

#: Replacements, applied in one pass (a replaced word is not replaced again), longest first.
SYNONYMS: dict[str, str] = {
    "I'll": "I will",
    "I'm": "I am",
    "I'd": "I would",
    "I've": "I have",
    "don't": "do not",
    "doesn't": "does not",
    "can't": "cannot",
    "won't": "will not",
    "you'd": "you would",
    "you're": "you are",
    "you'll": "you will",
    "there's": "there is",
    "it's": "it is",
    "that's": "that is",
    "let's": "let us",
    "would like to": "want to",
    "would you like": "do you want",
    "let me know": "tell me",
    "thank you": "many thanks",
    "thanks": "thank you",
    "could you please": "would you kindly",
    "could you": "can you",
    "can you": "could you",
    "please": "kindly",
    "proceed": "go ahead",
    "need": "require",
    "needs": "requires",
    "details": "particulars",
    "provide": "share",
    "help": "support",
    "further": "more",
    "assistance": "support",
    "assist": "help",
    "reservation": "booking",
    "reservations": "bookings",
    "change": "modify",
    "changes": "modifications",
    "modify": "change",
    "cancel": "call off",
    "cancellation": "cancelling",
    "confirm": "verify",
    "available": "open",
    "information": "info",
    "questions": "queries",
    "understand": "see",
    "unfortunately": "regrettably",
    "sure": "of course",
    "yes": "yeah",
    "total": "overall",
    "options": "choices",
    "option": "choice",
    "cost": "price",
    "price": "cost",
    "want": "wish",
    "anything else": "something more",
    "here are": "these are",
    "successfully": "without trouble",
    "additional": "extra",
    "however": "but",
    "also": "as well",
    "check": "look at",
    "trip": "journey",
    "cheapest": "least expensive",
    "upgrade": "move up",
    "policy": "rules",
    "currently": "at the moment",
    "current": "present",
    "original": "first",
    "unable": "not able",
    "possible": "doable",
    "specific": "particular",
    "process": "handle",
    "processed": "handled",
    "appreciate": "value",
    "great": "excellent",
    "correct": "right",
    "recommend": "suggest",
    "request": "ask",
    "eligible": "entitled",
    "charged": "billed",
    "contact": "reach out to",
    "offer": "provide",
    "prefer": "would rather have",
    "instead": "rather",
    "inconvenience": "trouble",
    "delayed": "late",
    "purchase": "buy",
    "purchased": "bought",
    "retrieve": "fetch",
    "ensure": "make sure",
    "assume": "suppose",
    "depart": "leave",
    "departing": "leaving",
    "arrival": "landing",
    "passenger": "traveller",
    "passengers": "travellers",
    "canceled": "called off",
    "cancelled": "called off",
    "customer": "client",
    "certainly": "of course",
    "found": "located",
    "hold": "wait",
    "moment": "second",
    "wish": "want",
    "updated": "changed",
    "book": "reserve",
    "booked": "reserved",
    "refund": "reimbursement",
    "amount": "sum",
}

_PATTERN = re.compile(
    r"(?<![\w'])("
    + "|".join(re.escape(k) for k in sorted(SYNONYMS, key=len, reverse=True))
    + r")(?![\w'])",
    re.IGNORECASE,
)
_SENTENCES = re.compile(r"(?<=[.!?]) +")
_LOOKUP = {key.lower(): value for key, value in SYNONYMS.items()}


def _replace(match: re.Match[str]) -> str:
    found = match.group(0)
    new = _LOOKUP[found.lower()]
    if found[0].isupper():
        new = new[0].upper() + new[1:]
    return new


def paraphrase(text: str) -> str:
    """``text`` reworded by the rules (see the module): words, then sentence order per line."""
    lines = []
    for line in _PATTERN.sub(_replace, text).split("\n"):
        sentences = _SENTENCES.split(line)
        if len(sentences) >= 2 and sentences[1][-1:] in ".!?":
            sentences[0], sentences[1] = sentences[1], sentences[0]
        lines.append(" ".join(sentences))
    return "\n".join(lines)


def is_prose(step: dict[str, Any]) -> bool:
    """Whether a step is a message in words (reworded), not a tool call or a tool's result."""
    return bool(step.get("content")) and step.get("tool") is None and "input" not in step


def make_paraphrases(traces: list[dict[str, Any]]) -> dict[str, Any]:
    """The paraphrase table of ``traces``: per trace id, its reworded objective and prose steps
    (by step index)."""
    conversations = {}
    for trace in traces:
        steps = {
            str(i): paraphrase(step["content"])
            for i, step in enumerate(trace["steps"])
            if is_prose(step)
        }
        conversations[trace["id"]] = {
            "objective": paraphrase(trace["task"]["objective"]),
            "steps": steps,
        }
    return {"made_by": MADE_BY, "conversations": conversations}


def load_paraphrases(path: Path = DATA) -> dict[str, Any]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        table: dict[str, Any] = json.load(handle)
    return table


def write_paraphrases(path: Path = DATA) -> Path:
    """Make the table of the bundled tau-bench conversations and write it (gzip, no mtime, so
    that the same table makes the same bytes)."""
    from . import _corpus

    text = json.dumps(make_paraphrases(_corpus.tau_bench_traces()), indent=0, sort_keys=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as handle:
        handle.write(text.encode("utf-8"))
    return path


if __name__ == "__main__":
    print(write_paraphrases())
