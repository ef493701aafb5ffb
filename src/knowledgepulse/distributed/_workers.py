"""Embedding on a pool of Ray actors: one model per actor, loaded once, fed whole chunks.

An actor loads its embedder the way a local run does (the installed model package, never a
download); an actor that cannot load it keeps the error and raises it, unchanged, when first
asked, so the driver reports the same message a local run would. A killed actor is restarted
and its pending call retried by Ray; the pool's calls are pure (texts in, vectors out), so a
retry changes nothing.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ._cluster import import_ray

__all__ = [
    "EmbedPool",
    "EmbedderFactory",
    "PrecomputedEmbedder",
    "factory_for",
    "minilm_factory",
]

#: Builds the embedder inside a worker (called once per actor, and again after a restart).
EmbedderFactory = Callable[[], Any]
#: Restarts of a killed actor, and retries of the call it was running, before the run fails.
ACTOR_RESTARTS = 4


class _MiniLMFactory:
    """The MiniLM embedder of ``kind`` (``onnx``, ``openvino`` or ``bf16``) on ``threads``
    threads."""

    def __init__(self, kind: str, threads: int) -> None:
        self.kind = kind
        self.threads = threads

    def __call__(self) -> Any:
        from ..embedding import MiniLMBf16Embedder, MiniLMEmbedder, MiniLMOpenVINOEmbedder

        classes = {"onnx": MiniLMEmbedder, "openvino": MiniLMOpenVINOEmbedder}
        return classes.get(self.kind, MiniLMBf16Embedder)(threads=self.threads)

    def __repr__(self) -> str:
        return f"minilm_factory({self.kind!r}, threads={self.threads})"


def minilm_factory(kind: str = "onnx", threads: int = 1) -> EmbedderFactory:
    """A picklable factory of the MiniLM embedder for workers.

    Args:
        kind: ``onnx`` (fp32), ``openvino`` (bf16 on CPUs with native bf16) or ``bf16``
            (torch): what the driver chose, so that every worker embeds with the same model
            and precision.
        threads: inference threads per actor (match the CPUs each actor reserves).
    """
    if kind not in ("onnx", "openvino", "bf16"):
        raise ValueError(f"kind must be onnx, openvino or bf16, got {kind!r}")
    return _MiniLMFactory(kind, threads)


class _Shipped:
    """An embedder object built on the driver, shipped (pickled) to every worker."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder

    def __call__(self) -> Any:
        return self.embedder


def factory_for(embedder: Any, threads: int = 1) -> EmbedderFactory:
    """The worker factory for the embedder a local run would use.

    MiniLM is loaded by each worker from its own installed model package (the same kind and
    precision); any other embedder object is pickled and shipped as it is.

    Args:
        embedder: the driver's embedder (what :func:`~knowledgepulse.embedding.choose_embedder`
            picked, or any :class:`~knowledgepulse.Embedder`).
        threads: inference threads per actor, for MiniLM.
    """
    from ..embedding import MiniLMBf16Embedder, MiniLMEmbedder, MiniLMOpenVINOEmbedder
    from ..embedding._dedupe import DeduplicatingEmbedder
    from ..embedding._protocol import _NamedEmbedder

    while isinstance(embedder, DeduplicatingEmbedder):  # the workers get the model itself
        embedder = embedder.wrapped
    if isinstance(embedder, MiniLMBf16Embedder):
        return minilm_factory("bf16", threads)
    if isinstance(embedder, MiniLMEmbedder):
        return minilm_factory("onnx", threads)
    if isinstance(embedder, MiniLMOpenVINOEmbedder):
        return minilm_factory("openvino", threads)
    return _Shipped(embedder.wrapped if isinstance(embedder, _NamedEmbedder) else embedder)


class _EmbedWorker:
    """One actor: one embedder, loaded at start."""

    def __init__(self, factory: EmbedderFactory) -> None:
        self._error: BaseException | None = None
        self._embedder: Any = None
        try:
            self._embedder = factory()
            warm_up = getattr(self._embedder, "warm_up", None)
            if callable(warm_up):
                warm_up()
        except Exception as exc:  # raised, unchanged, by ready() and embed()
            self._error = exc

    def ready(self) -> tuple[int, tuple[str, str, str] | None]:
        """The dimensions once the model is loaded, or the load error as (module, class,
        message): the error itself may not survive pickling (its __init__ takes other
        arguments), so the driver rebuilds it."""
        if self._error is not None:
            kind = type(self._error)
            return 0, (kind.__module__, kind.__qualname__, str(self._error))
        return int(self._embedder.dimensions), None

    def pid(self) -> int:
        return os.getpid()

    def embed(self, batches: Sequence[Sequence[str]]) -> npt.NDArray[np.float32]:
        """Every batch embedded by one ``embed`` call (as a local run calls it), stacked."""
        if self._error is not None:
            raise self._error
        dims = int(self._embedder.dimensions)
        parts = [np.asarray(self._embedder.embed(list(b)), dtype=np.float32) for b in batches]
        return np.concatenate(parts) if parts else np.zeros((0, dims), np.float32)


class EmbedPool:
    """``workers`` embedding actors, each reserving ``cpus_per_worker`` CPUs.

    Args:
        factory: builds the embedder in each actor.
        workers: number of actors (models loaded).
        cpus_per_worker: CPUs each actor reserves (may be fractional on a small machine).
    """

    def __init__(self, factory: EmbedderFactory, workers: int, cpus_per_worker: float) -> None:
        ray = import_ray()
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        actor = ray.remote(
            num_cpus=cpus_per_worker,
            max_restarts=ACTOR_RESTARTS,
            max_task_retries=ACTOR_RESTARTS,
        )(_EmbedWorker)
        self._ray = ray
        self.actors = [actor.remote(factory) for _ in range(workers)]
        self._next = 0
        self.dimensions = self._ready()

    def _ready(self) -> int:
        answers = self._ray.get([a.ready.remote() for a in self.actors])
        for _, error in answers:
            if error is not None:
                raise _rebuilt(*error)
        return int(answers[0][0])

    def submit(self, batches: Sequence[Sequence[str]]) -> Any:
        """Embed on the next actor, round robin; returns the vectors' ObjectRef."""
        actor = self.actors[self._next % len(self.actors)]
        self._next += 1
        return actor.embed.remote([list(b) for b in batches])

    def shutdown(self) -> None:
        for actor in self.actors:
            self._ray.kill(actor)
        self.actors = []


def _rebuilt(module: str, name: str, message: str) -> BaseException:
    """A worker's error as the driver raises it: the same class and message where that
    class can be imported here, else a RuntimeError with the message."""
    import importlib

    try:
        kind: Any = importlib.import_module(module)
        for part in name.split("."):
            kind = getattr(kind, part)
    except (ImportError, AttributeError):
        return RuntimeError(message)
    if not (isinstance(kind, type) and issubclass(kind, BaseException)):
        return RuntimeError(message)
    error = kind.__new__(kind)
    BaseException.__init__(error, message)
    return error


class PrecomputedEmbedder:
    """Gives back vectors computed elsewhere, by text, in the order they were computed.

    A text embedded several times is answered with its vectors in turn (the last one again
    once they run out), so a scorer asking in input order gets each trace's own vector.
    """

    def __init__(self, texts: Sequence[str], vectors: npt.NDArray[np.float32], name: str) -> None:
        self.dimensions = int(vectors.shape[1])
        self.name = name
        self._rows: dict[str, deque[int]] = {}
        for row, text in enumerate(texts):
            self._rows.setdefault(text, deque()).append(row)
        self._vectors = vectors

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        rows = []
        for text in texts:
            queue = self._rows[text]
            rows.append(queue.popleft() if len(queue) > 1 else queue[0])
        return self._vectors[rows]
