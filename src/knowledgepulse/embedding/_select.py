"""Which embedder to use: the one place that decides, and says why."""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from typing import Literal, get_args

from ._errors import MissingEmbedderRuntime
from ._minilm import INSTALL_HINT, missing_modules, require_model_dir
from ._onnx import check_onnx_runtime, default_embedder
from ._openvino import (
    OPENVINO_INSTALL_HINT,
    check_openvino_runtime,
    shared_openvino_embedder,
)
from ._protocol import Embedder
from ._torch_bf16 import (
    FAST_INSTALL_HINT,
    MiniLMBf16Embedder,
    check_bf16_runtime,
    cpu_has_native_bf16,
)
from ._windows import Windowing, resolve_windowing

__all__ = [
    "EMBEDDER_ENV",
    "FAST_DISABLE_ENV",
    "EmbedderChoice",
    "EmbedderKind",
    "choose_embedder",
    "select_embedder",
]

logger = logging.getLogger("knowledgepulse")

EMBEDDER_ENV = "KNOWLEDGEPULSE_EMBEDDER"
FAST_DISABLE_ENV = "KNOWLEDGEPULSE_NO_FAST_EMBEDDER"
_OFF_VALUES = frozenset({"none", "off", "0"})
EmbedderKind = Literal["onnx", "openvino", "bf16", "static", "none"]
_CHOICES = ("auto", *get_args(EmbedderKind))


@dataclass(frozen=True)
class EmbedderChoice:
    """The embedder picked (None: novelty falls back to 0.5), which kind, and why."""

    embedder: Embedder | None
    kind: EmbedderKind
    reason: str


def choose_embedder(
    choice: str = "auto", *, bulk: bool = False, windowing: str | None = None
) -> EmbedderChoice:
    """Pick the embedder for ``choice`` and say why (the policy behind :func:`select_embedder`).

    Args:
        choice: ``"auto"``, ``"onnx"``, ``"openvino"``, ``"bf16"``, ``"static"`` or ``"none"``.

            - ``"none"``: no embedder.
            - ``"static"``: the static embedder derived from MiniLM (model2vec recipe; fast,
              less accurate: a first pass), never chosen automatically; ``windowing`` does
              not apply (it reads every token).
            - ``"auto"``: none when ``$KNOWLEDGEPULSE_EMBEDDER`` is ``none``, ``off`` or ``0``,
              or when the runtime or the model package is not installed (logged once as a
              warning on the ``knowledgepulse`` logger). Otherwise OpenVINO bf16 where
              openvino is installed and the CPU has native bf16 (AMX or AVX512-BF16); else,
              with ``bulk``, the torch bf16 embedder where torch is installed, the CPU has
              native bf16 and ``$KNOWLEDGEPULSE_NO_FAST_EMBEDDER`` is not set; else ONNX
              Runtime fp32 (OpenVINO in fp32 is no faster than ONNX Runtime and loads slower).
            - ``"onnx"`` / ``"openvino"`` / ``"bf16"``: that embedder, or an error saying why
              not (``"openvino"`` runs in fp32 on a CPU without native bf16).
        bulk: the embedder will embed many texts (``kp score`` on a file), so throughput
            matters more than load time (OpenVINO: the ``THROUGHPUT`` hint, the same vectors).
        windowing: ``"whole"`` (a long text is embedded whole, in windows) or
            ``"first_window"`` (cut at 256 tokens, as sentence-transformers does); default
            ``$KNOWLEDGEPULSE_WINDOWING``, else ``"whole"``. The embedder's ``windowing``
            attribute says which it uses.

    Returns:
        The process-wide embedder of the kind chosen (its model loads on first use) or None.

    Raises:
        ValueError: ``choice`` is none of the five, or ``windowing`` (or
            ``$KNOWLEDGEPULSE_WINDOWING``) is neither windowing.
        MissingEmbedderRuntime: ``"onnx"``, ``"openvino"`` or ``"bf16"`` and a module it
            needs is not installed (the message carries the pip command).
        ModelDirectoryError: the model directory named by ``$KNOWLEDGEPULSE_MODEL_DIR`` (or the
            installed model package's) is missing or incomplete, for every choice but "none".
        EmbedderUnavailable: anything else that keeps the embedder from loading.
    """
    choice = choice.strip().lower()
    if choice not in _CHOICES:
        raise ValueError(f"embedder choice must be one of {', '.join(_CHOICES)}; got {choice!r}")
    mode = resolve_windowing(windowing)
    if choice == "none":
        return EmbedderChoice(None, "none", "embedder turned off")
    if choice == "static":
        from ._static import shared_static_embedder

        check_static_runtime()
        require_model_dir(None, "The static embedder (built from MiniLM)")
        return EmbedderChoice(
            shared_static_embedder(),
            "static",
            "static token vectors derived from MiniLM (asked for: fast, a first pass)",
        )
    if choice == "onnx":
        check_onnx_runtime()
        require_model_dir(None, "The MiniLM embedder")
        return EmbedderChoice(default_embedder(mode), "onnx", "onnxruntime fp32 (asked for)")
    if choice == "openvino":
        check_openvino_runtime()
        require_model_dir(None, "The OpenVINO MiniLM embedder")
        embedder = shared_openvino_embedder(mode, bulk=bulk)
        return EmbedderChoice(embedder, "openvino", f"openvino {embedder.precision} (asked for)")
    if choice == "bf16":
        check_bf16_runtime()
        require_model_dir(None, "The bf16 MiniLM embedder")
        return EmbedderChoice(_shared_bf16(mode), "bf16", "torch bf16 (asked for)")
    return _choose_automatically(bulk, mode)


def check_static_runtime() -> None:
    """Raise :class:`MissingEmbedderRuntime` if the static embedder cannot be built or run:
    it needs tokenizers and safetensors, and ONNX Runtime or OpenVINO to build its table."""
    missing = missing_modules(("tokenizers", "safetensors"))
    if missing_modules(("onnxruntime",)) and missing_modules(("openvino",)):
        missing.append("onnxruntime")
    if missing:
        raise MissingEmbedderRuntime(
            "The static embedder (built from MiniLM)", "embed", missing, install=INSTALL_HINT
        )


def select_embedder(
    choice: str = "auto", *, bulk: bool = False, windowing: str | None = None
) -> Embedder | None:
    """The embedder for ``choice``, or None for none: :func:`choose_embedder` without the reason.

    Args:
        choice: ``"auto"``, ``"onnx"``, ``"openvino"``, ``"bf16"``, ``"static"`` or
            ``"none"`` (see :func:`choose_embedder`).
        bulk: pick for throughput over many texts rather than for load time.
        windowing: ``"whole"`` or ``"first_window"`` (see :func:`choose_embedder`).
    """
    return choose_embedder(choice, bulk=bulk, windowing=windowing).embedder


def _choose_automatically(bulk: bool, windowing: Windowing) -> EmbedderChoice:
    setting = os.environ.get(EMBEDDER_ENV, "").strip().lower()
    if setting in _OFF_VALUES:
        return EmbedderChoice(None, "none", f"turned off by ${EMBEDDER_ENV}={setting}")
    try:
        check_onnx_runtime()
        # A directory that was asked for but is broken raises here: an error, not a fallback.
        require_model_dir(None, "The MiniLM embedder")
    except MissingEmbedderRuntime as exc:
        missing = ", ".join(exc.modules)
        _warn_not_installed(f"missing {missing}; {INSTALL_HINT}")
        return EmbedderChoice(None, "none", f"embedder not installed (missing {missing})")
    # OpenVINO bf16 first, for single traces and bulk runs alike: on CPUs with native bf16 it
    # was the fastest runtime measured (ahead of torch bf16 in bulk and of onnxruntime fp32)
    # and the lightest in memory after onnxruntime (no torch to load). The figures are in
    # docs/embeddings.md and docs/performance.md, from `python -m benchmarks`.
    why_not = _openvino_unsuitable()
    if why_not is None:
        return EmbedderChoice(
            shared_openvino_embedder(windowing, bulk=bulk),
            "openvino",
            "openvino bf16: the CPU has native bf16 (the fastest runtime measured here)",
        )
    logger.info("openvino bf16 embedder not used (%s)", why_not)
    not_used = [f"openvino bf16 not used: {why_not}"]
    if bulk:
        why_not_torch = _bf16_unsuitable()
        if why_not_torch is None:
            return EmbedderChoice(
                _shared_bf16(windowing),
                "bf16",
                f"torch bf16: bulk run on a CPU with native bf16 ({not_used[0]})",
            )
        logger.info("torch bf16 embedder not used (%s)", why_not_torch)
        not_used.append(f"torch bf16 not used: {why_not_torch}")
    return EmbedderChoice(
        default_embedder(windowing), "onnx", f"onnxruntime fp32 ({'; '.join(not_used)})"
    )


def _openvino_unsuitable() -> str | None:
    """Why OpenVINO bf16 should not be the embedder here, or None if it should."""
    try:
        check_openvino_runtime()
    except MissingEmbedderRuntime as exc:
        return f"{', '.join(exc.modules)} not installed ({OPENVINO_INSTALL_HINT})"
    if not cpu_has_native_bf16():
        return "the CPU lacks avx512_bf16/amx_bf16 (emulated bf16 is slower than fp32)"
    return None


def _bf16_unsuitable() -> str | None:
    """Why the bf16 embedder should not be used here for bulk runs, or None if it should."""
    if os.environ.get(FAST_DISABLE_ENV, "").strip() not in ("", "0"):
        return f"disabled by ${FAST_DISABLE_ENV}"
    try:
        check_bf16_runtime()
    except MissingEmbedderRuntime as exc:
        return f"{', '.join(exc.modules)} not installed ({FAST_INSTALL_HINT})"
    if not cpu_has_native_bf16():
        return "the CPU lacks avx512_bf16/amx_bf16 (emulated bf16 is slower than fp32)"
    return None


_bf16: dict[Windowing, MiniLMBf16Embedder] = {}
_bf16_lock = threading.Lock()


def _shared_bf16(windowing: Windowing) -> MiniLMBf16Embedder:
    """The process-wide bf16 embedder for ``windowing`` (created on first call; the model
    loads lazily)."""
    with _bf16_lock:
        if windowing not in _bf16:
            _bf16[windowing] = MiniLMBf16Embedder(windowing=windowing)
        return _bf16[windowing]


_warned = False
_warned_lock = threading.Lock()


def _warn_not_installed(detail: str) -> None:
    """Say once per process that novelty falls back to 0.5 (a log record, not a warning)."""
    global _warned
    with _warned_lock:
        if _warned:
            return
        _warned = True
    logger.warning(
        "knowledgepulse: novelty falls back to 0.5: the embedder is not installed (%s)", detail
    )
