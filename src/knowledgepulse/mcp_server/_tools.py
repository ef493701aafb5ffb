"""The tools: their arguments (pydantic models, so the schema and the checks are one thing),
what each tells the model about when to call it, and the checking of a call's arguments.

A wrong argument is answered with a message that names it (``limit: expected an integer, got
'x'``); an argument no tool takes is refused by name too, rather than silently ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .._schema import Visibility
from ..api_models import Preference
from ..kb._recall import MAX_LIMIT, MAX_QUERY_CHARS
from ._memory import ToolProblem

__all__ = ["TOOLS", "ToolSpec", "arguments_of"]

Query = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_QUERY_CHARS,
        description="The task you are about to do, in a sentence or two (its objective).",
    ),
]
TraceId = Annotated[
    str, Field(min_length=1, max_length=1000, description="A trace id (kp:trace:...).")
]


class _Arguments(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class SearchTracesArguments(_Arguments):
    query: Query
    domain: str | None = Field(
        default=None, description="Only traces of this task domain (metadata.task_domain)."
    )
    success_only: bool = Field(default=True, description="Only runs that succeeded.")
    min_value: float | None = Field(
        default=None, ge=0.0, le=1.0, description="Only traces whose value is at least this."
    )
    prefer: Preference = Field(
        default="relevant",
        description="relevant: by your task alone; successful: successful, high-value "
        "attempts first among the traces found (use with success_only false).",
    )
    limit: int = Field(default=5, ge=1, le=MAX_LIMIT, description="How many traces.")


class GetTraceArguments(_Arguments):
    id: TraceId
    detail: Literal["summary", "full"] = Field(
        default="summary",
        description="summary: objective, outcome and compact steps; full: the stored trace "
        "with its score record.",
    )


class ContributeTraceArguments(_Arguments):
    trace: dict[str, Any] = Field(
        description="A ReasoningTrace (JSON-LD, @type ReasoningTrace): your run's task, steps "
        "and outcome."
    )
    visibility: Visibility | None = Field(
        default=None,
        description="Who may see it: private (this key), org (its org), network (every key). "
        "Default: the trace's metadata.visibility.",
    )


class SearchArguments(_Arguments):
    query: Query


class FetchArguments(_Arguments):
    id: TraceId


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    arguments: type[_Arguments]
    read_only: bool = True

    def input_schema(self) -> dict[str, Any]:
        schema = self.arguments.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        return schema


TOOLS: dict[str, ToolSpec] = {
    spec.name: spec
    for spec in (
        ToolSpec(
            "search_traces",
            "Recall similar past runs",
            "Call this BEFORE starting a task: it finds how agents solved the most similar "
            "tasks before (the stored traces whose task is nearest to your task description, "
            "by meaning and by its words), each with its similarity, value, objective, "
            "outcome and its steps rendered compactly, plus an 'examples' block ready to use "
            "as worked examples. Successful runs only unless success_only is false.",
            SearchTracesArguments,
        ),
        ToolSpec(
            "get_trace",
            "Read one stored trace",
            "Call this when a search hit looks useful and you need more of it: detail "
            "'summary' gives its objective, outcome and compact steps; 'full' the whole stored "
            "trace and its score record.",
            GetTraceArguments,
        ),
        ToolSpec(
            "contribute_trace",
            "Contribute your run",
            "Call this AFTER finishing a task, with your run as a ReasoningTrace: the server "
            "redacts and scores it, stores it when its value passes the gate, and answers the "
            "score, whether it passed, whether it is stored, and duplicate_of when it is a "
            "copy of a trace stored already. Needs a key that may contribute.",
            ContributeTraceArguments,
            read_only=False,
        ),
        ToolSpec(
            "search",
            "Search the knowledge base",
            "Call this to find stored agent runs for a task description: results with id, "
            "title and url; then call fetch with an id to read one. (The search ChatGPT "
            "connectors use; search_traces gives richer hits.)",
            SearchArguments,
        ),
        ToolSpec(
            "fetch",
            "Fetch a stored trace",
            "Call this with an id that search returned to read that stored run: its task, "
            "steps and outcome.",
            FetchArguments,
        ),
    )
}


def arguments_of(spec: ToolSpec, arguments: Mapping[str, Any] | None) -> Any:
    """The call's arguments checked against the tool's model, or :class:`ToolProblem` naming
    the first argument that is wrong (unknown, missing, of the wrong type, out of range)."""
    try:
        return spec.arguments.model_validate(dict(arguments or {}))
    except ValidationError as exc:
        raise ToolProblem(_describe(spec, exc)) from None


def _describe(spec: ToolSpec, exc: ValidationError) -> str:
    problems = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or "arguments"
        if error["type"] == "extra_forbidden":
            takes = ", ".join(spec.arguments.model_fields)
            problems.append(f"{where}: unknown argument; {spec.name} takes {takes}")
        elif error["type"] == "missing":
            problems.append(f"{where}: required")
        else:
            got = error.get("input")
            if isinstance(got, (dict, list)):
                shown = "a list" if isinstance(got, list) else "an object"
            elif isinstance(got, str) and len(got) > 60:
                shown = f"a string of {len(got):,} characters"
            else:
                shown = repr(got)
            problems.append(f"{where}: {error['msg']} (got {shown})")
    return "; ".join(problems)
