"""The base of every MiniLM embedder: cheap construction, one thread-safe load on first use,
argument checks, windowing (``_windows``) and the ``embed`` contract."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Generic, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from ._minilm import ARCHITECTURE, MiniLMTokenizer, resolve_model_dir
from ._native_memory import release_freed_memory
from ._windows import MAX_WINDOWS, Windowing, plan_windows, resolve_windowing

__all__ = ["LazyMiniLM"]


class _HasModelDir(Protocol):
    model_dir: Path
    tokenizer: MiniLMTokenizer


_Loaded = TypeVar("_Loaded", bound=_HasModelDir)


class LazyMiniLM(Generic[_Loaded]):
    """What every MiniLM embedder shares: cheap construction, one thread-safe load on first
    use, argument checks, windowing (``_windows``) and the ``embed`` contract. Subclasses say
    how to load the model and run it on windows of token ids."""

    name: str
    precision: str
    dimensions = ARCHITECTURE.hidden

    def __init__(
        self,
        model_dir: str | os.PathLike[str] | None = None,
        *,
        threads: int | None = None,
        batch_size: int = 32,
        windowing: str | None = None,
        max_windows: int = MAX_WINDOWS,
    ) -> None:
        if max_windows < 1:
            raise ValueError(f"max_windows must be >= 1, got {max_windows}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if threads is not None and threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        self._model_dir_arg = model_dir
        self.threads = threads
        self.batch_size = batch_size
        self.windowing: Windowing = resolve_windowing(windowing)
        self.max_windows = max_windows
        self._lock = threading.Lock()
        self._loaded: _Loaded | None = None
        self._load_seconds: float | None = None

    def __repr__(self) -> str:
        state = "loaded" if self._loaded is not None else "not loaded"
        return (
            f"{type(self).__name__}({state}, threads={self.threads}, batch_size={self.batch_size}, "
            f"windowing={self.windowing!r})"
        )

    @property
    def load_seconds(self) -> float | None:
        """Seconds the model took to load, or None if it has not been loaded yet."""
        return self._load_seconds

    @property
    def model_dir(self) -> Path | None:
        """The directory the weights come (or would come) from; not checked here."""
        if self._loaded is not None:
            return self._loaded.model_dir
        return resolve_model_dir(self._model_dir_arg)[0]

    def _load(self) -> _Loaded:
        """Check the runtime and model files, then load (called once, under the lock)."""
        raise NotImplementedError

    def _encode_windows(
        self, model: _Loaded, windows: list[npt.NDArray[np.int64]]
    ) -> npt.NDArray[np.float32]:
        """Unit-norm vectors (float32, one row per window, in order) of token-id windows."""
        raise NotImplementedError

    def _run(self, model: _Loaded, texts: list[str]) -> npt.NDArray[np.float32]:
        # The windows of all texts are embedded together (length-bucketed by the subclass),
        # then pooled text by text.
        plan = plan_windows(model.tokenizer, texts, self.windowing, self.max_windows)
        return plan.pool(self._encode_windows(model, plan.windows))

    def _model(self) -> _Loaded:
        loaded = self._loaded
        if loaded is not None:
            return loaded
        with self._lock:
            if self._loaded is None:
                start = time.perf_counter()
                self._loaded = self._load()
                self._load_seconds = time.perf_counter() - start
            return self._loaded

    def warm_up(self) -> None:
        """Load the model now and run one small inference (first-run allocations, kernels)."""
        self._run(self._model(), ["warm up", "a slightly longer warm-up sentence"])

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed ``texts``: float32 array (len(texts), 384), unit-norm rows, input order."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of strings, not a single str")
        items = list(texts)
        if not items:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        vectors = self._run(self._model(), items)
        release_freed_memory()  # the runtimes' per-batch buffers
        return vectors
