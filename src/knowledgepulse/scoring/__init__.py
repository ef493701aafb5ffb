"""Value scoring: the :class:`Scorer` (score, score_many, iter_scores), the formulas of the
four dimensions and the rules, domain profiles, order-free curation of near-duplicates, the
score run (:class:`ScoringEngine`, :func:`score_unit`, :func:`iter_scored_units`,
:func:`accepted_trace`) and scoring on worker processes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_attributes

if TYPE_CHECKING:
    from ._curation import (
        CurationResult as CurationResult,
    )
    from ._curation import (
        Duplicate as Duplicate,
    )
    from ._curation import (
        DuplicateGroup as DuplicateGroup,
    )
    from ._curation import (
        curate as curate,
    )
    from ._formulas import (
        TraceFacts as TraceFacts,
    )
    from ._formulas import (
        compose as compose,
    )
    from ._profiles import (
        BUILTIN_PROFILES as BUILTIN_PROFILES,
    )
    from ._profiles import (
        DomainProfile as DomainProfile,
    )
    from ._profiles import (
        ProfileRegistry as ProfileRegistry,
    )
    from ._profiles import (
        get_profile as get_profile,
    )
    from ._profiles import (
        load_profiles as load_profiles,
    )
    from ._profiles import (
        register_profile as register_profile,
    )
    from ._run import (
        ScoredTrace as ScoredTrace,
    )
    from ._run import (
        ScoredUnit as ScoredUnit,
    )
    from ._run import (
        ScoringEngine as ScoringEngine,
    )
    from ._run import (
        accepted_trace as accepted_trace,
    )
    from ._run import (
        check_scoring_engine as check_scoring_engine,
    )
    from ._run import (
        iter_scored_units as iter_scored_units,
    )
    from ._run import (
        rejection_entry as rejection_entry,
    )
    from ._run import (
        remember_for as remember_for,
    )
    from ._run import (
        score_unit as score_unit,
    )
    from ._run import (
        scored_trace as scored_trace,
    )
    from ._scorer import (
        Scorer as Scorer,
    )
    from ._scorer import (
        ValueScore as ValueScore,
    )
    from ._scorer import (
        default_scorer as default_scorer,
    )
    from ._scorer import (
        evaluate_value as evaluate_value,
    )
    from ._scorer import (
        evaluate_value_async as evaluate_value_async,
    )
    from ._scorer import (
        reset_default_scorer as reset_default_scorer,
    )

# Each public name and its module; __all__ derives from it. Names load on first use.
_LAZY: dict[str, str] = {
    **dict.fromkeys(
        [
            "Scorer",
            "ValueScore",
            "default_scorer",
            "evaluate_value",
            "evaluate_value_async",
            "reset_default_scorer",
        ],
        "._scorer",
    ),
    **dict.fromkeys(
        [
            "BUILTIN_PROFILES",
            "DomainProfile",
            "ProfileRegistry",
            "get_profile",
            "load_profiles",
            "register_profile",
        ],
        "._profiles",
    ),
    **dict.fromkeys(["CurationResult", "Duplicate", "DuplicateGroup", "curate"], "._curation"),
    **dict.fromkeys(["TraceFacts", "compose"], "._formulas"),
    **dict.fromkeys(
        [
            "ScoredTrace",
            "ScoredUnit",
            "ScoringEngine",
            "accepted_trace",
            "check_scoring_engine",
            "iter_scored_units",
            "rejection_entry",
            "remember_for",
            "score_unit",
            "scored_trace",
        ],
        "._run",
    ),
}

__all__ = sorted(_LAZY)

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY, __all__)
