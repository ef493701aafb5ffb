"""The agent-harness formats: their converters, their detection, and which of them are runs
written as many records (a session's lines, a trajectory's events).

Kept apart from :mod:`._registry` so the formats can be added to it in a few lines.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from knowledgepulse._schema import ReasoningTrace

from ._entries import Entry
from ._options import ImportOptions
from .claude_code import claude_code_traces, from_claude_code, is_claude_code_entry
from .codex import codex_traces, from_codex, is_codex_line
from .harbor_traces import from_harbor_traces, is_harbor_trace_row
from .inspect_ai import from_inspect, inspect_runs, is_inspect_log
from .managed_agents import (
    from_managed_agents,
    is_managed_agents_event,
    is_managed_agents_page,
    managed_agents_traces,
)
from .openhands import from_openhands, is_openhands_event, is_openhands_output, openhands_traces
from .swe_agent import from_mini_swe_agent, from_swe_agent, is_mini_swe_agent, is_swe_agent
from .tau2 import from_tau2, is_tau2_results, tau2_runs

__all__ = [
    "FILE_FORMATS",
    "HARNESS_CONVERTERS",
    "HARNESS_DESCRIPTIONS",
    "RUN_FORMATS",
    "detect_harness_format",
    "is_run_part",
]

Converter = Callable[[Any, "ImportOptions | None"], list[ReasoningTrace]]

#: name → (description, converter of one record or a list of records).
HARNESS_DESCRIPTIONS: dict[str, str] = {
    "claude-code": "Claude Code session files (~/.claude/projects/*/*.jsonl; one trace per session)",
    "codex": "Codex CLI rollouts (~/.codex/sessions/**/rollout-*.jsonl; one trace per file)",
    "inspect": "Inspect AI logs (.eval archives and .json; one trace per sample and epoch)",
    "swe-agent": "SWE-agent trajectories (.traj)",
    "mini-swe-agent": "mini-SWE-agent trajectories (.traj.json)",
    "openhands": "OpenHands trajectories (event lists) and evaluation output lines",
    "tau2": "tau2-bench results (one trace per simulation)",
    "harbor-traces": "Harbor 'traces export' rows (one trace per row)",
    "anthropic-managed-agents": (
        "Anthropic Managed Agents session events (GET /v1/sessions/{id}/events; one trace per file)"
    ),
}
HARNESS_CONVERTERS: dict[str, Converter] = {
    "claude-code": from_claude_code,
    "codex": from_codex,
    "inspect": from_inspect,
    "swe-agent": from_swe_agent,
    "mini-swe-agent": from_mini_swe_agent,
    "openhands": from_openhands,
    "tau2": from_tau2,
    "harbor-traces": from_harbor_traces,
    "anthropic-managed-agents": from_managed_agents,
}

#: Formats whose records of one source file are one run: name → the converter of a unit's
#: entries (each record with the label its problems start with).
FILE_FORMATS: dict[str, Callable[[list[Entry], ImportOptions], list[ReasoningTrace]]] = {
    "claude-code": claude_code_traces,
    "codex": codex_traces,
    "openhands": openhands_traces,
    "anthropic-managed-agents": managed_agents_traces,
}


def is_run_part(name: str, record: Any) -> bool:
    """Whether a record of a :data:`FILE_FORMATS` format is a part of its file's run (a line,
    an event), not a run of its own (an OpenHands evaluation output line)."""
    return name in FILE_FORMATS and not (name == "openhands" and is_openhands_output(record))


#: Formats whose one record holds several runs: name → each run's data with its converter (a
#: run converts or is rejected on its own, and counts as one record).
RUN_FORMATS: dict[
    str, Callable[[Any, ImportOptions], list[tuple[Any, Callable[[], ReasoningTrace]]]]
] = {
    "inspect": inspect_runs,
    "tau2": tau2_runs,
}


def detect_harness_format(items: list[Any]) -> str | None:
    """The harness format ``items`` (a record, as a one-element list, or a list's elements)
    are in, or ``None``. Each rule asks for fields no other format writes together."""
    first = next((item for item in items if isinstance(item, Mapping)), None)
    if first is None:
        return None
    if is_claude_code_entry(first):
        return "claude-code"
    if is_codex_line(first):
        return "codex"
    if is_inspect_log(first):
        return "inspect"
    if is_tau2_results(first):
        return "tau2"
    if is_swe_agent(first):
        return "swe-agent"
    if is_mini_swe_agent(first) or (len(items) > 1 and is_mini_swe_agent(items)):
        return "mini-swe-agent"
    if is_openhands_event(first) or is_openhands_output(first):
        return "openhands"
    if is_harbor_trace_row(first):
        return "harbor-traces"
    # Events only: a recording of SDK calls ([method, event] pairs) is no session's log.
    if all(isinstance(item, Mapping) for item in items) and (
        is_managed_agents_event(first) or is_managed_agents_page(first)
    ):
        return "anthropic-managed-agents"
    return None
