"""The ReasoningTrace schema (SPEC §1): pydantic models and one validation error.

Every model keeps unknown fields (``extra="allow"``) so that a trace read and written back
loses nothing. Types are strict where a silent coercion would hide a bad record: a
``success`` of ``"yes"`` or a ``step_id`` of ``"3"`` is an error, not a guess.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    StrictBool,
    StrictInt,
    StringConstraints,
    ValidationError,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, core_schema

from ._errors import KnowledgePulseError

__all__ = [
    "CONTEXT_URLS",
    "STEP_TYPES",
    "Entity",
    "KnowledgeGraphDelta",
    "Outcome",
    "ReasoningTrace",
    "Relationship",
    "Step",
    "StepType",
    "Task",
    "Tool",
    "TraceMetadata",
    "TraceValidationError",
    "ValidationProblem",
    "Visibility",
    "parse_trace",
]

CONTEXT_URLS: tuple[str, ...] = (
    "https://openknowledgepulse.org/schema/v1",
    "https://knowledgepulse.dev/schema/v1",
)
StepType = Literal["thought", "tool_call", "observation", "error_recovery"]
STEP_TYPES: tuple[str, ...] = get_args(StepType)
#: Who may see a trace (``metadata.visibility``).
Visibility = Literal["private", "org", "network"]
NonEmptyStr = Annotated[str, StringConstraints(strict=True, min_length=1, pattern=r"\S")]
# strict: a number, never a string or a boolean ("0.95" and true are errors, not guesses).
UnitFloat = Annotated[float, Field(strict=True, ge=0.0, le=1.0, allow_inf_nan=False)]


# A number, or a string of one, would be read as seconds since 1970: 12 is not a date anyone
# meant. Matched with Python's re (its Unicode \d and \s), from the start of the text.
_NOT_NUMERIC = r"\A(?!\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$)"
_NOT_DATE_TIME = "input should be an ISO 8601 date-time string"


def _assume_utc(value: datetime) -> datetime:
    return value.replace(tzinfo=timezone.utc)


class _IsoDateTime:
    """``created_at``: an ISO 8601 string (or, from Python, a datetime); naive means UTC.

    Validated by pydantic-core alone: a string that is not a number, then parsed as a
    datetime; only a timestamp without a UTC offset calls back into Python, to become UTC.
    """

    @classmethod
    def __get_pydantic_core_schema__(
        cls, _source: Any, _handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        text = core_schema.str_schema(strict=True, pattern=_NOT_NUMERIC, regex_engine="python-re")
        given = core_schema.custom_error_schema(
            core_schema.json_or_python_schema(
                json_schema=text,
                python_schema=core_schema.union_schema(
                    [core_schema.is_instance_schema(datetime), text], mode="left_to_right"
                ),
            ),
            "date_time_text",
            custom_error_message=_NOT_DATE_TIME,
        )
        in_utc = core_schema.union_schema(
            [
                core_schema.datetime_schema(tz_constraint="aware"),
                core_schema.no_info_after_validator_function(
                    _assume_utc, core_schema.datetime_schema()
                ),
            ],
            mode="left_to_right",
        )
        return core_schema.chain_schema([given, core_schema.datetime_schema(), in_utc])

    @classmethod
    def __get_pydantic_json_schema__(
        cls, _schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return handler(core_schema.datetime_schema())


IsoDateTime = Annotated[datetime, _IsoDateTime]


class _Model(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
        validate_assignment=True,
        # Schemas are built on first use, not at import: keeps `import knowledgepulse` fast.
        defer_build=True,
    )


class Tool(_Model):
    """The tool a step used. ``mcp_server`` names the MCP server that provides it, if any."""

    name: NonEmptyStr
    mcp_server: str | None = None


class Step(_Model):
    """One step of a trace: a thought, a tool call, an observation or an error recovery."""

    step_id: Annotated[StrictInt, Field(ge=0)]
    type: StepType
    content: str | None = None
    tool: Tool | None = None
    input: dict[str, Any] | None = None
    output_summary: str | None = None
    latency_ms: Annotated[float, Field(strict=True, ge=0.0, allow_inf_nan=False)] | None = None


class TraceMetadata(_Model):
    created_at: IsoDateTime
    agent_id: str | None = None
    framework: str | None = None
    task_domain: NonEmptyStr
    success: StrictBool
    # Optional on input: the scorer fills it in (``kp score --accepted``).
    quality_score: UnitFloat | None = None
    visibility: Visibility
    privacy_level: Literal["aggregated", "federated", "private"]
    validated_by: list[str] | None = None


class Task(_Model):
    objective: NonEmptyStr
    input_schema: dict[str, Any] | None = None


class Outcome(_Model):
    result_summary: Annotated[str, StringConstraints(strict=True)]
    confidence: UnitFloat


class Entity(_Model):
    name: str
    type: str


class Relationship(_Model):
    fact: str
    valid_from: str | None = None


class KnowledgeGraphDelta(_Model):
    entities: list[Entity] = Field(default_factory=list)
    relationships: list[Relationship] = Field(default_factory=list)


class ReasoningTrace(_Model):
    """An agent's reasoning trace (JSON-LD). Build one with :meth:`model_validate`.

    ``@context`` and ``@type`` are exposed as ``context`` and ``type``; serialise with
    :meth:`to_dict` / :meth:`to_json`, which write the JSON-LD names back.
    """

    context: Literal[
        "https://openknowledgepulse.org/schema/v1", "https://knowledgepulse.dev/schema/v1"
    ] = Field(alias="@context")
    type: Literal["ReasoningTrace"] = Field(alias="@type")
    id: Annotated[str, StringConstraints(strict=True, pattern=r"^kp:trace:")]
    source_skill: str | None = None
    metadata: TraceMetadata
    task: Task
    steps: Annotated[list[Step], Field(min_length=1)]
    outcome: Outcome
    knowledge_graph_delta: KnowledgeGraphDelta | None = None

    @classmethod
    def model_validate(
        cls,
        obj: Any,
        *,
        strict: bool | None = None,
        from_attributes: bool | None = None,
        context: Any | None = None,
        **kwargs: Any,
    ) -> ReasoningTrace:
        """Validate ``obj``; raise :class:`TraceValidationError` listing every problem."""
        try:
            return super().model_validate(
                obj, strict=strict, from_attributes=from_attributes, context=context, **kwargs
            )
        except ValidationError as exc:
            raise TraceValidationError.from_pydantic(exc) from None

    @classmethod
    def model_validate_json(
        cls,
        json_data: str | bytes | bytearray,
        *,
        strict: bool | None = None,
        context: Any | None = None,
        **kwargs: Any,
    ) -> ReasoningTrace:
        """Parse and validate JSON text; raise :class:`TraceValidationError` on any problem."""
        try:
            return super().model_validate_json(json_data, strict=strict, context=context, **kwargs)
        except ValidationError as exc:
            raise TraceValidationError.from_pydantic(exc) from None

    def to_dict(self) -> dict[str, Any]:
        """The trace as JSON-ready data: JSON-LD names, unknown fields kept, unset fields left out."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, exclude_unset=True)

    # Derived facts the scorer and the rubric checks both use.
    @property
    def embedding_text(self) -> str:
        """The text whose embedding measures novelty (SPEC §2)."""
        return self.task.objective + " " + " ".join(step.content or "" for step in self.steps)

    @property
    def tool_names(self) -> list[str]:
        """Names of the tools used, in step order (repeats kept)."""
        return [step.tool.name for step in self.steps if step.tool is not None]


class ValidationProblem(BaseModel):
    """One problem found in a record: where (``path``) and what (``message``)."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class TraceValidationError(KnowledgePulseError, ValueError):
    """A record is not a valid ReasoningTrace. ``problems`` lists every offending field.

    The message names each field by its path, one problem per line, e.g.
    ``steps[2].type: expected one of 'thought', 'tool_call', 'observation', 'error_recovery' (got 'plan')``.
    ``source`` and ``line`` locate the record in a file when it was read from one.
    """

    def __init__(
        self,
        problems: Sequence[ValidationProblem],
        *,
        source: str | None = None,
        line: int | None = None,
    ) -> None:
        self.problems: list[ValidationProblem] = list(problems)
        self.source = source
        self.line = line
        super().__init__(self._render())

    def _render(self) -> str:
        where = ""
        if self.source is not None:
            where = f"{self.source}:{self.line}: " if self.line is not None else f"{self.source}: "
        count = len(self.problems)
        head = f"{where}invalid ReasoningTrace ({count} problem{'s' if count != 1 else ''})"
        return head + "".join(f"\n  {problem}" for problem in self.problems)

    def located(self, source: str, line: int | None) -> TraceValidationError:
        """The same error, located in ``source`` at ``line``."""
        return TraceValidationError(self.problems, source=source, line=line)

    @classmethod
    def from_pydantic(cls, exc: ValidationError) -> TraceValidationError:
        return cls([_problem_from_pydantic(error) for error in exc.errors(include_url=False)])


def format_path(location: Iterable[str | int]) -> str:
    """``("steps", 2, "type")`` -> ``steps[2].type``."""
    out = ""
    for part in location:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


_FIELD_ALIASES = {"context": "@context", "type": "@type"}


def _problem_from_pydantic(error: Mapping[str, Any]) -> ValidationProblem:
    location = list(error.get("loc", ()))
    # Pydantic reports aliased top-level fields by alias already; keep the JSON-LD names.
    if len(location) == 1 and location[0] in _FIELD_ALIASES and error["type"] != "missing":
        location = [_FIELD_ALIASES[str(location[0])]]
    path = format_path(location)
    kind = error["type"]
    given = error.get("input")
    ctx = error.get("ctx") or {}
    if kind == "missing":
        message = "required field is missing"
    elif kind == "literal_error":
        expected = ctx.get("expected", "")
        message = f"expected one of {expected.replace(' or ', ', ')} (got {_show(given)})"
    elif kind == "string_pattern_mismatch" and path == "id":
        message = f"must start with 'kp:trace:' (got {_show(given)})"
    elif kind in {"string_pattern_mismatch", "string_too_short"}:
        message = f"must be a non-empty string (got {_show(given)})"
    elif kind == "too_short" and path == "steps":
        message = "must contain at least one step"
    else:
        message = f"{error['msg'][0].lower()}{error['msg'][1:]}"
        if kind not in {"extra_forbidden"} and not isinstance(given, (dict, list)):
            message += f" (got {_show(given)})"
    return ValidationProblem(path=path, message=message)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def parse_trace(data: ReasoningTrace | Mapping[str, Any] | str | bytes) -> ReasoningTrace:
    """A ReasoningTrace from a model, a mapping or JSON text; raises TraceValidationError."""
    if isinstance(data, ReasoningTrace):
        return data
    if isinstance(data, (str, bytes, bytearray)):
        return ReasoningTrace.model_validate_json(data)
    if isinstance(data, Mapping):
        return ReasoningTrace.model_validate(data)
    raise TraceValidationError(
        [ValidationProblem(path="", message=f"expected a JSON object, got {type(data).__name__}")]
    )
