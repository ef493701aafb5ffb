"""Redaction measured on a planted corpus, and its laws checked on generated text."""

from __future__ import annotations

import random
import re
from collections import Counter
from typing import Any

from benchmarks._redaction import PLANTED_KINDS, leaked, planted_traces, secret_value
from hypothesis import given, settings
from hypothesis import strategies as st

from _planting import TRACES, plant, plantable_paths, secrets_of_every_kind
from knowledgepulse.redaction import KINDS, redact_text, redact_trace


def test_every_planted_secret_is_caught_and_counted_once() -> None:
    planted_total: Counter[str] = Counter()
    found: Counter[str] = Counter()
    missed = []
    for trace, planted in planted_traces(seed=11, count=150):
        redacted, report = redact_trace(trace)
        missed += leaked(redacted.to_json(), planted)
        planted_total.update(kind for kind, _ in planted)
        found.update(report.counts)
    assert missed == []
    assert found == planted_total
    assert set(found) == set(KINDS)


_RNG = random.Random(5)
# A few hundred real-shaped secrets of every kind, drawn once; hypothesis picks among them.
SECRETS = [(kind, secret_value(_RNG, kind)) for kind in PLANTED_KINDS for _ in range(20)]

# A generated word is ordinary unless it labels a birth date: "BirthDATE" or "Dob" before the
# token "2024-05-20T10:00:00Z" is a date of birth, rightly redacted (hypothesis drew
# "BirthDATE" once in a full run).
_WORD = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", min_size=1, max_size=12
).filter(lambda word: re.search("dob|birth|born", word, re.IGNORECASE) is None)
_ORDINARY_TOKEN = st.one_of(
    _WORD,
    st.integers(0, 99).map(str),
    st.sampled_from(
        [
            "2024-05-20T10:00:00Z",
            "v2.3.1",
            "1.26.4",
            "#1234567890123",
            "550e8400-e29b-41d4-a716-446655440000",
            "3f786850e387550fdab836ed7e6dc881de23001b",
            "$1,234.56",
            "(2",
            "free)",
            "task-force",
            "icon@2x.png",
            "```",
            '{"n":',
            "42}",
            "https://example.com/a/b?page=2",
        ]
    ),
)
_ORDINARY = st.lists(
    st.tuples(_ORDINARY_TOKEN, st.sampled_from([" ", "\n", ", ", ". ", "; "])), max_size=30
).map(lambda pairs: "".join(token + sep for token, sep in pairs))
_MIXED = st.lists(
    st.one_of(_ORDINARY, st.sampled_from(SECRETS).map(lambda pair: pair[1])), max_size=8
).map(" ".join)


@settings(max_examples=300, deadline=None)
@given(_ORDINARY)
def test_ordinary_text_round_trips_unchanged(text: str) -> None:
    assert redact_text(text) == (text, Counter())


@settings(max_examples=300, deadline=None)
@given(_MIXED, st.sampled_from(["federated", "aggregated", "private"]))
def test_redacting_twice_is_redacting_once(text: str, level: str) -> None:
    once, _ = redact_text(text, level)
    assert redact_text(once, level) == (once, Counter())


@settings(max_examples=300, deadline=None)
@given(_ORDINARY, st.sampled_from(SECRETS), _ORDINARY)
def test_a_secret_never_survives_and_its_placeholder_never_contains_it(
    before: str, secret: tuple[str, str], after: str
) -> None:
    kind, value = secret
    # "; " around the secret: "+44 20 7946 0958 10" could be one phone number or a number
    # followed by 10, and no rule can tell.
    redacted, counts = redact_text(f"{before}; {value}; {after}", "private")
    assert value not in redacted
    assert counts == Counter({kind: 1})
    assert redacted == f"{before}; {redact_text(value)[0]}; {after}"


PLANTED = secrets_of_every_kind(seed=22)


@settings(max_examples=15, deadline=None)
@given(TRACES)
def test_a_secret_planted_at_any_path_of_a_trace_is_never_kept(trace: dict[str, Any]) -> None:
    """Issue 22 item 2: every kind, at every place of the trace not named exempt (the tool
    object, metadata fields, dictionary keys, integers) is redacted."""
    paths = plantable_paths(trace)
    assert {how for how, _ in paths} == {"string", "key", "number"}
    for kind, value, text in PLANTED:
        for how, path in paths:
            if how == "number" and kind != "card":
                continue
            redacted, report = redact_trace(plant(trace, how, path, text, value))
            assert leaked(redacted.to_json(), [(kind, value)]) == [], (kind, how, path)
            assert report.counts[kind] >= 1, (kind, how, path)
