"""A trace's copy facet: the digest of its normalised text and a MinHash signature of its run.

A copy is a question about words, so it is answered by the tools made for it (as text-dedup,
datatrove and NeMo Curator do): an exact hash of the normalised text finds exact and trivial
copies (whitespace, case, ids and timestamps inside the text), and a MinHash signature over
word shingles estimates the Jaccard similarity of two traces' shingle sets, so near copies
(words replaced, a step dropped) are found by LSH bands and decided by the estimate.

Two texts of a trace:

- the **whole text** (the objective, every step's content, tool, arguments and output summary,
  the outcome summary), normalised, is digested: equal digests are exact copies;
- the **run text** is what the agent and its user wrote: the whole text less the tool results
  (observation steps that carry a tool). Every attempt at a task reads the same tool results
  (the same reservation, the same file), so they say little about *which run* a trace is and
  make different attempts look alike: on the 200 tau-bench conversations the Jaccard
  similarity of word 4-shingles of two attempts at one task reaches 0.62 over the whole text,
  0.43 over the run text, while copies with 1-5 % of their words replaced stay above 0.55
  (docs/knowledge-base.md). The signature is taken over the run text's shingles; a trace
  whose run text has no word uses its whole text, and a trace with no word at all has no
  signature (it is never grouped: nothing to compare).

The signature is rensa's ``RMinHash`` (Rust; 41x faster than datasketch here, measured in
``python -m benchmarks copies``), kept as its low 16 bits per permutation (b-bit minwise
hashing: half the memory, and two unrelated values agree by chance once in 65,536, which the
estimate corrects for). Everything that makes a signature is named in :class:`CopyScheme`
and stored with it, so a signature made another way is never compared with this one.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from .._schema import ReasoningTrace

__all__ = [
    "DEFAULT_SCHEME",
    "CopyFacet",
    "CopyScheme",
    "copy_facet",
    "copy_facets",
    "estimated_similarity",
    "facets_of_texts",
    "normalise",
    "run_text",
    "trace_texts",
    "verbatim_share",
    "whole_text",
]

_WORD = re.compile(r"\w+")
#: A run's steps identify it only with this many tool calls or more: fewer leave too many
#: unrelated runs with the same steps.
STEPS_FROM_CALLS = 2
#: A run with fewer calls is identified by its steps and the values its messages name (words
#: with a digit of :data:`VALUE_CHARS` characters or more: ids, amounts, years) when the
#: calls and the distinct values make this many or more: a rewording keeps the facts it
#: tells. Two would keep 5 fewer paraphrases apart from their run (at 10^4 in the realistic
#: pile: 61 redundant against 66), but gave two runs with a shared opening and chat tails
#: naming no id the same steps
#: (``test_a_short_trace_held_in_runs_of_other_tasks_joins_one_and_drops_none``).
STEPS_FROM_NAMED = 3
#: The characters from which a word with a digit is a value that identifies a run.
#: Counts, list markers and durations ("1.", "5 to 7 days", "24 hours") are said in runs of
#: every task: at 10^6 in the realistic pile, runs of different tasks naming only such
#: numbers had the same steps, and 30 of the 37 families lost were taken so.
VALUE_CHARS = 3
#: Slots of the message sketch: one byte per message (the message's hash), the i-th message
#: in slot ``i % MESSAGE_SLOTS`` (several messages in one slot: the hash of them all).
MESSAGE_SLOTS = 16


@dataclass(frozen=True)
class CopyScheme:
    """How copy facets are made and compared; stored with every signature.

    ``bands`` x ``rows`` ≤ ``permutations``: two traces are a candidate pair when all
    ``rows`` values of one band agree (LSH); the candidate is a copy when the estimated
    Jaccard similarity over all ``permutations`` is ≥ the threshold.
    """

    name: str = "minhash-rensa-rmh"
    shingle: int = 4
    permutations: int = 128
    bits: int = 16
    bands: int = 32
    rows: int = 4
    seed: int = 20261128
    normalisation: int = 1
    #: Two traces with the same steps (step types, tool calls and arguments, tool results;
    #: with fewer than two calls, also the values their messages name) are copies from this
    #: estimated Jaccard similarity of their run texts up, when at most ``reworded_verbatim``
    #: of their messages are word for word the same (every message reworded: a re-run of the
    #: task repeats some turns word for word and writes others anew) and, in a pile, one of
    #: the two is at most ``reworded_margin`` below its most similar trace with the same
    #: steps: a rewording rewords one run, the one it is most like (docs/knowledge-base.md
    #: says how they were chosen).
    reworded: float = 0.17
    reworded_verbatim: float = 0.16
    reworded_margin: float = 0.05
    #: A trace whose run shingles are held in another's at this share or more (estimated from
    #: the Jaccard similarity and the two sizes), at Jaccard ≥ ``contained_floor``, with the
    #: same objective, is its copy: a truncated run (which starts as its run starts). tau-bench's
    #: attempts at one task reach 0.72.
    contained: float = 0.85
    contained_floor: float = 0.25

    def __post_init__(self) -> None:
        if self.bands * self.rows > self.permutations or self.rows > 64 // self.bits:
            raise ValueError(f"bands x rows must fit the signature: {self}")
        if self.bits != 16:
            raise ValueError("signatures are kept as 16-bit values")

    @property
    def label(self) -> str:
        """One string naming every parameter (and the hashing library's algorithm)."""
        return (
            f"{self.name}/{_algorithm()};shingle={self.shingle};perm={self.permutations};"
            f"bits={self.bits};bands={self.bands}x{self.rows};seed={self.seed};"
            f"norm={self.normalisation};steps={STEPS_FROM_CALLS}calls|{STEPS_FROM_NAMED}values{VALUE_CHARS}ch;"
            f"messages={MESSAGE_SLOTS}x8crc32;reworded={self.reworded:g}"
            f"/verbatim={self.reworded_verbatim:g}/margin={self.reworded_margin:g};"
            f"contained={self.contained:g}@{self.contained_floor:g}/objective"
        )

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "label": self.label}


def _algorithm() -> str:
    import rensa

    return f"rensa-alg{getattr(rensa.RMinHash, 'ALGORITHM_VERSION', '?')}"


DEFAULT_SCHEME = CopyScheme()


@dataclass(frozen=True)
class CopyFacet:
    """A trace's copy facet: ``digest`` of the normalised whole text (16 bytes), ``signature``
    (``permutations`` uint16 values, None when the trace has no word), ``words`` shingled and
    ``source``: ``run`` (the run text), ``whole`` (no word outside tool results) or ``none``."""

    digest: bytes
    signature: npt.NDArray[np.uint16] | None
    words: int
    source: str
    #: The digest of the run's steps (step types, tool calls with their arguments, tool
    #: results; with fewer than two tool calls, also the values its messages name), None when
    #: the calls and values are too few to identify the run: a reworded copy keeps it.
    steps: bytes | None = None
    #: The message sketch (:data:`MESSAGE_SLOTS` bytes): the i-th message's CRC-32 as one
    #: byte (1-255) in slot ``i % MESSAGE_SLOTS``, 0 where there is no message. Two traces with the
    #: same steps have their messages in the same places, so equal slots are messages written
    #: word for word alike (or, once in 255, by chance).
    messages: bytes = bytes(MESSAGE_SLOTS)
    #: The digest of the normalised objective (8 bytes). A truncated copy keeps its run's
    #: objective; a short run of another task held in a longer run has its own (at 10^5 in
    #: the realistic pile: every held pair of one family had the same, every other pair not).
    objective: bytes = bytes(8)


def normalise(text: str) -> str:
    """NFKC, case folded, volatile ids and timestamps replaced by their kind, whitespace
    collapsed: two texts that differ only there normalise to the same string (what the
    digest and the shingles see, as text)."""
    return _joined(_tokens(text)).decode("utf-8", errors="surrogatepass")


# Volatile tokens that make trivial copies differ are replaced by their kind: UUIDs, ISO-8601
# timestamps.
# Tokenising is the hashing pass's main cost: on ASCII text (most traces) a bytes pattern is
# twice as fast as ``\w+`` on str; other text is split by ``\w+`` (any script's letters).
_ASCII_WORD = re.compile(rb"[a-z0-9_]+")
_UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_TIMESTAMP = re.compile(rb"\d{4}-\d\d-\d\d[t ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:z|[+-]\d\d:?\d\d)?")
# A cheap look first: the substitutions scan every position and cost more than tokenising.
_MAYBE_TIMESTAMP = re.compile(rb"\d[t ]\d\d:\d\d")


def _maybe_uuid(data: bytes) -> bool:
    """Whether ``data`` has dashes 5 and 10 bytes apart, as every UUID does (a scan of its
    dashes: far cheaper than the pattern at every position)."""
    at = data.find(b"-")
    while at >= 0:
        if data[at + 5 : at + 6] == b"-" and data[at + 10 : at + 11] == b"-":
            return True
        at = data.find(b"-", at + 1)
    return False


def _mask(data: bytes) -> bytes:
    """UUIDs and timestamps replaced by their kind."""
    if _maybe_uuid(data):
        data = _UUID.sub(b" uuid ", data)
    if _MAYBE_TIMESTAMP.search(data):
        data = _TIMESTAMP.sub(b" timestamp ", data)
    return data


def _tokens(text: str) -> list[bytes] | list[str]:
    """The words of ``text``, case folded, volatile tokens replaced by kind: UTF-8 bytes for
    ASCII text, else str (rensa hashes a word the same either way), or bytes again when the
    text holds lone surrogates (which only bytes can carry)."""
    if text.isascii():
        return _ASCII_WORD.findall(_mask(text.lower().encode("ascii")))
    folded = unicodedata.normalize("NFKC", text).casefold()
    data = _mask(folded.encode("utf-8", errors="surrogatepass"))
    words = _WORD.findall(data.decode("utf-8", errors="surrogatepass"))
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return [w.encode("utf-8", errors="surrogatepass") for w in words]
    return words


def _joined(words: list[bytes] | list[str]) -> bytes:
    if words and isinstance(words[0], str):
        return " ".join(words).encode("utf-8", errors="surrogatepass")
    return b" ".join(words)  # type: ignore[arg-type]


def _arguments(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def _parts(trace: ReasoningTrace) -> list[tuple[str, bool]]:
    """The trace's texts in order, each with whether it belongs to the run text (tool
    results do not)."""
    parts = [(trace.task.objective, True)]
    for step in trace.steps:
        run = not (step.type == "observation" and step.tool is not None)
        if step.content:
            parts.append((step.content, run))
        if step.tool is not None:
            parts.append((step.tool.name, run))
        if step.input:
            parts.append((_arguments(step.input), run))
        if step.output_summary:
            parts.append((step.output_summary, run))
    parts.append((trace.outcome.result_summary, True))
    return parts


def whole_text(trace: ReasoningTrace) -> str:
    """Everything the trace says: objective, steps (content, tool, arguments, output summary)
    and outcome summary."""
    return "\n".join(text for text, _ in _parts(trace))


def run_text(trace: ReasoningTrace) -> str:
    """What the agent and its user wrote: the whole text less tool results (observation
    steps that carry a tool), which every attempt at the task reads alike."""
    return "\n".join(text for text, run in _parts(trace) if run)


# Odd 64-bit constants mixing a shingle's word hashes into one (order matters).
_MIX = np.uint64(0x9E3779B97F4A7C15)


def _shingle_hashes(words: npt.NDArray[np.uint64], size: int) -> npt.NDArray[np.uint64]:
    """One 64-bit hash per run of ``size`` consecutive word hashes (one for a shorter text)."""
    if len(words) <= size:
        size = len(words)
    count = len(words) - size + 1
    hashes = words[:count].copy()
    for offset in range(1, size):
        hashes *= _MIX
        hashes ^= words[offset : offset + count]
    return np.asarray(hashes, dtype=np.uint64)


def copy_facet(trace: ReasoningTrace, scheme: CopyScheme = DEFAULT_SCHEME) -> CopyFacet:
    """The copy facet of one trace (see the module)."""
    return copy_facets([trace], scheme)[0]


#: What a copy facet is made from: the run text, the tool results, the step types, the tool
#: calls (tool and arguments), the messages (the contents of steps without a tool), the
#: objective. Plain strings, so a batch of them crosses to a worker process cheaply.
TraceTexts = tuple[str, str, str, tuple[str, ...], tuple[str, ...], str]


def trace_texts(trace: ReasoningTrace) -> TraceTexts:
    """The texts :func:`facets_of_texts` makes ``trace``'s copy facet from."""
    parts = _parts(trace)
    calls = tuple(
        f"{step.tool.name} {_arguments(step.input or {})}"
        for step in trace.steps
        if step.type == "tool_call" and step.tool is not None
    )
    messages = tuple(step.content for step in trace.steps if step.tool is None and step.content)
    return (
        "\n".join(text for text, in_run in parts if in_run),
        "\n".join(text for text, in_run in parts if not in_run),
        " ".join(step.type for step in trace.steps),
        calls,
        messages,
        trace.task.objective,
    )


# A value a message names: a word with a digit (an id, an amount, a date). Anchored at the
# word's start, so a long word is scanned once, not once from each of its letters.
_VALUE = re.compile(rb"\b\w*[0-9]\w*")


def _steps_and_messages(
    types: str, calls: tuple[str, ...], results: bytes, messages: tuple[str, ...]
) -> tuple[bytes | None, bytes]:
    """The steps digest (None when too few calls and values identify the run) and the
    message sketch of one trace (see :class:`CopyFacet`)."""
    # Messages are compared case folded with their whitespace collapsed: cheap (no
    # tokenising, the hashing pass's main cost), and a copy that differs only there has
    # the digest of its run anyway.
    # CRC-32 (zlib): stable across processes and far cheaper than a digest per slot; a slot
    # of several messages continues the CRC over each, after a separator.
    folded = [message.lower().encode("utf-8", errors="surrogatepass") for message in messages]
    crcs = [0] * MESSAGE_SLOTS
    for index, message in enumerate(folded):
        slot = index % MESSAGE_SLOTS
        crcs[slot] = zlib.crc32(b"\x00" + b" ".join(message.split()), crcs[slot])
    used = min(len(folded), MESSAGE_SLOTS)
    sketch = bytes([1 + crc % 255 for crc in crcs[:used]]) + bytes(MESSAGE_SLOTS - used)
    values: list[bytes] = []
    if len(calls) < STEPS_FROM_CALLS:
        # Timestamps and ids masked as in the digest: a copy whose times moved keeps them.
        values = [
            value
            for value in _VALUE.findall(_mask(b"\n".join(folded)))
            if len(value) >= VALUE_CHARS
        ]
        if len(calls) + len(set(values)) < STEPS_FROM_NAMED:
            return None, sketch
    steps = hashlib.blake2b(types.encode("ascii"), digest_size=16)
    steps.update(b"\n" + _joined(_tokens("\n".join(calls))) + b"\n" + results)
    if values:
        # The values sorted: a rewording may move them within and between its messages.
        steps.update(b"\nvalues " + b" ".join(sorted(values)))
    return steps.digest(), sketch


def verbatim_share(a: bytes, b: bytes) -> float:
    """The share of two message sketches' slots that agree (of the larger number of used
    slots): the messages two traces with the same steps wrote word for word alike."""
    used = max(sum(1 for x in a if x), sum(1 for x in b if x))
    if not used:
        return 0.0
    return sum(1 for x, y in zip(a, b) if x and x == y) / used


def copy_facets(
    traces: Iterable[ReasoningTrace], scheme: CopyScheme = DEFAULT_SCHEME
) -> list[CopyFacet]:
    """The copy facets of ``traces``, in order; each depends only on its own trace."""
    return facets_of_texts([trace_texts(trace) for trace in traces], scheme)


def facets_of_texts(
    texts: Sequence[TraceTexts], scheme: CopyScheme = DEFAULT_SCHEME
) -> list[CopyFacet]:
    """The copy facets of traces given by :func:`trace_texts`, in order."""
    import rensa

    digests: list[bytes] = []
    steps: list[bytes | None] = []
    sketches: list[bytes] = []
    word_sets: list[list[Any]] = []
    sources: list[str] = []
    objectives: list[bytes] = []
    for run_part, results_part, types, calls, messages, objective in texts:
        # Two texts, each tokenised at once (per part, the calls cost more than the text).
        run = _tokens(run_part)
        results = _tokens(results_part)
        # The step types too: equal digests then mean equal run texts, so equal signatures.
        digest = hashlib.blake2b(types.encode("ascii"), digest_size=16)
        results_text = _joined(results)
        digest.update(b"\n" + _joined(run) + b"\n" + results_text)
        digests.append(digest.digest())
        skeleton, sketch = _steps_and_messages(types, calls, results_text, messages)
        steps.append(skeleton)
        sketches.append(sketch)
        objectives.append(hashlib.blake2b(_joined(_tokens(objective)), digest_size=8).digest())
        whole: list[Any] = [*run, *results]
        source = "run"
        if not run:
            run, source = whole, "whole"
        if not run:
            source = "none"
        sources.append(source)
        word_sets.append(run)
    with_words = [i for i, words in enumerate(word_sets) if words]
    rows: list[npt.NDArray[np.uint16] | None] = [None] * len(digests)
    if with_words:
        hashed = rensa.RMinHash.hash_token_sets([word_sets[i] for i in with_words])
        shingles = [
            _shingle_hashes(np.asarray(words, dtype=np.uint64), scheme.shingle) for words in hashed
        ]
        offsets = np.zeros(len(shingles) + 1, dtype=np.uint64)
        np.cumsum([len(s) for s in shingles], out=offsets[1:])
        matrix = rensa.RMinHash.digest_matrix_from_flat_token_hashes(
            np.concatenate(shingles), offsets, scheme.permutations, scheme.seed
        )
        signatures = np.asarray(matrix.to_rows(), dtype=np.uint32).astype(np.uint16)
        for row, i in enumerate(with_words):
            rows[i] = signatures[row]
    return [
        CopyFacet(digest, row, len(words), source, skeleton, sketch, objective)
        for digest, row, words, source, skeleton, sketch, objective in zip(
            digests, rows, word_sets, sources, steps, sketches, objectives
        )
    ]


#: The chance that two unrelated 16-bit values agree, which the estimate removes.
_CHANCE = 1.0 / 65536.0


def estimated_similarity(
    a: npt.NDArray[np.uint16], b: npt.NDArray[np.uint16]
) -> npt.NDArray[np.float64] | float:
    """The Jaccard similarity of two shingle sets estimated from their signatures (rows of
    ``a`` against rows of ``b`` when both are matrices of one shape), corrected for 16-bit
    values agreeing by chance, clipped to [0, 1]."""
    agree = np.mean(np.asarray(a) == np.asarray(b), axis=-1)
    estimate = np.clip((agree - _CHANCE) / (1.0 - _CHANCE), 0.0, 1.0)
    if np.ndim(estimate) == 0:
        return float(estimate)
    return np.asarray(estimate, dtype=np.float64)
