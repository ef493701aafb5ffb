"""Novelty memory: the protocol a scorer remembers traces through (:class:`NoveltyMemory`),
what it answers (:class:`Nearest`), and the in-process :class:`VectorCache`. A persistent
knowledge base (:mod:`knowledgepulse.kb`) implements the same protocol."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_attributes

if TYPE_CHECKING:
    from ._cache import (
        Admit as Admit,
    )
    from ._cache import (
        Nearest as Nearest,
    )
    from ._cache import (
        NoveltyMemory as NoveltyMemory,
    )
    from ._cache import (
        VectorCache as VectorCache,
    )
    from ._cache import (
        exact_rows as exact_rows,
    )

# Each public name and its module; __all__ derives from it. Names load on first use.
_LAZY: dict[str, str] = {
    **dict.fromkeys(["Admit", "Nearest", "NoveltyMemory", "VectorCache", "exact_rows"], "._cache"),
}

__all__ = sorted(_LAZY)

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY, __all__)
