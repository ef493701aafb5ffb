"""What ``kp score`` and ``kp curate`` need for ``--engine ray``: options and the Ray parts
(:class:`RayCuration`, the curator ``kp curate`` hands :func:`~knowledgepulse.curate_files`)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from .._schema import ReasoningTrace
    from ..embedding import Embedder
    from ..kb import KnowledgeBase
    from ..scoring._curation import CurationResult
    from ..scoring._profiles import ProfileRegistry
    from ..scoring._scorer import Scorer
    from ._scoring import RayScorer

F = TypeVar("F", bound=Callable[..., Any])


def engine_options(function: F) -> F:
    """``--engine local|ray``, ``--address ADDR`` and ``--workers N``."""
    function = click.option(
        "--workers",
        type=click.IntRange(min=0),
        metavar="N",
        help="Worker processes; never changes the output. With --engine ray: embedding "
        "workers (default: one per CPU of the cluster). Locally, kp score --no-embed: "
        "processes that validate and score (0 or 1: this process; default: one per CPU for "
        "inputs of 32 MiB of JSON or more, unless the CPUs are busy); with an embedder the "
        "traces are embedded in this process, whose embedder uses every core.",
    )(function)
    function = click.option(
        "--address",
        metavar="ADDR",
        help="With --engine ray: the cluster to join (HOST:6379 from `ray start --head`, or "
        "auto); default: start a local Ray with this machine's cores.",
    )(function)
    return click.option(
        "--engine",
        type=click.Choice(["local", "ray"]),
        default="local",
        show_default=True,
        help="ray: read, embed and score in parallel on Ray (the ray extra); same output.",
    )(function)


def check_engine(
    engine: str, address: str | None, workers: int | None, *, local_workers: bool = False
) -> None:
    """Refuse --address without --engine ray, and --workers too unless the command has
    ``local_workers`` (a usage error); Ray needs at least one worker."""
    if engine != "ray" and (address is not None or (workers is not None and not local_workers)):
        raise click.UsageError("--address and --workers go with --engine ray")
    if engine == "ray" and workers == 0:
        raise click.UsageError("--workers with --engine ray: at least 1")


def _connect(stack: ExitStack, address: str | None) -> Any:
    from ._cluster import connect, import_ray

    started_here = not import_ray().is_initialized()
    ray = connect(address)
    if started_here:  # a Ray this process already used is left running
        stack.callback(ray.shutdown)
    return ray


def ray_scorer(
    stack: ExitStack,
    local: Scorer,
    embedder: Any,
    memory: Any,
    address: str | None,
    workers: int | None,
) -> RayScorer:
    """A :class:`RayScorer` with the settings of the local scorer ``local``, closed with ``stack``."""
    from ._scoring import RayScorer
    from ._workers import factory_for

    _connect(stack, address)
    scorer = RayScorer(
        factory_for(embedder) if embedder is not None else None,
        workers=workers,
        profiles=local.profiles,
        batch_size=local.batch_size,
        memory=memory,
        remember=local.remember,
        threshold=local.threshold,
        name=getattr(embedder, "name", "ray"),
        novelty=local.novelty,
    )
    stack.callback(scorer.close)
    if embedder is not None:
        scorer.pool  # noqa: B018  (start the workers now: a worker's load error comes first)
    return scorer


def ray_reader(files: Any, source_format: str, options: Any) -> Any:
    """:func:`read_conversions_parallel`, for ``read_conversions(reader=...)``."""
    from ._reading import read_conversions_parallel

    return read_conversions_parallel(files, source_format, options)


class RayCuration:
    """``kp curate --engine ray``: a :class:`~knowledgepulse.runs.RayCurator` that curates the
    pile on the cluster at ``address`` (None: a local Ray) with ``workers`` workers (None: one
    per CPU of the cluster)."""

    def __init__(self, address: str | None, workers: int | None) -> None:
        self.address, self.workers = address, workers

    def copies(
        self,
        stack: ExitStack,
        pile: list[ReasoningTrace],
        *,
        similarity: float,
        kb: KnowledgeBase | None,
        profiles: ProfileRegistry | None,
    ) -> CurationResult:
        """:func:`curate_copies_on_ray` on the cluster (connected, and stopped with ``stack``)."""
        from ._cluster import cluster_cpus
        from ._curation import curate_copies_on_ray

        _connect(stack, self.address)
        return curate_copies_on_ray(
            pile,
            workers=self.workers or cluster_cpus(),
            similarity=similarity,
            kb=kb,
            profiles=profiles,
        )

    def embedding(
        self,
        stack: ExitStack,
        pile: list[ReasoningTrace],
        embedder: Embedder,
        *,
        similarity: float,
        kb: KnowledgeBase | None,
        profiles: ProfileRegistry | None,
        first_pass: Embedder | None,
        candidate_similarity: float | None,
    ) -> CurationResult:
        """:func:`curate_on_ray` on a pool started for it (stopped with ``stack``)."""
        from ._cluster import cluster_cpus
        from ._curation import curate_on_ray
        from ._workers import EmbedPool, factory_for

        _connect(stack, self.address)
        pool = EmbedPool(factory_for(embedder), self.workers or cluster_cpus(), 1.0)
        stack.callback(pool.shutdown)
        return curate_on_ray(
            pile,
            pool=pool,
            name=embedder.name,
            similarity=similarity,
            kb=kb,
            profiles=profiles,
            first_pass=first_pass,
            candidate_similarity=candidate_similarity,
        )
