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
:meth:`StaticTokens._cut` for the one exception), found through a bounded cache of the text's
whitespace-separated chunks (:class:`StaticTokens`).

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
import json
import logging
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ._errors import EmbedderUnavailable
from ._minilm import ARCHITECTURE, require_model_dir
from ._static_tokens import StaticTokens

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
        self.tokens = StaticTokens(model.model_dir)
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
