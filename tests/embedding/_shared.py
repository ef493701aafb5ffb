"""What the embedder tests share: the reference file and which embedders are installed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from knowledgepulse.embedding import (
    MiniLMBf16Embedder,
    MiniLMEmbedder,
    MiniLMOpenVINOEmbedder,
    embedder_available,
)
from knowledgepulse.embedding._minilm import missing_modules

REFERENCE = Path(__file__).parents[1] / "data" / "minilm_reference.npz"

ONNX_READY = embedder_available()
BF16_READY = ONNX_READY and not missing_modules(["torch"])
OPENVINO_READY = ONNX_READY and not missing_modules(["openvino"])

# kind -> (class, constructor arguments of the shared test instance); the shared instances cut
# at 256 tokens like sentence-transformers, whose output is the reference they are held to
KINDS: dict[str, tuple[type[Any], dict[str, Any]]] = {
    "onnx": (MiniLMEmbedder, {"windowing": "first_window"}),
    "bf16": (MiniLMBf16Embedder, {"batch_size": 8, "windowing": "first_window"}),
    "openvino": (MiniLMOpenVINOEmbedder, {"windowing": "first_window"}),
}
READY = {"onnx": ONNX_READY, "bf16": BF16_READY, "openvino": OPENVINO_READY}
NOT_READY = {
    "onnx": "MiniLM embedder not installed (pip install 'knowledgepulse[embed]' and the model)",
    "bf16": "bf16 embedder not installed (needs torch: pip install 'knowledgepulse[fast]')",
    "openvino": "OpenVINO embedder not installed (pip install 'knowledgepulse[openvino]')",
}


def kind_param(kind: str) -> Any:
    """A pytest param for ``kind`` that skips when that embedder is not installed."""
    marks = pytest.mark.skipif(not READY[kind], reason=NOT_READY[kind])
    return pytest.param(kind, marks=marks, id=kind)
