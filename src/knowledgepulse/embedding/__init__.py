"""Sentence embedders for novelty: all-MiniLM-L6-v2, fully offline.

- :class:`Embedder` — the protocol any embedder follows; :func:`check_embedder` validates one.
- :class:`MiniLMEmbedder` — ONNX Runtime fp32, the default (the ``embed`` extra).
- :class:`MiniLMOpenVINOEmbedder` — OpenVINO, bf16 on CPUs with native bf16 (AMX,
  AVX512-BF16), fp32 elsewhere; no torch (the ``openvino`` extra). The automatic choice on
  such CPUs.
- :class:`MiniLMBf16Embedder` — torch bfloat16, faster for bulk runs on CPUs with native bf16
  (the ``fast`` extra).
- :class:`StaticEmbedder` — static token vectors derived locally from the same MiniLM weights
  (the model2vec recipe): hundreds of times faster, less accurate; a first pass for bulk
  novelty and near-duplicate candidates (``kp score --embedder static``).
- :func:`select_embedder` / :func:`choose_embedder` — the policy that picks one (and says why).

Long texts are embedded whole by default (``windowing="whole"``: 256-token windows covering
the text, pooled into one vector; docs/embeddings.md); ``windowing="first_window"`` cuts them
at 256 tokens as sentence-transformers does. A text that fits in one window gets the same
vector either way.

Errors: :class:`EmbedderUnavailable` is the base of :class:`MissingEmbedderRuntime` (a module is
not installed; also a ``MissingDependencyError``) and :class:`ModelDirectoryError` (the model
directory is broken). Importing this package imports no runtime library; models load on first
use.
"""

from __future__ import annotations

from ._errors import EmbedderUnavailable, MissingEmbedderRuntime, ModelDirectoryError
from ._minilm import INSTALL_HINT, MODEL_DIR_ENV
from ._onnx import MiniLMEmbedder, default_embedder, embedder_available
from ._openvino import OPENVINO_INSTALL_HINT, MiniLMOpenVINOEmbedder
from ._protocol import Embedder, check_embedder
from ._select import (
    EMBEDDER_ENV,
    FAST_DISABLE_ENV,
    EmbedderChoice,
    EmbedderKind,
    choose_embedder,
    select_embedder,
)
from ._static import (
    STATIC_MODEL_DIR_ENV,
    STATIC_MODEL_NAME,
    StaticEmbedder,
    StaticModelError,
    build_static_model,
    load_static_model,
    static_cache_dir,
    static_model_problem,
)
from ._torch_bf16 import FAST_INSTALL_HINT, MiniLMBf16Embedder, cpu_has_native_bf16
from ._windows import MAX_WINDOWS, WINDOWING_ENV, WINDOWINGS, Windowing

__all__ = [
    "EMBEDDER_ENV",
    "FAST_DISABLE_ENV",
    "FAST_INSTALL_HINT",
    "INSTALL_HINT",
    "MAX_WINDOWS",
    "MODEL_DIR_ENV",
    "OPENVINO_INSTALL_HINT",
    "STATIC_MODEL_DIR_ENV",
    "STATIC_MODEL_NAME",
    "WINDOWINGS",
    "WINDOWING_ENV",
    "Embedder",
    "EmbedderChoice",
    "EmbedderKind",
    "EmbedderUnavailable",
    "MiniLMBf16Embedder",
    "MiniLMEmbedder",
    "MiniLMOpenVINOEmbedder",
    "MissingEmbedderRuntime",
    "ModelDirectoryError",
    "StaticEmbedder",
    "StaticModelError",
    "Windowing",
    "build_static_model",
    "check_embedder",
    "choose_embedder",
    "cpu_has_native_bf16",
    "default_embedder",
    "embedder_available",
    "load_static_model",
    "select_embedder",
    "static_cache_dir",
    "static_model_problem",
]
