"""all-MiniLM-L6-v2 in bfloat16 on PyTorch (oneDNN, AVX512-BF16 / AMX): the bulk embedder.

Same model, tokenizer, windows and output as :class:`~knowledgepulse.embedding.MiniLMEmbedder`
(mean pooling + L2 normalisation), but the encoder runs in bfloat16: the weights are cast once
at load, the embeddings LayerNorm, pooling and normalisation stay in float32. On CPUs with
native bf16 dot products (``avx512_bf16`` or AMX) oneDNN's bf16 GEMMs run several times faster
than fp32 ones (docs/performance.md); embeddings stay within 1 - cos < 2e-4 of
sentence-transformers fp32.

The encoder is written out by hand (about 30 lines of torch ops) so neither ``transformers`` nor
``sentence-transformers`` is needed; only ``torch`` (the ``fast`` extra) on top of the ``embed``
extra. torch is imported only when a model loads.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from ._errors import MissingEmbedderRuntime
from ._lazy_minilm import LazyMiniLM
from ._minilm import (
    ARCHITECTURE,
    MiniLMTokenizer,
    missing_modules,
    pick_weights,
    require_model_dir,
)
from ._windows import MAX_WINDOWS, batches_by_tokens

__all__ = [
    "FAST_INSTALL_HINT",
    "Bf16CpuPath",
    "MiniLMBf16Embedder",
    "bf16_cpu_path",
    "check_bf16_runtime",
    "cpu_has_native_bf16",
]

FAST_INSTALL_HINT = (
    "pip install 'knowledgepulse[embed,fast]'  (with a CPU build of torch 2.13: the default "
    "Linux wheel carries CUDA and is several GB)"
)
_FEATURE = "The bf16 MiniLM embedder"
_RUNTIME_MODULES = ("torch", "tokenizers", "safetensors")
_HIDDEN = ARCHITECTURE.hidden
_HEADS = ARCHITECTURE.heads
_EPS = ARCHITECTURE.eps
# Padded tokens per batch: keeps GEMMs big for short texts and attention cache-friendly for long
# ones. A larger budget does not raise throughput (AMX and AVX512-BF16 alike) but does raise
# the peak memory of embedding long windows.
_DEFAULT_MAX_BATCH_TOKENS = 2048
# Rows the pre-packed weights are laid out for (oneDNN picks the AMX tile blocking by it).
_PACK_ROWS = _DEFAULT_MAX_BATCH_TOKENS
# CPU flags that give bf16 GEMMs native speed (Linux /proc/cpuinfo spelling).
_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})


def _cpu_flags() -> frozenset[str]:
    """The CPU feature flags from /proc/cpuinfo (empty where unavailable, e.g. not Linux)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.startswith("flags"):
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return frozenset()


def cpu_has_native_bf16() -> bool:
    """True if the CPU has native bfloat16 dot products (AVX512-BF16 or AMX-BF16)."""
    return bool(_cpu_flags() & _BF16_FLAGS)


@dataclass(frozen=True)
class Bf16CpuPath:
    """Which bf16 GEMM kernels oneDNN runs on this CPU, and the CPU flags that say so.

    ``name`` is ``"amx"`` (AMX-BF16 tile units), ``"avx512_bf16"`` (AVX-512 bf16 dot
    products) or ``"none"`` (bf16 emulated in fp32 units: slower than fp32).
    """

    name: Literal["amx", "avx512_bf16", "none"]
    reason: str


def bf16_cpu_path() -> Bf16CpuPath:
    """The bf16 kernel family this CPU gives oneDNN, from /proc/cpuinfo's flags."""
    flags = _cpu_flags()
    if {"amx_bf16", "amx_tile"} <= flags:
        return Bf16CpuPath("amx", "CPU flags amx_bf16 and amx_tile: AMX tile GEMMs")
    if "avx512_bf16" in flags:
        return Bf16CpuPath(
            "avx512_bf16", "CPU flag avx512_bf16 (no AMX): AVX-512 bf16 dot products"
        )
    return Bf16CpuPath("none", "no amx_bf16 or avx512_bf16 flag: bf16 is emulated")


def check_bf16_runtime() -> None:
    """Raise :class:`MissingEmbedderRuntime` if torch, tokenizers or safetensors is missing."""
    missing = missing_modules(_RUNTIME_MODULES)
    if missing:
        raise MissingEmbedderRuntime(_FEATURE, "fast", missing, install=FAST_INSTALL_HINT)


class _LoadedBf16:
    """Tokenizer + bf16 weights + the encoder forward pass."""

    def __init__(self, model_dir: Path) -> None:
        torch: Any = importlib.import_module("torch")
        st_torch: Any = importlib.import_module("safetensors.torch")
        self.torch = torch
        self.functional: Any = importlib.import_module("torch.nn.functional")
        self.model_dir = model_dir
        self.tokenizer = MiniLMTokenizer(model_dir)

        model_file = model_dir / "model.safetensors"
        w = {
            name: tensor.float()
            for name, tensor in pick_weights(
                st_torch.load_file(str(model_file)), model_file
            ).items()
        }

        bf16 = torch.bfloat16
        self.word = w["embeddings.word_embeddings.weight"]
        # token_type_ids are all zero for single sentences: fold that row into the positions
        self.pos = (
            w["embeddings.position_embeddings.weight"]
            + w["embeddings.token_type_embeddings.weight"][0]
        ).contiguous()
        self.emb_ln = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        scale = 1.0 / float(np.sqrt(ARCHITECTURE.head_dim))
        self.layers: list[dict[str, Any]] = []
        for n in range(ARCHITECTURE.layers):
            p = f"encoder.layer.{n}."
            att = p + "attention."
            # query pre-scaled by 1/sqrt(head_dim): SDPA is then called with scale=1
            qkv_w = torch.cat(
                [
                    w[att + "self.query.weight"] * scale,
                    w[att + "self.key.weight"],
                    w[att + "self.value.weight"],
                ]
            )
            qkv_b = torch.cat(
                [
                    w[att + "self.query.bias"] * scale,
                    w[att + "self.key.bias"],
                    w[att + "self.value.bias"],
                ]
            )
            self.layers.append(
                {
                    "qkv": (qkv_w.to(bf16).contiguous(), qkv_b.to(bf16)),
                    "out": (
                        w[att + "output.dense.weight"].to(bf16).contiguous(),
                        w[att + "output.dense.bias"].to(bf16),
                    ),
                    "ln1": (
                        w[att + "output.LayerNorm.weight"].to(bf16),
                        w[att + "output.LayerNorm.bias"].to(bf16),
                    ),
                    "ffn_in": (
                        w[p + "intermediate.dense.weight"].to(bf16).contiguous(),
                        w[p + "intermediate.dense.bias"].to(bf16),
                    ),
                    "ffn_out": (
                        w[p + "output.dense.weight"].to(bf16).contiguous(),
                        w[p + "output.dense.bias"].to(bf16),
                    ),
                    "ln2": (
                        w[p + "output.LayerNorm.weight"].to(bf16),
                        w[p + "output.LayerNorm.bias"].to(bf16),
                    ),
                }
            )
        self._fused = self._probe_fused_linear()
        self.cpu_path = bf16_cpu_path()
        # On AMX, oneDNN otherwise reorders every weight into tile layout on every call, so
        # pre-packing once raises batch throughput. AVX512-BF16 CPUs keep the plain layout
        # (pre-packing was not measured there).
        self.prepacked = self._fused and self.cpu_path.name == "amx" and self._prepack()

    def _probe_fused_linear(self) -> bool:
        """True if oneDNN's fused linear(+bias, +gelu, +residual) op works in this torch."""
        torch = self.torch
        try:
            op = torch.ops.mkldnn._linear_pointwise
            x = torch.randn(4, _HIDDEN).to(torch.bfloat16)
            weight, bias = self.layers[0]["ffn_in"]
            got = op(x, weight, bias, "gelu", [], "none").float()
            want = self.functional.gelu(self.functional.linear(x, weight, bias)).float()
            out_w, out_b = self.layers[0]["ffn_out"]
            got2 = op.binary(got.to(torch.bfloat16), x, out_w, out_b, "add").float()
            want2 = (self.functional.linear(got.to(torch.bfloat16), out_w, out_b) + x).float()
            return bool(
                torch.allclose(got, want, atol=0.1, rtol=0.05)
                and torch.allclose(got2, want2, atol=0.1, rtol=0.05)
            )
        except (AttributeError, RuntimeError, NotImplementedError):
            return False

    def _prepack(self) -> bool:
        """Lay the linear weights out for oneDNN's AMX kernels once; False (weights left
        as they are) if this torch lacks the op or its packed output differs."""
        torch = self.torch
        op = torch.ops.mkldnn._linear_pointwise
        try:
            packed = [
                {
                    key: (torch.ops.mkldnn._reorder_linear_weight(layer[key][0], _PACK_ROWS),)
                    for key in ("qkv", "out", "ffn_in", "ffn_out")
                }
                for layer in self.layers
            ]
            x = torch.randn(4, _HIDDEN).to(torch.bfloat16)
            weight, bias = self.layers[0]["qkv"]
            want = op(x, weight, bias, "none", [], "")
            got = op(x, packed[0]["qkv"][0], bias, "none", [], "")
            if not torch.allclose(got.float(), want.float(), atol=0.1, rtol=0.05):
                return False
        except (AttributeError, RuntimeError, NotImplementedError):
            return False
        for layer, weights in zip(self.layers, packed):
            for key, (weight,) in weights.items():
                layer[key] = (weight, layer[key][1])
        return True

    def _encode(self, input_ids: Any, mask: Any) -> Any:
        """Token ids [B, L] + mask [B, L] -> unit-norm float32 sentence embeddings [B, 384]."""
        torch, F = self.torch, self.functional
        batch, length = input_ids.shape
        x = self.word[input_ids] + self.pos[:length]
        x = F.layer_norm(x, (_HIDDEN,), *self.emb_ln, _EPS).to(torch.bfloat16)
        x = x.view(batch * length, _HIDDEN)
        keep = mask[:, None, None, :].bool()  # [B, 1, 1, L]: True = attend
        head_dim = ARCHITECTURE.head_dim
        for layer in self.layers:
            qkv = self._linear(x, layer["qkv"])
            qkv = qkv.view(batch, length, 3, _HEADS, head_dim).permute(2, 0, 3, 1, 4)
            ctx = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], attn_mask=keep, scale=1.0)
            ctx = ctx.transpose(1, 2).reshape(batch * length, _HIDDEN)
            x = F.layer_norm(self._linear(ctx, layer["out"], x), (_HIDDEN,), *layer["ln1"], _EPS)
            hidden = self._linear(x, layer["ffn_in"], gelu=True)
            x = F.layer_norm(
                self._linear(hidden, layer["ffn_out"], x), (_HIDDEN,), *layer["ln2"], _EPS
            )
        weights = mask[..., None].float()
        pooled = (x.view(batch, length, _HIDDEN).float() * weights).sum(1)
        pooled = pooled / weights.sum(1).clamp(min=1e-9)
        return F.normalize(pooled, dim=-1)

    def _linear(
        self, x: Any, wb: tuple[Any, Any], residual: Any = None, *, gelu: bool = False
    ) -> Any:
        """x @ W.T + b (then gelu, or + residual), fused by oneDNN where available."""
        weight, bias = wb
        if self._fused:
            op = self.torch.ops.mkldnn._linear_pointwise
            if residual is not None:
                return op.binary(x, residual, weight, bias, "add")
            return op(x, weight, bias, "gelu" if gelu else "none", [], "none" if gelu else "")
        F = self.functional
        y = F.linear(x, weight, bias)
        if gelu:
            return F.gelu(y)
        return y if residual is None else y + residual

    def embed_windows(
        self, token_ids: list[npt.NDArray[np.int64]], batch_size: int, max_tokens: int
    ) -> npt.NDArray[np.float32]:
        """Unit-norm vectors of token-id windows ([CLS] ... [SEP]), one row per window."""
        torch = self.torch
        lengths = np.fromiter((len(x) for x in token_ids), dtype=np.int64, count=len(token_ids))
        # Length bucketing: neighbours in sorted order have similar lengths, so little padding.
        order = np.argsort(lengths, kind="stable")
        out = np.empty((len(token_ids), _HIDDEN), dtype=np.float32)
        with torch.inference_mode():
            for chunk in batches_by_tokens(order, lengths, batch_size, max_tokens):
                width = int(lengths[chunk[-1]])
                ids = np.zeros((len(chunk), width), dtype=np.int64)
                mask = np.zeros((len(chunk), width), dtype=np.int64)
                for row, idx in enumerate(chunk):
                    n = int(lengths[idx])
                    ids[row, :n] = token_ids[idx]
                    mask[row, :n] = 1
                vectors = self._encode(torch.from_numpy(ids), torch.from_numpy(mask))
                out[chunk] = vectors.numpy()
        return out


class MiniLMBf16Embedder(LazyMiniLM[_LoadedBf16]):
    """all-MiniLM-L6-v2 sentence embeddings in bfloat16 on PyTorch/oneDNN (bulk scoring).

    Needs torch (the ``fast`` extra) and is only fast on CPUs with AVX512-BF16 or AMX (see
    :func:`cpu_has_native_bf16`); elsewhere bf16 is emulated and slower than fp32, so prefer
    ``select_embedder(bulk=True)``, which picks it only there. Construction is cheap; the model
    loads on first ``embed()`` (or ``warm_up()``), once, thread-safely.

    Windows (of all texts in the call together) are sorted by length and batched by at most
    ``batch_size`` windows and at most ``max_batch_tokens`` padded tokens. ``threads``
    (optional) calls ``torch.set_num_threads``, which is process-wide; by default torch uses
    one thread per physical core. ``model_dir``, ``windowing`` and ``max_windows`` as for
    :class:`~knowledgepulse.embedding.MiniLMEmbedder`.
    """

    name = "all-MiniLM-L6-v2 (torch bf16)"
    precision = "bf16"

    def __init__(
        self,
        model_dir: str | os.PathLike[str] | None = None,
        *,
        threads: int | None = None,
        batch_size: int = 64,
        max_batch_tokens: int = _DEFAULT_MAX_BATCH_TOKENS,
        windowing: str | None = None,
        max_windows: int = MAX_WINDOWS,
    ) -> None:
        if max_batch_tokens < 1:
            raise ValueError(f"max_batch_tokens must be >= 1, got {max_batch_tokens}")
        super().__init__(
            model_dir,
            threads=threads,
            batch_size=batch_size,
            windowing=windowing,
            max_windows=max_windows,
        )
        self.max_batch_tokens = max_batch_tokens

    def _load(self) -> _LoadedBf16:
        check_bf16_runtime()
        loaded = _LoadedBf16(require_model_dir(self._model_dir_arg, _FEATURE))
        if self.threads is not None:
            loaded.torch.set_num_threads(self.threads)
        return loaded

    def _encode_windows(
        self, model: _LoadedBf16, windows: list[npt.NDArray[np.int64]]
    ) -> npt.NDArray[np.float32]:
        return model.embed_windows(windows, self.batch_size, self.max_batch_tokens)
