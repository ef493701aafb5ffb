"""knowledgepulse: keep the agent traces worth keeping, and grade how well agents did.

- :class:`ReasoningTrace` — the trace schema; invalid input raises :class:`TraceValidationError`.
- :func:`evaluate_value` / :class:`Scorer` — the value score with its breakdown and explanation.
- :class:`NoveltyMemory` — what a scorer remembers traces through; :class:`VectorCache` the
  in-process one. :mod:`knowledgepulse.embedding` — the embedders, :class:`Embedder` (the
  protocol) and :func:`select_embedder` (which one to use).
- :mod:`knowledgepulse.records` — :class:`ScoreRecord` and :class:`EvalRecord`, one per output line.
- :mod:`knowledgepulse.rubrics` — binary weighted evaluation of task completion.
- :mod:`knowledgepulse.compare` — two runs compared: where two traces parted and which
  criteria flipped; two evaluations case by case (``kp diff``).
- :mod:`knowledgepulse.importers` — OpenAI, Anthropic, OpenTelemetry, LangSmith and ATIF logs.
- :mod:`knowledgepulse.reporting` — summaries and the HTML report.
- :func:`capture` / :func:`captured` — record an agent's ``openai``/``anthropic`` calls as a
  trace, score it and share it when it passes (:class:`CapturedRun`).
- :func:`validate_files`, :func:`convert_files`, :func:`redact_files`, :func:`evaluate_files`,
  :func:`score_files`, :func:`curate_files` — ``kp validate``, ``kp import``, ``kp redact``,
  ``kp eval``, ``kp score`` and ``kp curate`` as library verbs, each returning a :class:`RunReport`
  (counts, rejections with file/line/field, summary, timings) that renders itself.
- :func:`recall` — the stored traces most like a task, as worked examples for a prompt
  (:class:`Recall`); :mod:`knowledgepulse.mcp_server` serves them to agents over MCP.

Every error raised on purpose is a :class:`KnowledgePulseError`; a missing optional extra is a
:class:`MissingDependencyError` carrying its pip command.

Importing the package is quick: each name loads its module on first use (the schema models,
numpy, the embedding runtime).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._errors import KnowledgePulseError as KnowledgePulseError
from ._errors import MissingDependencyError as MissingDependencyError
from ._lazy import lazy_attributes

if TYPE_CHECKING:
    from ._schema import (
        KnowledgeGraphDelta as KnowledgeGraphDelta,
    )
    from ._schema import (
        Outcome as Outcome,
    )
    from ._schema import (
        ReasoningTrace as ReasoningTrace,
    )
    from ._schema import (
        Step as Step,
    )
    from ._schema import (
        Task as Task,
    )
    from ._schema import (
        Tool as Tool,
    )
    from ._schema import (
        TraceMetadata as TraceMetadata,
    )
    from ._schema import (
        TraceValidationError as TraceValidationError,
    )
    from ._schema import (
        ValidationProblem as ValidationProblem,
    )
    from ._schema import (
        parse_trace as parse_trace,
    )
    from .embedding import (
        Embedder as Embedder,
    )
    from .embedding import (
        EmbedderUnavailable as EmbedderUnavailable,
    )
    from .embedding import (
        MiniLMEmbedder as MiniLMEmbedder,
    )
    from .embedding import (
        check_embedder as check_embedder,
    )
    from .embedding import (
        select_embedder as select_embedder,
    )
    from .integrations._capture import (
        CapturedRun as CapturedRun,
    )
    from .integrations._capture import (
        capture as capture,
    )
    from .integrations._capture import (
        captured as captured,
    )
    from .kb._recall import (
        Recall as Recall,
    )
    from .kb._recall import (
        RecalledTrace as RecalledTrace,
    )
    from .kb._recall import (
        recall as recall,
    )
    from .memory._cache import (
        Nearest as Nearest,
    )
    from .memory._cache import (
        NoveltyMemory as NoveltyMemory,
    )
    from .memory._cache import (
        VectorCache as VectorCache,
    )
    from .records import (
        EvalRecord as EvalRecord,
    )
    from .records import (
        ScoreRecord as ScoreRecord,
    )
    from .runs import (
        RejectedRecord as RejectedRecord,
    )
    from .runs import (
        RunReport as RunReport,
    )
    from .runs import (
        convert_files as convert_files,
    )
    from .runs import (
        curate_files as curate_files,
    )
    from .runs import (
        evaluate_files as evaluate_files,
    )
    from .runs import (
        redact_files as redact_files,
    )
    from .runs import (
        score_files as score_files,
    )
    from .runs import (
        validate_files as validate_files,
    )
    from .scoring._profiles import (
        BUILTIN_PROFILES as BUILTIN_PROFILES,
    )
    from .scoring._profiles import (
        DomainProfile as DomainProfile,
    )
    from .scoring._profiles import (
        ProfileRegistry as ProfileRegistry,
    )
    from .scoring._profiles import (
        get_profile as get_profile,
    )
    from .scoring._profiles import (
        load_profiles as load_profiles,
    )
    from .scoring._profiles import (
        register_profile as register_profile,
    )
    from .scoring._scorer import (
        Scorer as Scorer,
    )
    from .scoring._scorer import (
        ValueScore as ValueScore,
    )
    from .scoring._scorer import (
        default_scorer as default_scorer,
    )
    from .scoring._scorer import (
        evaluate_value as evaluate_value,
    )
    from .scoring._scorer import (
        evaluate_value_async as evaluate_value_async,
    )
    from .scoring._scorer import (
        reset_default_scorer as reset_default_scorer,
    )

__version__ = "0.1.0"

# The one export table: each public name and the module that defines it. Every name loads with
# its module on first use, so `import knowledgepulse` (and `kp --help`) builds no pydantic
# model and imports neither numpy nor the embedder runtime. __all__ derives from it.
_LAZY: dict[str, str] = {
    **dict.fromkeys(
        [
            "BUILTIN_PROFILES",
            "DomainProfile",
            "ProfileRegistry",
            "get_profile",
            "load_profiles",
            "register_profile",
        ],
        ".scoring._profiles",
    ),
    **dict.fromkeys(
        [
            "KnowledgeGraphDelta",
            "Outcome",
            "ReasoningTrace",
            "Step",
            "Task",
            "Tool",
            "TraceMetadata",
            "TraceValidationError",
            "ValidationProblem",
            "parse_trace",
        ],
        "._schema",
    ),
    **dict.fromkeys(
        [
            "Scorer",
            "ValueScore",
            "default_scorer",
            "evaluate_value",
            "evaluate_value_async",
            "reset_default_scorer",
        ],
        ".scoring._scorer",
    ),
    **dict.fromkeys(["Nearest", "NoveltyMemory", "VectorCache"], ".memory._cache"),
    **dict.fromkeys(
        ["Embedder", "EmbedderUnavailable", "MiniLMEmbedder", "check_embedder", "select_embedder"],
        ".embedding",
    ),
    **dict.fromkeys(["EvalRecord", "ScoreRecord"], ".records"),
    **dict.fromkeys(["CapturedRun", "capture", "captured"], ".integrations._capture"),
    **dict.fromkeys(["Recall", "RecalledTrace", "recall"], ".kb._recall"),
    **dict.fromkeys(
        [
            "RejectedRecord",
            "RunReport",
            "convert_files",
            "curate_files",
            "evaluate_files",
            "redact_files",
            "score_files",
            "validate_files",
        ],
        ".runs",
    ),
}

__all__ = sorted([*_LAZY, "KnowledgePulseError", "MissingDependencyError", "__version__"])

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY, __all__)
