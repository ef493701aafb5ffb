"""select_embedder / choose_embedder (the one selection policy) and check_embedder."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

import knowledgepulse as kp
from knowledgepulse.embedding import (
    EMBEDDER_ENV,
    FAST_DISABLE_ENV,
    INSTALL_HINT,
    MODEL_DIR_ENV,
    OPENVINO_INSTALL_HINT,
    MiniLMBf16Embedder,
    MiniLMEmbedder,
    MiniLMOpenVINOEmbedder,
    MissingEmbedderRuntime,
    ModelDirectoryError,
    _minilm,
    _onnx,
    _openvino,
    _select,
    _torch_bf16,
    check_embedder,
    choose_embedder,
    select_embedder,
)

from ._shared import BF16_READY, ONNX_READY, OPENVINO_READY

needs_onnx = pytest.mark.skipif(not ONNX_READY, reason="MiniLM embedder not installed")


@pytest.fixture(autouse=True)
def _auto_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    # the suite-wide fixture turns "auto" off; these tests exercise it
    monkeypatch.delenv(EMBEDDER_ENV, raising=False)
    monkeypatch.delenv(MODEL_DIR_ENV, raising=False)
    monkeypatch.delenv(FAST_DISABLE_ENV, raising=False)
    monkeypatch.setattr(_select, "_warned", False)


def _bf16_possible(monkeypatch: pytest.MonkeyPatch, cpu_flags: set[str]) -> None:
    """Pretend torch is installed and the CPU has ``cpu_flags``."""
    monkeypatch.setattr(_torch_bf16, "_cpu_flags", lambda: frozenset(cpu_flags))
    monkeypatch.setattr(_torch_bf16, "_RUNTIME_MODULES", ("tokenizers",))


def _without_openvino(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pretend openvino is not installed (the choices made without it)."""
    monkeypatch.setattr(_openvino, "_RUNTIME_MODULES", ("no_such_openvino_kp",))


def _with_openvino(monkeypatch: pytest.MonkeyPatch, cpu_flags: set[str]) -> None:
    """Pretend torch is not installed, openvino is, and the CPU has ``cpu_flags``."""
    monkeypatch.setattr(_torch_bf16, "_cpu_flags", lambda: frozenset(cpu_flags))
    monkeypatch.setattr(_torch_bf16, "_RUNTIME_MODULES", ("no_such_torch_kp",))
    monkeypatch.setattr(_openvino, "_RUNTIME_MODULES", ("tokenizers",))


# --- choices --------------------------------------------------------------------------------


def test_none_needs_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MODEL_DIR_ENV, "/nonexistent")
    choice = choose_embedder("none")
    assert (choice.embedder, choice.kind, choice.reason) == (None, "none", "embedder turned off")
    assert select_embedder("none", bulk=True) is None


@pytest.mark.parametrize("value", ["none", "off", "0", " OFF "])
def test_env_turns_auto_off(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(EMBEDDER_ENV, value)
    choice = choose_embedder("auto", bulk=True)
    assert choice.embedder is None and choice.kind == "none"
    assert choice.reason == f"turned off by ${EMBEDDER_ENV}={value.strip().lower()}"


def test_unknown_choice_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="auto, onnx, openvino, bf16, static, none; got 'minilm'"):
        select_embedder("minilm")


@needs_onnx
def test_auto_single_traces_use_onnx_without_openvino(monkeypatch: pytest.MonkeyPatch) -> None:
    _bf16_possible(monkeypatch, {"avx512_bf16"})
    _without_openvino(monkeypatch)
    choice = choose_embedder("auto")
    assert isinstance(choice.embedder, MiniLMEmbedder) and choice.kind == "onnx"
    assert choice.reason == (
        "onnxruntime fp32 (openvino bf16 not used: no_such_openvino_kp not installed "
        f"({OPENVINO_INSTALL_HINT}))"
    )
    assert choice.embedder is _onnx.default_embedder()  # process-wide


@needs_onnx
def test_auto_bulk_picks_bf16_when_supported(monkeypatch: pytest.MonkeyPatch) -> None:
    _bf16_possible(monkeypatch, {"avx512_bf16"})
    _without_openvino(monkeypatch)
    choice = choose_embedder("auto", bulk=True)
    assert isinstance(choice.embedder, MiniLMBf16Embedder) and choice.kind == "bf16"
    assert choice.reason == (
        "torch bf16: bulk run on a CPU with native bf16 (openvino bf16 not used: "
        f"no_such_openvino_kp not installed ({OPENVINO_INSTALL_HINT}))"
    )
    assert select_embedder("auto", bulk=True) is choice.embedder  # process-wide


@needs_onnx
def test_auto_bulk_falls_back_without_bf16_cpu(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _bf16_possible(monkeypatch, {"avx2"})
    _without_openvino(monkeypatch)
    with caplog.at_level(logging.INFO, logger="knowledgepulse"):
        best = choose_embedder("auto", bulk=True)
    assert isinstance(best.embedder, MiniLMEmbedder) and best.kind == "onnx"
    assert "avx512_bf16" in best.reason
    assert any("bf16 embedder not used" in r.getMessage() for r in caplog.records)
    assert select_embedder("auto", bulk=True) is best.embedder


@needs_onnx
def test_auto_bulk_falls_back_without_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_torch_bf16, "_RUNTIME_MODULES", ("no_such_module_kp",))
    _without_openvino(monkeypatch)
    choice = choose_embedder("auto", bulk=True)
    assert isinstance(choice.embedder, MiniLMEmbedder)
    assert "no_such_module_kp not installed" in choice.reason


@needs_onnx
def test_auto_bulk_bf16_can_be_disabled(monkeypatch: pytest.MonkeyPatch) -> None:
    _bf16_possible(monkeypatch, {"avx512_bf16"})
    _without_openvino(monkeypatch)
    monkeypatch.setenv(FAST_DISABLE_ENV, "1")
    choice = choose_embedder("auto", bulk=True)
    assert isinstance(choice.embedder, MiniLMEmbedder)
    assert choice.reason.startswith("onnxruntime fp32 (openvino bf16 not used: ")
    assert choice.reason.endswith(f"; torch bf16 not used: disabled by ${FAST_DISABLE_ENV})")


@needs_onnx
def test_explicit_choices_return_their_kind() -> None:
    assert select_embedder("onnx") is _onnx.default_embedder()
    assert choose_embedder("ONNX").reason == "onnxruntime fp32 (asked for)"
    if BF16_READY:
        assert isinstance(select_embedder("bf16", bulk=True), MiniLMBf16Embedder)


@needs_onnx
def test_auto_picks_openvino_bf16_on_a_native_bf16_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    _with_openvino(monkeypatch, {"avx512f", "amx_bf16"})
    single = choose_embedder("auto")
    assert isinstance(single.embedder, MiniLMOpenVINOEmbedder) and single.kind == "openvino"
    assert single.embedder.precision == "bf16"
    assert (
        single.reason
        == "openvino bf16: the CPU has native bf16 (the fastest runtime measured here)"
    )
    assert single.embedder is _openvino.shared_openvino_embedder()  # process-wide
    assert single.embedder.performance_hint == "LATENCY"  # one short text fastest
    bulk = choose_embedder("auto", bulk=True)
    # A bulk run's calls run side by side on the streams of the THROUGHPUT hint (same bits).
    assert bulk.embedder is _openvino.shared_openvino_embedder(bulk=True)
    assert isinstance(bulk.embedder, MiniLMOpenVINOEmbedder)
    assert bulk.embedder.performance_hint == "THROUGHPUT"
    assert bulk.reason == single.reason


@needs_onnx
def test_auto_bulk_prefers_openvino_to_torch_bf16(monkeypatch: pytest.MonkeyPatch) -> None:
    _with_openvino(monkeypatch, {"avx512f", "amx_bf16"})
    monkeypatch.setattr(_torch_bf16, "_RUNTIME_MODULES", ("tokenizers",))  # torch "installed"
    bulk = choose_embedder("auto", bulk=True)
    assert isinstance(bulk.embedder, MiniLMOpenVINOEmbedder) and bulk.kind == "openvino"


@needs_onnx
def test_auto_keeps_onnx_where_openvino_would_run_fp32(monkeypatch: pytest.MonkeyPatch) -> None:
    _with_openvino(monkeypatch, {"avx512f", "avx2"})
    choice = choose_embedder("auto")
    assert isinstance(choice.embedder, MiniLMEmbedder) and choice.kind == "onnx"
    assert choice.reason == (
        "onnxruntime fp32 (openvino bf16 not used: the CPU lacks avx512_bf16/amx_bf16 "
        "(emulated bf16 is slower than fp32))"
    )


@pytest.mark.skipif(not OPENVINO_READY, reason="openvino not installed")
def test_explicit_openvino_says_its_precision() -> None:
    choice = choose_embedder("OpenVINO", windowing="first_window")
    assert isinstance(choice.embedder, MiniLMOpenVINOEmbedder) and choice.kind == "openvino"
    assert choice.embedder.windowing == "first_window"
    assert choice.reason == f"openvino {choice.embedder.precision} (asked for)"


@pytest.mark.parametrize(
    ("kind", "extra"), [("onnx", "embed"), ("bf16", "fast"), ("openvino", "openvino")]
)
def test_explicit_choice_without_runtime_raises_with_pip_command(
    kind: str, extra: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = {"onnx": _onnx, "bf16": _torch_bf16, "openvino": _openvino}[kind]
    monkeypatch.setattr(module, "_RUNTIME_MODULES", ("no_such_module_kp",))
    with pytest.raises(MissingEmbedderRuntime, match=r"no_such_module_kp.*pip install") as info:
        select_embedder(kind)
    assert info.value.extra == extra


def test_auto_without_runtime_warns_once_by_logging_only(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(_onnx, "_RUNTIME_MODULES", ("onnxruntime", "no_such_module_kp"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warnings.warn on top of the log record
        with caplog.at_level(logging.WARNING, logger="knowledgepulse"):
            first = choose_embedder("auto")
            assert select_embedder("auto", bulk=True) is None
    assert first.embedder is None and first.kind == "none"
    assert first.reason == "embedder not installed (missing no_such_module_kp)"
    messages = [r.getMessage() for r in caplog.records if r.name == "knowledgepulse"]
    assert messages == [
        "knowledgepulse: novelty falls back to 0.5: the embedder is not installed "
        f"(missing no_such_module_kp; {INSTALL_HINT})"
    ]


def test_auto_without_model_package_returns_none(monkeypatch: pytest.MonkeyPatch) -> None:
    if not ONNX_READY:
        pytest.skip("runtime not installed")
    monkeypatch.setattr(_minilm, "_package_model_dir", lambda: None)
    choice = choose_embedder("auto")
    assert choice.embedder is None
    assert choice.reason == f"embedder not installed (missing {_minilm.MODEL_PACKAGE})"


# --- a broken model directory is an error ---------------------------------------------------


@needs_onnx
@pytest.mark.parametrize("choice", ["auto", "onnx", "bf16", "openvino"])
def test_missing_model_dir_from_env_raises(choice: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if choice == "bf16" and not BF16_READY:
        pytest.skip("torch not installed")
    if choice == "openvino" and not OPENVINO_READY:
        pytest.skip("openvino not installed")
    monkeypatch.setenv(MODEL_DIR_ENV, "/nonexistent")
    with pytest.raises(ModelDirectoryError) as info:
        select_embedder(choice, bulk=True)
    assert str(info.value).startswith(
        f"MiniLM model directory /nonexistent: does not exist (from ${MODEL_DIR_ENV})."
    )
    assert info.value.path == Path("/nonexistent")


@needs_onnx
def test_incomplete_model_dir_names_the_missing_files(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(MODEL_DIR_ENV, str(tmp_path))
    with pytest.raises(ModelDirectoryError) as info:
        select_embedder("auto")
    assert info.value.problem == (
        f"has no model.safetensors and no tokenizer.json (from ${MODEL_DIR_ENV})"
    )
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(ModelDirectoryError, match=r"has no model\.safetensors \(from"):
        select_embedder("auto")


@needs_onnx
def test_scorer_with_a_broken_model_dir_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MODEL_DIR_ENV, "/nonexistent")
    with pytest.raises(ModelDirectoryError, match="/nonexistent: does not exist"):
        _ = kp.Scorer().embedder


# --- check_embedder -------------------------------------------------------------------------


class _Unnamed:
    dimensions = 3

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.calls += 1
        return np.full((len(texts), 3), 1 / np.sqrt(3), dtype=np.float32)


class _Named(_Unnamed):
    name = "three ones"


def test_check_embedder_returns_a_named_embedder_itself() -> None:
    named = _Named()
    assert check_embedder(named) is named


def test_check_embedder_names_an_unnamed_one_after_its_class() -> None:
    unnamed = _Unnamed()
    checked = check_embedder(unnamed)
    assert checked.name == "_Unnamed"
    assert checked.dimensions == 3
    assert checked.embed(["a", "b"]).shape == (2, 3)
    assert unnamed.calls == 1
    assert checked.calls == 1  # type: ignore[attr-defined]  # other attributes forwarded
    assert checked.wrapped is unnamed  # type: ignore[attr-defined]
    assert not hasattr(unnamed, "name")


@pytest.mark.parametrize(
    ("candidate", "message"),
    [
        (
            "minilm",
            "str object is not an embedder: it needs a callable embed(texts) and an int dimensions > 0 (it has None)",
        ),
        (type("NoDims", (), {"embed": lambda self, t: t}), "an int dimensions > 0 (it has None)"),
        (type("ZeroDims", (_Unnamed,), {"dimensions": 0}), "an int dimensions > 0 (it has 0)"),
        (
            type("BoolDims", (_Unnamed,), {"dimensions": True}),
            "an int dimensions > 0 (it has True)",
        ),
        (type("BadName", (_Unnamed,), {"name": 7}), "a str name (it has 7)"),
        (type("NotCallable", (), {"embed": 1, "dimensions": 3}), "a callable embed(texts)"),
    ],
)
def test_check_embedder_says_what_is_missing(candidate: object, message: str) -> None:
    instance = candidate() if isinstance(candidate, type) else candidate
    with pytest.raises(TypeError) as info:
        check_embedder(instance)
    assert message in str(info.value)
