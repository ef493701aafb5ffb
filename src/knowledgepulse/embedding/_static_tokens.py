"""The static embedder's tokens: every token MiniLM's tokenizer gives a whole text, with no
256-token cut, found through a bounded cache of the text's whitespace-separated chunks
(:class:`StaticTokens`, :class:`UnitCache`)."""

from __future__ import annotations

import importlib
import itertools
import re
import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from ._windows import CHUNK_CHARS

__all__ = ["StaticTokens", "UnitCache"]

# Characters handed to the tokenizer at once (it parallelises over them): pieces of
# CHUNK_CHARS at most, this many of them.
_PIECES_AT_ONCE = 64
# For text of printable ASCII and tab, newline, carriage return alone, MiniLM's normaliser is
# str.lower() and its pre-tokeniser's words are _FAST_WORD's matches; _SLOW_CHARS is anything
# else, and _ASCII_CONTROL what BERT removes of ASCII.
_FAST_WORD = re.compile(r"[a-z0-9]+|[^a-z0-9 \t\n\r]")
_SLOW_CHARS = r"[^\x20-\x7e\t\n\r]+"
_ASCII_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# Not str.split()'s whitespace: it includes \x0b, \x0c, \x1c-\x1f and \x85, control
# characters that BERT removes (joining the words around them).
_ASCII_SPACE = re.compile(r"[ \t\n\r]")
_ASCII_SPACES = re.compile(r"[ \t\n\r]+")
# Chunks of other characters in a text found one by one; beyond, all its chunks are split
# off at once (text dense with them, such as prose with accents, would take longer).
_SPARSE_CHUNKS = 32
# What else BERT takes for whitespace: Unicode's White_Space outside the control characters.
_BERT_SPACE = frozenset("\xa0\u1680\u2028\u2029\u202f\u205f\u3000") | frozenset(
    map(chr, range(0x2000, 0x200B))
)
_ASCII_PUNCTUATION = frozenset(chr(c) for c in range(0x21, 0x7F) if not chr(c).isalnum())
# Words and chunks up to this long are cached (longer ones: rare, and mostly one-offs).
_CACHED_CHARS = 64
# Bytes per generation of the word and chunk cache (two generations at most), and what an
# entry costs besides its key's characters and its ids (a CPython str and tuple header, a
# dict slot).
_CACHE_BYTES = 24 << 20
_ENTRY_BYTES = 160


class StaticTokens:
    """MiniLM's tokenizer without truncation, [CLS]/[SEP] or padding: every token of a text.

    BERT's pre-tokeniser splits at whitespace and no special token holds any, so a text's
    tokens are those of its chunks (the runs between ASCII spaces, tabs, newlines and carriage
    returns), each tokenised alone. Each chunk's ids are looked up in a cache
    (:class:`UnitCache`); only chunks not seen recently are tokenised.

    A chunk of printable ASCII alone (the common case) is lowercased first: for such text,
    MiniLM's normaliser is ``str.lower()`` and its pre-tokeniser's words are
    :data:`_FAST_WORD`'s matches (BERT's punctuation covers every printable ASCII character
    that is neither a letter nor a digit). A new such chunk is cut into those words, whose ids
    come from the cache or the tokenizer (each word alone). Any other chunk (one holding an
    ASCII control character, which BERT removes, joining its neighbours; a non-ASCII character;
    a special token such as ``[SEP]``) goes to the tokenizer whole, as it is.
    """

    def __init__(self, model_dir: Path) -> None:
        tokenizers: Any = importlib.import_module("tokenizers")
        self._tokenizer = tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()
        unk = self._tokenizer.token_to_id("[UNK]")
        self.unk_id = -1 if unk is None else int(unk)
        self.vocab_size = int(self._tokenizer.get_vocab_size())
        specials = [
            str(token.content) for token in self._tokenizer.get_added_tokens_decoder().values()
        ]
        longest_first = sorted(specials, key=len, reverse=True)
        self._special = re.compile("|".join(map(re.escape, longest_first)) or "(?!)")
        firsts = {token[0] for token in specials if token}
        # a cheap test before the regex where all special tokens start alike (MiniLM's: "[")
        self._special_first = firsts.pop() if len(firsts) == 1 else ""
        self._slow = re.compile("|".join([_SLOW_CHARS, *map(re.escape, longest_first)]))
        # A long chunk is cut after BERT whitespace or after punctuation that no special token
        # holds (cutting after the "[" of "[SEP]" would unmake it).
        self._cuts = _BERT_SPACE | (_ASCII_PUNCTUATION - set("".join(specials)))
        self._max_word = int(getattr(self._tokenizer.model, "max_input_chars_per_word", 100))
        self._ints = list(range(self.vocab_size))
        self.cache = UnitCache(_CACHE_BYTES)
        self._lock = threading.Lock()

    def ids(self, texts: Sequence[str]) -> list[npt.NDArray[np.int64]]:
        """Every token id of each text ([UNK] left out), in the text's order."""
        per_text = [self._units(text) for text in texts]
        return [
            np.fromiter(
                itertools.chain.from_iterable(entries),
                dtype=np.int64,
                count=sum(map(len, entries)),
            )
            for entries in self._look_up(per_text)
        ]

    def counted_ids(
        self, texts: Sequence[str]
    ) -> list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]]:
        """Each text's token ids ([UNK] left out) and how often each occurs, in no set order
        (an id may come more than once; its counts add up)."""
        per_text = [Counter(self._units(text)) for text in texts]
        out = []
        for counted, entries in zip(per_text, self._look_up(per_text)):
            lengths = np.fromiter(map(len, entries), dtype=np.int64, count=len(entries))
            ids = np.fromiter(
                itertools.chain.from_iterable(entries), dtype=np.int64, count=int(lengths.sum())
            )
            counts = np.fromiter(counted.values(), dtype=np.int64, count=len(counted))
            out.append((ids, np.repeat(counts, lengths)))
        return out

    def _units(self, text: str) -> list[str]:
        """``text``'s chunks, in order: printable-ASCII ones lowercased, the others as they are
        (cut where longer than :data:`CHUNK_CHARS`)."""
        if self._plain(text):
            return text.lower().split()  # no other whitespace in printable ASCII
        # Mostly printable ASCII: only the other chunks are found and looked at one by one.
        found = self._slow.search(text)
        units: list[str] = []
        start = 0
        for _ in range(_SPARSE_CHUNKS):
            if found is None:
                return units + text[start:].lower().split()
            at = found.start()
            # the chunk starts after the last ASCII whitespace before ``at`` (bounded by the
            # previous chunk's end, so the scans stay linear in the text's length)
            low = max(start, *(text.rfind(space, start, at) + 1 for space in " \t\n\r"))
            after = _ASCII_SPACE.search(text, found.end())
            high = len(text) if after is None else after.start()
            units += text[start:low].lower().split()
            units += self._cut(text[low:high])
            start = high
            found = self._slow.search(text, high)
        # Many such chunks: every distinct chunk of the rest is looked at once.
        return units + self._every_chunk(text[start:])

    def _every_chunk(self, text: str) -> list[str]:
        """``text``'s chunks, in order, each distinct one classified once."""
        chunks = _ASCII_SPACES.split(text)
        units: dict[str, list[str]] = {}
        for chunk in dict.fromkeys(chunks):
            if self._slow.search(chunk) is not None:
                units[chunk] = self._cut(chunk)
            else:
                units[chunk] = [chunk.lower()] if chunk else []
        return list(itertools.chain.from_iterable(map(units.__getitem__, chunks)))

    def _plain(self, text: str) -> bool:
        """Whether ``text`` is printable ASCII (and ASCII whitespace) without special tokens."""
        return (
            text.isascii()
            and _ASCII_CONTROL.search(text) is None
            and (self._special_first not in text or self._special.search(text) is None)
        )

    def _cut(self, chunk: str) -> list[str]:
        """``chunk`` in pieces of at most :data:`CHUNK_CHARS` characters (the tokenizer's
        memory grows with its input), each cut after a character that ends a BERT word
        whatever follows (non-ASCII whitespace; ASCII punctuation outside special tokens).

        Only a run of that many characters with neither is cut inside: such a run is one
        [UNK] whole, and its pieces may give other tokens (as the tokenizer's own pieces
        would); nothing else differs from tokenising the chunk whole.
        """
        pieces = []
        start = 0
        while len(chunk) - start > CHUNK_CHARS:
            end = start + CHUNK_CHARS
            cut = next((k for k in range(end - 1, start, -1) if chunk[k] in self._cuts), end - 1)
            pieces.append(chunk[start : cut + 1])
            start = cut + 1
        pieces.append(chunk[start:])
        return pieces

    def _look_up(self, per_text: Sequence[Iterable[str]]) -> list[list[tuple[int, ...]]]:
        """The ids of each unit of each text (cached, else tokenised)."""
        recent = self.cache.recent
        looked = [list(map(recent.get, units)) for units in per_text]
        missing = {
            unit
            for units, entries in zip(per_text, looked)
            if None in entries
            for unit, entry in zip(units, entries)
            if entry is None
        }
        found = self._resolve(missing) if missing else {}
        out: list[list[tuple[int, ...]]] = []
        for units, entries in zip(per_text, looked):
            if None in entries:
                entries = [found[u] if e is None else e for u, e in zip(units, entries)]
            out.append(cast("list[tuple[int, ...]]", entries))
        return out

    def _resolve(self, missing: set[str]) -> dict[str, tuple[int, ...]]:
        """The ids of each unit ([UNK] left out): from the cache's older generation, else
        tokenised; the short ones remembered."""
        with self._lock:
            out: dict[str, tuple[int, ...]] = {}
            fast: dict[str, list[str]] = {}
            slow: list[str] = []
            for unit in missing:
                entry = self.cache.get(unit)
                if entry is not None:
                    out[unit] = entry
                elif self._plain(unit):
                    fast[unit] = _FAST_WORD.findall(unit)
                else:
                    slow.append(unit)
            out.update(self._encoded(slow))
            words = self._words(dict.fromkeys(itertools.chain.from_iterable(fast.values())), out)
            for unit, split in fast.items():
                out[unit] = (
                    words[split[0]]  # most chunks are one word
                    if len(split) == 1
                    else tuple(itertools.chain.from_iterable(map(words.__getitem__, split)))
                )
            for unit, entry in itertools.chain(words.items(), out.items()):
                if len(unit) <= _CACHED_CHARS:
                    self.cache.put(unit, entry)
        return out

    def _words(
        self, words: Iterable[str], known: dict[str, tuple[int, ...]]
    ) -> dict[str, tuple[int, ...]]:
        """The ids of BERT words of printable ASCII: known, cached, or tokenised."""
        out: dict[str, tuple[int, ...]] = {}
        unknown: list[str] = []
        for word in words:
            entry = known.get(word)
            if entry is None:
                entry = self.cache.get(word)
            if entry is not None:
                out[word] = entry
            elif len(word) > self._max_word and word.isalnum():
                out[word] = ()  # beyond WordPiece's limit: one [UNK], left out
            else:
                unknown.append(word)
        out.update(self._encoded_words(unknown))
        return out

    def _encoded_words(self, words: list[str]) -> dict[str, tuple[int, ...]]:
        """Each BERT word tokenised ([UNK] left out), many to one tokenizer input: joined by
        spaces, each word is one word of the pre-tokeniser, whose index each token carries
        (the tokenizer's cost per input is many times its cost per word)."""
        out: dict[str, tuple[int, ...]] = {}
        ints, unk = self._ints, self.unk_id
        groups = _bounded_groups(words, CHUNK_CHARS)
        for start in range(0, len(groups), _PIECES_AT_ONCE):
            batch = groups[start : start + _PIECES_AT_ONCE]
            joined = [" ".join(group) for group in batch]
            encodings = self._tokenizer.encode_batch(joined, add_special_tokens=False)
            for group, encoding in zip(batch, encodings):
                per_word: list[list[int]] = [[] for _ in group]
                for i, word in zip(encoding.ids, encoding.word_ids):
                    if i != unk:
                        per_word[word].append(ints[i])
                out.update(zip(group, map(tuple, per_word)))
        return out

    def _encoded(self, units: list[str]) -> dict[str, tuple[int, ...]]:
        """Each unit tokenised alone ([UNK] left out)."""
        out: dict[str, tuple[int, ...]] = {}
        ints = self._ints
        for group in _bounded_groups(units, CHUNK_CHARS * _PIECES_AT_ONCE):
            encodings = self._tokenizer.encode_batch(group, add_special_tokens=False)
            for unit, encoding in zip(group, encodings):
                out[unit] = tuple(ints[i] for i in encoding.ids if i != self.unk_id)
        return out


class UnitCache:
    """Token ids of words and chunks, in two generations of about ``budget`` bytes each.

    New entries go to the recent generation; when it is full it becomes the older one (the
    previous older one is dropped) and a new recent one starts. A unit found only in the older
    generation moves back to the recent one, so the units in use survive a turnover. An entry
    is counted as :data:`_ENTRY_BYTES` plus its key's characters (four bytes each beyond
    ASCII) plus eight bytes an id: the cache holds about ``2 * budget`` bytes at most.
    """

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.recent: dict[str, tuple[int, ...]] = {}
        self.older: dict[str, tuple[int, ...]] = {}
        self.spent = 0

    def __len__(self) -> int:
        return len(self.recent) + len(self.older)

    def get(self, unit: str) -> tuple[int, ...] | None:
        """The unit's ids if either generation holds them (moved to the recent one)."""
        entry = self.recent.get(unit)
        if entry is None:
            entry = self.older.get(unit)
            if entry is not None:
                self.put(unit, entry)
        return entry

    def put(self, unit: str, entry: tuple[int, ...]) -> None:
        """Remember ``entry``, turning the generations over first when the recent one is full."""
        if unit in self.recent:
            self.recent[unit] = entry
            return
        cost = _ENTRY_BYTES + len(unit) * (1 if unit.isascii() else 4) + 8 * len(entry)
        if self.spent + cost > self.budget:
            self.older = self.recent
            self.recent = {}
            self.spent = 0
        self.recent[unit] = entry
        self.spent += cost

    def clear(self) -> None:
        """Forget everything."""
        self.recent = {}
        self.older = {}
        self.spent = 0


def _bounded_groups(units: list[str], chars: int) -> list[list[str]]:
    """``units`` in consecutive groups of at most ``chars`` characters (a longer unit alone)."""
    groups: list[list[str]] = []
    size = 0
    for unit in units:
        if not groups or size + len(unit) > chars:
            groups.append([])
            size = 0
        groups[-1].append(unit)
        size += len(unit)
    return groups
