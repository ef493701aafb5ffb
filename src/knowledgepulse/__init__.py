"""knowledgepulse: keep the agent traces worth keeping, and grade how well agents did.

- :class:`ReasoningTrace` — the trace schema; invalid input raises :class:`TraceValidationError`.
- :func:`evaluate_value` / :class:`Scorer` — the value score with its breakdown and explanation.
- :class:`NoveltyMemory` — what a scorer remembers traces through; :class:`VectorCache` the
  in-process one. :mod:`knowledgepulse.embedding` — the embedders, :class:`Embedder` (the
  protocol) and :func:`select_embedder` (which one to use).
- :mod:`knowledgepulse.records` — :class:`ScoreRecord` and :class:`EvalRecord`, one per output line.
- :mod:`knowledgepulse.rubrics` — binary weighted evaluation of task completion.
- :mod:`knowledgepulse.importers` — OpenAI, Anthropic, OpenTelemetry, LangSmith and ATIF logs.
- :mod:`knowledgepulse.reporting` — summaries and the HTML report.
- :func:`capture` / :func:`captured` — record an agent's ``openai``/``anthropic`` calls as a
  trace, score it and share it when it passes (:class:`CapturedRun`).
- :func:`recall` — the stored traces most like a task, as worked examples for a prompt
  (:class:`Recall`); :mod:`knowledgepulse.mcp_server` serves them to agents over MCP.

Every error raised on purpose is a :class:`KnowledgePulseError`; a missing optional extra is a
:class:`MissingDependencyError` carrying its pip command.

Importing the package is quick: each name loads its module on first use (the schema models,
numpy, the embedding runtime).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._errors import KnowledgePulseError, MissingDependencyError
from ._lazy import lazy_attributes

if TYPE_CHECKING:
    from ._capture import CapturedRun, capture, captured
    from ._memory import Nearest, NoveltyMemory, VectorCache
    from ._profiles import (
        BUILTIN_PROFILES,
        DomainProfile,
        ProfileRegistry,
        get_profile,
        load_profiles,
        register_profile,
    )
    from ._recall import Recall, RecalledTrace, recall
    from ._schema import (
        KnowledgeGraphDelta,
        Outcome,
        ReasoningTrace,
        Step,
        Task,
        Tool,
        TraceMetadata,
        TraceValidationError,
        ValidationProblem,
        parse_trace,
    )
    from ._scoring import (
        Scorer,
        ValueScore,
        default_scorer,
        evaluate_value,
        evaluate_value_async,
        reset_default_scorer,
    )
    from .embedding import (
        Embedder,
        EmbedderUnavailable,
        MiniLMEmbedder,
        check_embedder,
        select_embedder,
    )
    from .records import EvalRecord, ScoreRecord

__version__ = "0.1.0"

__all__ = [
    "BUILTIN_PROFILES",
    "CapturedRun",
    "DomainProfile",
    "Embedder",
    "EmbedderUnavailable",
    "EvalRecord",
    "KnowledgeGraphDelta",
    "KnowledgePulseError",
    "MiniLMEmbedder",
    "MissingDependencyError",
    "Nearest",
    "NoveltyMemory",
    "Outcome",
    "ProfileRegistry",
    "ReasoningTrace",
    "Recall",
    "RecalledTrace",
    "ScoreRecord",
    "Scorer",
    "Step",
    "Task",
    "Tool",
    "TraceMetadata",
    "TraceValidationError",
    "ValidationProblem",
    "ValueScore",
    "VectorCache",
    "__version__",
    "capture",
    "captured",
    "check_embedder",
    "default_scorer",
    "evaluate_value",
    "evaluate_value_async",
    "get_profile",
    "load_profiles",
    "parse_trace",
    "recall",
    "register_profile",
    "reset_default_scorer",
    "select_embedder",
]

# Every name loads with its module on first use: `import knowledgepulse` (and `kp --help`)
# builds no pydantic model and imports neither numpy nor the embedder runtime.
_LAZY = {
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
        "._scoring",
    ),
    **dict.fromkeys(["VectorCache", "NoveltyMemory", "Nearest"], "._memory"),
    **dict.fromkeys(
        ["Embedder", "EmbedderUnavailable", "MiniLMEmbedder", "check_embedder", "select_embedder"],
        ".embedding",
    ),
    **dict.fromkeys(["ScoreRecord", "EvalRecord"], ".records"),
    **dict.fromkeys(["capture", "captured", "CapturedRun"], "._capture"),
    **dict.fromkeys(["recall", "Recall", "RecalledTrace"], "._recall"),
}


__getattr__, __dir__ = lazy_attributes(__name__, _LAZY, __all__)
