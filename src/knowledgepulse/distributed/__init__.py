"""Scoring and curation past one machine, on Ray (the ``ray`` extra).

- :class:`RayScorer` — a scorer whose embedding runs on an actor pool (one model per actor)
  and whose novelty is computed chunk by chunk in parallel, exact: equal to a local
  :class:`~knowledgepulse.Scorer`.
- :func:`score_dataset` — a Ray Dataset of JSON records in, a Dataset of score lines and
  rejections out, in input order.
- :func:`read_conversions_parallel` — files read and validated by parallel Ray Data tasks.
- :func:`curate_on_ray` — curation with the embedding on the pool.
- :func:`connect` — join a cluster (``address``) or start a local Ray.
- :class:`EmbedPool`, :func:`minilm_factory`, :func:`factory_for` — the embedding actors and
  what they load.

Importing this package does not import ``ray``; the functions do, and raise
:class:`~knowledgepulse.MissingDependencyError` when it is not installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_attributes

if TYPE_CHECKING:
    from ._cluster import connect, import_ray
    from ._curation import curate_on_ray
    from ._dataset import score_dataset
    from ._reading import conversions_of_dataset, read_conversions_parallel
    from ._scoring import RayScorer
    from ._workers import (
        EmbedderFactory,
        EmbedPool,
        PrecomputedEmbedder,
        factory_for,
        minilm_factory,
    )

# Each name loads with its module on first use: the kp commands import this package for their
# --engine options, and `kp --help` must not pay for the scorer, numpy and pydantic.
_LAZY = {
    "connect": "._cluster",
    "import_ray": "._cluster",
    "curate_on_ray": "._curation",
    "score_dataset": "._dataset",
    "conversions_of_dataset": "._reading",
    "read_conversions_parallel": "._reading",
    "RayScorer": "._scoring",
    "EmbedderFactory": "._workers",
    "EmbedPool": "._workers",
    "PrecomputedEmbedder": "._workers",
    "factory_for": "._workers",
    "minilm_factory": "._workers",
}


__all__ = [
    "EmbedPool",
    "EmbedderFactory",
    "PrecomputedEmbedder",
    "RayScorer",
    "connect",
    "conversions_of_dataset",
    "curate_on_ray",
    "factory_for",
    "import_ray",
    "minilm_factory",
    "read_conversions_parallel",
    "score_dataset",
]

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY, __all__)
