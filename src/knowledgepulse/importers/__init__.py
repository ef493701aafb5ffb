"""Import agent logs as ReasoningTraces: OpenAI, Anthropic, Gemini, Bedrock, OpenTelemetry
(with the Vercel AI SDK), OpenAI Agents SDK, Langfuse, LangSmith (run trees, run lists and
``{post, patch}`` ingestion batches) and ATIF, and the agent
harnesses' own logs: Claude Code, Codex CLI, Inspect AI, SWE-agent, mini-SWE-agent, OpenHands,
tau2-bench, Harbor's traces export and Anthropic Managed Agents session events (one module
each; see ``docs/importers.md``).

One module per format, one public function each (:func:`from_openai`, :func:`from_anthropic`,
:func:`from_gemini`, :func:`from_bedrock`, :func:`from_otel`, :func:`from_openai_agents`,
:func:`from_langfuse`, :func:`from_langsmith`, :func:`from_atif`), each returning a list of
traces. :func:`read_traces` converts a stream of input records unit by unit, and
:func:`read_traces_from_paths` the records of files and directories (the ``kp`` commands use
it; it reads a Harbor job directory as one trace per trial); :func:`convert` turns one loaded JSON record of a named format into traces and
:func:`detect_format` guesses the format. :class:`ImportOptions` are values that override the
source in every trace. The field mapping, the ``error_recovery`` rule, the options and what is
kept and dropped are documented in ``docs/importers.md``.
"""

from __future__ import annotations

from ._error_text import looks_like_error
from ._options import ImportOptions
from ._paths import read_traces_from_paths
from ._registry import (
    FORMATS,
    Importer,
    convert,
    detect_format,
    format_help,
    format_names,
    trace_from_record,
)
from ._stream import Conversion, read_traces
from ._values import ConversionError
from .anthropic import from_anthropic
from .atif import from_atif
from .bedrock import from_bedrock
from .claude_code import from_claude_code
from .codex import from_codex
from .gemini import from_gemini
from .harbor_traces import from_harbor_traces
from .inspect_ai import from_inspect
from .langfuse import from_langfuse
from .langsmith import from_langsmith
from .managed_agents import from_managed_agents
from .openai import from_openai
from .openai_agents import from_openai_agents
from .openhands import from_openhands
from .otel import from_otel
from .swe_agent import from_mini_swe_agent, from_swe_agent
from .tau2 import from_tau2
from .who_and_when import from_who_and_when

__all__ = [
    "FORMATS",
    "Conversion",
    "ConversionError",
    "ImportOptions",
    "Importer",
    "convert",
    "detect_format",
    "format_help",
    "format_names",
    "from_anthropic",
    "from_atif",
    "from_bedrock",
    "from_claude_code",
    "from_codex",
    "from_gemini",
    "from_harbor_traces",
    "from_inspect",
    "from_langfuse",
    "from_langsmith",
    "from_managed_agents",
    "from_mini_swe_agent",
    "from_openai",
    "from_openai_agents",
    "from_openhands",
    "from_otel",
    "from_swe_agent",
    "from_tau2",
    "from_who_and_when",
    "looks_like_error",
    "read_traces",
    "read_traces_from_paths",
    "trace_from_record",
]
