"""The SQLite base's HNSW index: the build and search settings apply to new and reloaded graphs,
are recorded beside a saved graph, and a graph saved with other settings is rebuilt."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from knowledgepulse.kb._index import EXPANSION_SEARCH, HNSW_SETTINGS, VectorIndex


@pytest.fixture(autouse=True)
def _usearch() -> None:
    # Imported by the test, not at collection: usearch loaded before ray.init() in one process
    # makes Ray's client abort (seen with usearch 2.26 and ray 2.60), which would take the
    # distributed tests collected after this module down with it.
    pytest.importorskip("usearch")


def _rows(n: int) -> npt.NDArray[np.float32]:
    rows = np.random.default_rng(5).standard_normal((n, 16)).astype(np.float32)
    normalised: npt.NDArray[np.float32] = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return normalised


def test_a_new_and_a_reloaded_graph_search_with_the_measured_expansion(tmp_path: Path) -> None:
    rows = _rows(300)
    path = tmp_path / "kb.usearch"
    index = VectorIndex(16, mode="ann", ann_path=path)
    index.extend([str(i) for i in range(300)], rows)
    assert index.nearest(rows[7], 1)[0][0][0] == 7
    assert index._ann.expansion_search == EXPANSION_SEARCH == 128
    assert index._ann.expansion_add == HNSW_SETTINGS["expansion_add"] == 128
    assert index._ann.connectivity == HNSW_SETTINGS["connectivity"] == 32
    index.save_ann()
    assert json.loads(path.with_name("kb.usearch.json").read_text()) == {
        "connectivity": 32,
        "dtype": "f32",
        "expansion_add": 128,
    }
    again = VectorIndex(16, mode="ann", ann_path=path)
    again.extend([str(i) for i in range(300)], rows)
    found = again.nearest(rows[:50], 1)
    assert again._ann_rows == 300  # loaded, not rebuilt
    # usearch keeps neither expansion in the file: both are set again on load.
    assert again._ann.expansion_search == 128
    assert again._ann.expansion_add == 128
    # HNSW is approximate and its graph depends on the insertion threads: recall, not identity.
    hits = [n for n, row in enumerate(found) if row[0][0] == n]
    assert len(hits) >= 45
    assert [found[n][0][1] for n in hits] == pytest.approx([1.0] * len(hits), abs=1e-5)


@pytest.mark.parametrize(
    "recorded", [None, {"connectivity": 32, "expansion_add": 128, "dtype": "f16"}]
)
def test_a_graph_saved_with_other_settings_is_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, recorded: dict[str, object] | None
) -> None:
    from usearch.index import Index

    rows = _rows(300)
    path = tmp_path / "kb.usearch"
    old = Index(ndim=16, metric="ip", dtype="f16", connectivity=16, expansion_add=64)
    old.add(np.arange(300, dtype=np.uint64), rows)
    old.save(str(path))
    if recorded is not None:
        path.with_name("kb.usearch.json").write_text(json.dumps(recorded))
    index = VectorIndex(16, mode="ann", ann_path=path)
    index.extend([str(i) for i in range(300)], rows)
    with caplog.at_level(logging.WARNING, logger="knowledgepulse"):
        assert index.nearest(rows[3], 1)[0][0][0] == 3
    assert "was built with other settings" in caplog.text
    assert index._ann.connectivity == 32
    assert index._ann.expansion_add == 128
    assert str(index._ann.dtype) == "ScalarKind.F32"
    index.save_ann()
    assert json.loads(path.with_name("kb.usearch.json").read_text()) == HNSW_SETTINGS
