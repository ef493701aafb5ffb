"""The SQLite base's HNSW index: the search setting applies to new and reloaded graphs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from knowledgepulse.kb._index import EXPANSION_SEARCH, VectorIndex


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
    index.save_ann()
    again = VectorIndex(16, mode="ann", ann_path=path)
    again.extend([str(i) for i in range(300)], rows)
    found = again.nearest(rows[:50], 1)
    assert again._ann.expansion_search == 128
    # HNSW is approximate and its graph depends on the insertion threads: recall, not identity.
    hits = [n for n, row in enumerate(found) if row[0][0] == n]
    assert len(hits) >= 45
    assert [found[n][0][1] for n in hits] == pytest.approx([1.0] * len(hits), abs=1e-5)
