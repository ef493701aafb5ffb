"""Hand-made traces for the behaviour checks: steps written as short calls."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from _helpers import make_trace
from knowledgepulse import ReasoningTrace


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "tool_call", "tool": {"name": name}, "input": arguments}


def result(text: str = "ok", *, error: bool = False, tool: str | None = None) -> dict[str, Any]:
    step: dict[str, Any] = {"type": "observation", "content": text}
    if error:
        step["is_error"] = True
    if tool is not None:
        step["tool"] = {"name": tool}
    return step


def user(text: str) -> dict[str, Any]:
    return {"type": "observation", "content": text, "source": "user"}


def say(text: str) -> dict[str, Any]:
    return {"type": "thought", "content": text}


def trace(
    *steps: Mapping[str, Any],
    ground_truth: Any = None,
    tools: Any = None,
    summary: str = "",
    imported: bool = True,
) -> ReasoningTrace:
    """A trace of ``steps``; ``ground_truth`` and ``tools`` go where the importers put them
    (``metadata.ground_truth``, ``metadata.kp_import.tool_definitions``)."""
    data = make_trace([dict(step) for step in steps], summary=summary)
    metadata = data["metadata"]
    if imported:
        metadata["kp_import"] = {"format": "openai", "defaulted": []}
    if ground_truth is not None:
        metadata["ground_truth"] = ground_truth
    if tools is not None:
        metadata.setdefault("kp_import", {})["tool_definitions"] = tools
    return ReasoningTrace.model_validate(data)


def function(name: str, parameters: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """An OpenAI-style tool definition."""
    body: dict[str, Any] = {"name": name}
    if parameters is not None:
        body["parameters"] = dict(parameters)
    return {"type": "function", "function": body}
