"""A static embedder derived locally from the shipped all-MiniLM-L6-v2: one vector per token.

The model2vec recipe, built with this project's own encoder (no torch, no network):

1. every token of MiniLM's vocabulary goes through the encoder alone, as ``[CLS] token
   [SEP]``; its vector is MiniLM's sentence embedding of that window (mean pooling, unit
   norm), run on ONNX Runtime in fp32 (OpenVINO where ONNX Runtime is not installed);
2. the 30,522 vectors are centred and reduced by PCA to :data:`STATIC_DIMENSIONS` dimensions
   (eigenvectors of the covariance, each signed so that its largest component is positive);
3. each row is weighted by Zipf's law over the vocabulary's rank, model2vec's SIF weighting
   ``w = 1e-4 / (1e-4 + p(rank))`` with ``p ∝ 1 / (rank + 2)``: frequent tokens count less.

A text's vector is the mean of its tokens' rows ([UNK] left out), L2-normalised. The whole
text is tokenised, with no 256-token cut: the static pass sees every token MiniLM's windows
see, and more. The tokens are those MiniLM's tokenizer gives the whole text (see
:meth:`_Tokens._cut` for the one exception), found through a bounded cache of the text's
whitespace-separated chunks (:class:`_Tokens`).

The table is built once, on first use or by ``kp static-model``, and
cached under ``$KNOWLEDGEPULSE_STATIC_MODEL_DIR`` (default
``$XDG_CACHE_HOME/knowledgepulse/static``, else ``~/.cache/knowledgepulse/static``) as a
``.npy`` table and a ``.json`` card with the recipe's version, the SHA-256 of the MiniLM files
it was built from and the SHA-256 of the table. A card or table that is unreadable, fails its
checksum, or was built from other MiniLM files or another recipe is rebuilt (logged with its
path); where it cannot be rebuilt, :class:`StaticModelError` names the path.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import itertools
import json
import logging
import os
import re
import threading
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from ._errors import EmbedderUnavailable
from ._minilm import ARCHITECTURE, require_model_dir
from ._windows import CHUNK_CHARS

__all__ = [
    "STATIC_DIMENSIONS",
    "STATIC_MODEL_DIR_ENV",
    "STATIC_MODEL_NAME",
    "STATIC_RECIPE_VERSION",
    "StaticEmbedder",
    "StaticModel",
    "StaticModelError",
    "build_static_model",
    "load_static_model",
    "shared_static_embedder",
    "static_cache_dir",
    "static_model_problem",
]

logger = logging.getLogger("knowledgepulse")

STATIC_MODEL_DIR_ENV = "KNOWLEDGEPULSE_STATIC_MODEL_DIR"
#: Bumped whenever the recipe changes what the table holds (a cached table of another
#: version is rebuilt, and a knowledge base refuses to mix the two).
STATIC_RECIPE_VERSION = 1
STATIC_MODEL_NAME = f"static-all-MiniLM-L6-v2/v{STATIC_RECIPE_VERSION}"
STATIC_DIMENSIONS = 256
#: model2vec's SIF coefficient for the Zipf weighting.
SIF_COEFFICIENT = 1e-4
_FILE_STEM = f"static-minilm-l6-v2-v{STATIC_RECIPE_VERSION}-{STATIC_DIMENSIONS}d"
# Windows handed to the encoder per call while building (each is 3 tokens).
_BUILD_CHUNK = 4096
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
# Texts tokenised together by embed() (their chunks are held at once).
_TEXTS_AT_ONCE = 256


class StaticModelError(EmbedderUnavailable):
    """The static model's cache cannot be read, checked or written; ``path`` says where."""

    def __init__(self, path: Path, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"static embedding model {path}: {problem}")


def static_cache_dir() -> Path:
    """``$KNOWLEDGEPULSE_STATIC_MODEL_DIR``, else ``$XDG_CACHE_HOME/knowledgepulse/static``
    (``~/.cache/knowledgepulse/static``)."""
    explicit = os.environ.get(STATIC_MODEL_DIR_ENV, "").strip()
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "knowledgepulse" / "static"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class StaticModel:
    """The token table and what it was built from.

    ``table`` is float32 (vocabulary size, :data:`STATIC_DIMENSIONS`); ``card`` is the JSON
    card kept beside it (recipe version, source checksums, table checksum, build time).
    """

    table: npt.NDArray[np.float32]
    card: dict[str, Any]
    path: Path
    model_dir: Path


@functools.lru_cache(maxsize=8)
def _file_sha256(path: str, size: int, modified_ns: int) -> str:
    """The SHA-256 of a file that has not changed since (size and time as the key): the
    87 MB weights are hashed once per process, not at every load."""
    return _sha256(Path(path))


def _source_sha256(path: Path) -> str:
    status = path.stat()
    return _file_sha256(str(path), status.st_size, status.st_mtime_ns)


def _source_card(model_dir: Path) -> dict[str, Any]:
    return {
        "model": STATIC_MODEL_NAME,
        "recipe": "model2vec: [CLS] token [SEP] through MiniLM, PCA, Zipf (SIF) weighting",
        "version": STATIC_RECIPE_VERSION,
        "dimensions": STATIC_DIMENSIONS,
        "sif_coefficient": SIF_COEFFICIENT,
        "source_model_sha256": _source_sha256(model_dir / "model.safetensors"),
        "source_tokenizer_sha256": _source_sha256(model_dir / "tokenizer.json"),
    }


def _paths(directory: Path) -> tuple[Path, Path]:
    return directory / f"{_FILE_STEM}.npy", directory / f"{_FILE_STEM}.json"


def _token_vectors(model_dir: Path) -> tuple[npt.NDArray[np.float32], str]:
    """MiniLM's unit vector of ``[CLS] t [SEP]`` for every token t of the vocabulary."""
    from ._minilm import missing_modules

    if not missing_modules(("onnxruntime",)):
        from ._onnx import MiniLMEmbedder

        encoder: Any = MiniLMEmbedder(model_dir, windowing="first_window", batch_size=1024)
        runtime = "onnxruntime fp32"
    else:
        from ._openvino import MiniLMOpenVINOEmbedder

        encoder = MiniLMOpenVINOEmbedder(
            model_dir, windowing="first_window", precision="fp32", batch_size=1024
        )
        runtime = "openvino fp32"
    loaded = encoder._model()
    cls_id, sep_id = loaded.tokenizer.cls_id, loaded.tokenizer.sep_id
    vocab = ARCHITECTURE.vocab_size
    out = np.empty((vocab, ARCHITECTURE.hidden), dtype=np.float32)
    for start in range(0, vocab, _BUILD_CHUNK):
        ids = range(start, min(vocab, start + _BUILD_CHUNK))
        windows = [np.array([cls_id, t, sep_id], dtype=np.int64) for t in ids]
        out[start : start + len(windows)] = encoder._encode_windows(loaded, windows)
    return out, runtime


def _pca(vectors: npt.NDArray[np.float32], dimensions: int) -> npt.NDArray[np.float32]:
    """``vectors`` centred and projected on their ``dimensions`` principal axes (largest
    variance first), each axis signed so that its largest-magnitude component is positive:
    the same input always gives the same output."""
    data = vectors.astype(np.float64)
    data -= data.mean(axis=0)
    covariance = data.T @ data / max(1, data.shape[0] - 1)
    values, axes = np.linalg.eigh(covariance)
    order = np.argsort(-values, kind="stable")[:dimensions]
    axes = axes[:, order]
    signs = np.sign(axes[np.argmax(np.abs(axes), axis=0), np.arange(axes.shape[1])])
    axes *= np.where(signs == 0, 1.0, signs)
    projected: npt.NDArray[np.float32] = (data @ axes).astype(np.float32)
    return projected


def zipf_weights(vocab: int, sif_coefficient: float = SIF_COEFFICIENT) -> npt.NDArray[np.float64]:
    """model2vec's weight of each token by its rank in the vocabulary (Zipf's law)."""
    inverse_rank = 1.0 / np.arange(2, vocab + 2, dtype=np.float64)
    probability = inverse_rank / inverse_rank.sum()
    return sif_coefficient / (sif_coefficient + probability)  # type: ignore[no-any-return]


def finish_table(vectors: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """The token table from MiniLM's token vectors: PCA, then Zipf weighting (float32)."""
    reduced = _pca(vectors, STATIC_DIMENSIONS)
    weights = zipf_weights(reduced.shape[0])[:, None]
    return np.ascontiguousarray(reduced * weights, dtype=np.float32)


def write_static_model(
    directory: Path, table: npt.NDArray[np.float32], card: dict[str, Any]
) -> tuple[Path, Path]:
    """Write ``table`` and its ``card`` (with the table's checksum added) into ``directory``.

    The table first, then the card naming its checksum, each through a temporary file renamed
    into place: a card is only ever beside the table it describes, and an interrupted build
    leaves no card (so the next use builds again).

    Raises:
        StaticModelError: the directory cannot be written.
    """
    table_path, card_path = _paths(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        tmp_table = table_path.with_name(table_path.name + f".{os.getpid()}.tmp")
        with tmp_table.open("wb") as handle:
            np.save(handle, table, allow_pickle=False)
        card = {**card, "table_sha256": _sha256(tmp_table)}
        tmp_table.replace(table_path)
        tmp_card = card_path.with_name(card_path.name + f".{os.getpid()}.tmp")
        tmp_card.write_text(json.dumps(card, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        tmp_card.replace(card_path)
    except OSError as exc:
        raise StaticModelError(directory, f"cannot write the model there ({exc})") from None
    return table_path, card_path


def build_static_model(
    model_dir: str | os.PathLike[str] | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
) -> StaticModel:
    """Build the token table from the MiniLM files and write it to the cache (atomically).

    Raises:
        StaticModelError: the cache directory cannot be written (its path named).
        EmbedderUnavailable: the MiniLM runtime or files are missing.
    """
    source = require_model_dir(model_dir, "The static embedder (built from MiniLM)")
    directory = Path(cache_dir) if cache_dir is not None else static_cache_dir()
    started = time.perf_counter()
    card = _source_card(source)
    vectors, runtime = _token_vectors(source)
    table = finish_table(vectors)
    card.update(
        {
            "built_with": runtime,
            "build_seconds": round(time.perf_counter() - started, 2),
            "table_shape": list(table.shape),
        }
    )
    table_path, card_path = write_static_model(directory, table, card)
    card = json.loads(card_path.read_text(encoding="utf-8"))
    return StaticModel(table, card, table_path, source)


def _read_cached(
    table_path: Path, card_path: Path, expected: dict[str, Any], source: Path
) -> StaticModel | str:
    """The cached model, or why it cannot be used."""
    if not card_path.is_file() or not table_path.is_file():
        return "not built yet"
    try:
        card = json.loads(card_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"{card_path} is unreadable ({exc})"
    if not isinstance(card, dict):
        return f"{card_path} is not a model card"
    for key, value in expected.items():
        if card.get(key) != value:
            return f"{card_path} was built with {key}={card.get(key)!r}, not {value!r}"
    try:
        checksum = _sha256(table_path)
    except OSError as exc:
        return f"{table_path} is unreadable ({exc})"
    if checksum != card.get("table_sha256"):
        return f"{table_path} does not match its checksum (corrupt or changed)"
    try:
        table = np.load(table_path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        return f"{table_path} is unreadable ({exc})"
    shape = (ARCHITECTURE.vocab_size, STATIC_DIMENSIONS)
    if table.dtype != np.float32 or table.shape != shape:
        return f"{table_path} holds {table.dtype} {table.shape}, not float32 {shape}"
    return StaticModel(table, card, table_path, source)


def static_model_problem(
    model_dir: str | os.PathLike[str] | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
) -> str | None:
    """Why the cached model cannot be used as it is (naming the path), or None if it can.

    For a command to say that it is about to build the model (which takes minutes on a slow
    machine) and why; :func:`load_static_model` decides the same way.
    """
    source = require_model_dir(model_dir, "The static embedder (built from MiniLM)")
    directory = Path(cache_dir) if cache_dir is not None else static_cache_dir()
    table_path, card_path = _paths(directory)
    found = _read_cached(table_path, card_path, _source_card(source), source)
    if isinstance(found, StaticModel):
        return None
    return f"{table_path}: {found}" if found == "not built yet" else found


def load_static_model(
    model_dir: str | os.PathLike[str] | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    *,
    build: bool = True,
) -> StaticModel:
    """The cached static model, built (or rebuilt) when missing, corrupt or stale.

    Args:
        model_dir: the MiniLM files (default: as for the MiniLM embedders).
        cache_dir: where the table is kept (default :func:`static_cache_dir`).
        build: build or rebuild when needed; ``False``: refuse instead.

    Raises:
        StaticModelError: the cache cannot be used and ``build`` is False, or cannot be written;
            the message names the path and what is wrong.
    """
    source = require_model_dir(model_dir, "The static embedder (built from MiniLM)")
    directory = Path(cache_dir) if cache_dir is not None else static_cache_dir()
    table_path, card_path = _paths(directory)
    expected = _source_card(source)
    found = _read_cached(table_path, card_path, expected, source)
    if isinstance(found, StaticModel):
        return found
    if not build:
        raise StaticModelError(
            table_path, f"{found}; build it with `kp static-model` (or let it build on first use)"
        )
    if found != "not built yet":
        logger.warning("knowledgepulse: rebuilding the static embedding model: %s", found)
    return build_static_model(source, directory)


class _Tokens:
    """MiniLM's tokenizer without truncation, [CLS]/[SEP] or padding: every token of a text.

    BERT's pre-tokeniser splits at whitespace and no special token holds any, so a text's
    tokens are those of its chunks (the runs between ASCII spaces, tabs, newlines and carriage
    returns), each tokenised alone. Each chunk's ids are looked up in a cache
    (:class:`_UnitCache`); only chunks not seen recently are tokenised.

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
        self.cache = _UnitCache(_CACHE_BYTES)
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


class _UnitCache:
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


def _summed(
    table: npt.NDArray[np.float32],
    ids: npt.NDArray[np.int64],
    counts: npt.NDArray[np.int64] | None = None,
) -> npt.NDArray[np.float64]:
    """The float64 sum of ``table``'s rows of ``ids`` (each ``counts`` times if given): each
    distinct id's row times its number of occurrences (exact in float64), summed in ascending
    id order, so the sum depends on the multiset of ids alone: not on their order, nor on how
    they were counted, the batch or the cache."""
    if counts is None:
        present, occurrences = np.unique(ids, return_counts=True)
    else:
        present, inverse = np.unique(ids, return_inverse=True)
        occurrences = np.bincount(inverse, weights=counts, minlength=len(present))
    rows = table[present].astype(np.float64)
    rows *= occurrences[:, None]
    total: npt.NDArray[np.float64] = rows.sum(axis=0)
    return total


class _LoadedStatic:
    def __init__(self, model: StaticModel) -> None:
        self.model = model
        self.tokens = _Tokens(model.model_dir)
        table = model.table
        # What a text without any known token gets: the empty sentence, [CLS] and [SEP].
        cls_id = self.tokens._tokenizer.token_to_id("[CLS]")
        sep_id = self.tokens._tokenizer.token_to_id("[SEP]")
        empty = table[[cls_id, sep_id]].astype(np.float64).sum(axis=0)
        self.empty: npt.NDArray[np.float32] = (
            empty / max(float(np.linalg.norm(empty)), 1e-12)
        ).astype(np.float32)


class StaticEmbedder:
    """Texts embedded as the mean of their tokens' static vectors (model2vec recipe).

    Hundreds of times faster than MiniLM per token, and less accurate (docs/embeddings.md): a
    first pass for bulk novelty and for proposing near-duplicate candidates, not the judge.
    Construction is cheap; the table is loaded (built on first use if needed) on the first
    ``embed()`` or ``warm_up()``, once, thread-safely.

    Args:
        model_dir: the MiniLM files it is derived from (default: as for the MiniLM embedders).
        cache_dir: where the table is cached (default :func:`static_cache_dir`).
        build: build the table when it is missing or unusable (False: refuse, naming the path).
    """

    #: What a knowledge base records (recipe version included: tables of two versions differ).
    model_name = STATIC_MODEL_NAME
    name = f"{STATIC_MODEL_NAME} (model2vec recipe, {STATIC_DIMENSIONS}d)"
    dimensions = STATIC_DIMENSIONS
    windowing = "whole"
    version = STATIC_RECIPE_VERSION
    precision = "fp32"

    def __init__(
        self,
        model_dir: str | os.PathLike[str] | None = None,
        *,
        cache_dir: str | os.PathLike[str] | None = None,
        build: bool = True,
    ) -> None:
        self._model_dir_arg = model_dir
        self._cache_dir_arg = cache_dir
        self.build = build
        self._lock = threading.Lock()
        self._loaded: _LoadedStatic | None = None
        self.load_seconds: float | None = None

    def __repr__(self) -> str:
        state = "loaded" if self._loaded is not None else "not loaded"
        return f"StaticEmbedder({state}, {STATIC_MODEL_NAME}, {STATIC_DIMENSIONS}d)"

    def __reduce__(self) -> tuple[Any, ...]:
        # Shipped to a worker (kp score --engine ray) as its arguments: the worker loads the
        # table from its own cache, not 31 MB through the pickle (nor the lock).
        return (
            _unpickle_static,
            (self._model_dir_arg, self._cache_dir_arg, self.build),
        )

    @property
    def model(self) -> StaticModel:
        """The table and its card (loaded, or built, on first access)."""
        return self._load().model

    def _load(self) -> _LoadedStatic:
        loaded = self._loaded
        if loaded is not None:
            return loaded
        with self._lock:
            if self._loaded is None:
                started = time.perf_counter()
                model = load_static_model(
                    self._model_dir_arg, self._cache_dir_arg, build=self.build
                )
                self._loaded = _LoadedStatic(model)
                self.load_seconds = time.perf_counter() - started
            return self._loaded

    def warm_up(self) -> None:
        """Load (or build) the table now."""
        self.embed(["warm up"])

    def token_ids(self, texts: Sequence[str]) -> list[npt.NDArray[np.int64]]:
        """Every token id of each text, as :meth:`embed` averages them ([UNK] left out)."""
        return self._load().tokens.ids(list(texts))

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed ``texts``: float32 (len(texts), 256), unit-norm rows, in input order."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of strings, not a single str")
        items = list(texts)
        if not items:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        loaded = self._load()
        out = np.empty((len(items), self.dimensions), dtype=np.float32)
        for start in range(0, len(items), _TEXTS_AT_ONCE):
            counted = loaded.tokens.counted_ids(items[start : start + _TEXTS_AT_ONCE])
            for row, (ids, counts) in enumerate(counted, start):
                out[row] = self._vector(loaded, ids, counts)
        return out

    def embed_ids(self, token_ids: Sequence[npt.NDArray[np.int64]]) -> npt.NDArray[np.float32]:
        """The vectors of texts already tokenised by :meth:`token_ids` (the same as
        :meth:`embed` gives, bit for bit)."""
        loaded = self._load()
        out = np.empty((len(token_ids), self.dimensions), dtype=np.float32)
        for row, ids in enumerate(token_ids):
            out[row] = self._vector(loaded, np.asarray(ids, dtype=np.int64), None)
        return out

    @staticmethod
    def _vector(
        loaded: _LoadedStatic, ids: npt.NDArray[np.int64], counts: npt.NDArray[np.int64] | None
    ) -> npt.NDArray[np.float32]:
        if len(ids) == 0:
            return loaded.empty
        # float64 sums: the same vector whatever the SIMD width summing float32 would use
        total = _summed(loaded.model.table, ids, counts)
        norm = float(np.linalg.norm(total))
        return loaded.empty if norm == 0.0 else (total / norm).astype(np.float32)


def _unpickle_static(
    model_dir: str | os.PathLike[str] | None, cache_dir: str | os.PathLike[str] | None, build: bool
) -> StaticEmbedder:
    return StaticEmbedder(model_dir, cache_dir=cache_dir, build=build)


_shared: StaticEmbedder | None = None
_shared_lock = threading.Lock()


def shared_static_embedder() -> StaticEmbedder:
    """The process-wide static embedder (created on first call; the table loads lazily)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = StaticEmbedder()
        return _shared
