"""Fixtures shared by the embedder tests: the reference embeddings and one embedder per kind."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from knowledgepulse.embedding._lazy_minilm import LazyMiniLM

from ._shared import KINDS, REFERENCE, kind_param


@pytest.fixture(scope="session")
def reference() -> tuple[list[str], np.ndarray]:
    data = np.load(REFERENCE, allow_pickle=False)
    return [str(s) for s in data["sentences"]], data["embeddings"]


@pytest.fixture(scope="session")
def loaded() -> dict[str, Any]:
    """One warmed-up embedder per kind, created on first request and shared by the session."""
    return {}


@pytest.fixture(params=[kind_param(kind) for kind in KINDS])
def embedder(request: pytest.FixtureRequest, loaded: dict[str, Any]) -> Any:
    """A loaded embedder of each kind (the test runs once per kind)."""
    kind: str = request.param
    if kind not in loaded:
        cls, kwargs = KINDS[kind]
        model = cls(**kwargs)
        model.warm_up()
        loaded[kind] = model
    return loaded[kind]


@pytest.fixture(params=list(KINDS))
def embedder_class(request: pytest.FixtureRequest) -> type[LazyMiniLM[Any]]:
    """Each embedder class, for tests that need no model."""
    return KINDS[request.param][0]
