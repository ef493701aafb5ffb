"""One local Ray (2 CPUs) for the whole session, and corpora to score on it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ._corpus import write_corpus

ROOT = Path(__file__).resolve().parents[2]
TAU_BENCH = ROOT / "examples" / "tau-bench" / "gpt-4o-airline.json.gz"


@pytest.fixture(scope="session")
def ray_session() -> Iterator[Any]:
    ray = pytest.importorskip("ray")
    # Workers import the test helpers (the embedders shipped to them) and this source tree.
    paths = [str(ROOT / "src"), str(ROOT / "tests"), str(ROOT)]
    previous = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([*paths, *([previous] if previous else [])])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()
    if previous is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = previous


@pytest.fixture(scope="session")
def corpus_5000(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_corpus(tmp_path_factory.mktemp("corpus") / "corpus.jsonl", 5000)


@pytest.fixture
def tau_bench() -> Path:
    if not TAU_BENCH.is_file():
        pytest.skip("the tau-bench corpus is not here")
    return TAU_BENCH
