"""The endpoints. Each reads its body within the limits, then does its work in a worker thread."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException

from .. import __version__
from .._schema import ReasoningTrace, format_path
from ..api_models import (
    Contribution,
    ContributionBatch,
    ErrorBody,
    GroupList,
    Health,
    ScoreResponse,
    SearchRequest,
    SearchResponse,
    Stats,
    TraceDetail,
    TraceList,
)
from ..compare import EvaluationComparison, TraceComparison
from ..importers import format_names
from ..kb import ApiKey
from ..tasks import task_text
from ._bodies import RequestProblem, parse_json, problem, refuse_unstorable_ids, traces_of
from ._limits import read_body
from ._source import BASE_SORTS, ListQuery
from ._state import ReadOnly, ServiceState, stop_point

__all__ = ["router"]

router = APIRouter()

_TRACE = {"$ref": "#/components/schemas/ReasoningTrace"}
_FROM_HELP = (
    "Read the body as a log of this format (openai, anthropic, otel, ...; see `kp import "
    "--help`) and convert it with knowledgepulse.importers. Default: a ReasoningTrace."
)
_ERRORS = {
    401: "No API key, or not a valid one.",
    403: "The key's scope is too low.",
    404: "No such trace, or one this key may not see.",
    405: "This server reads files and stores nothing (kp view).",
    408: "The body arrived too slowly.",
    409: "The trace id was taken meanwhile by a trace this key may not see; post it again.",
    413: "Too large: the body, a trace's steps, or the number of traces.",
    422: "The body or a parameter is not valid; each problem names its field.",
    429: "The key's rate limit is reached; see Retry-After.",
    503: "The base is unavailable, or the request took too long; see Retry-After.",
}


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {code: {"model": ErrorBody, "description": _ERRORS[code]} for code in codes}


def _body(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {
        "requestBody": {
            "required": True,
            "description": description,
            "content": {"application/json": {"schema": schema}},
        }
    }


def _state(request: Request) -> ServiceState:
    state: ServiceState = request.app.state.service
    return state


async def _key(request: Request, scope: str) -> ApiKey:
    return await _state(request).keys.require(scope)(request)


async def reader(request: Request) -> ApiKey:
    return await _key(request, "read")


async def contributor(request: Request) -> ApiKey:
    return await _key(request, "contribute")


From = Annotated[
    str | None,
    Query(alias="from", description=_FROM_HELP, json_schema_extra={"enum": format_names()}),
]
Reader = Annotated[ApiKey, Depends(reader)]
Contributor = Annotated[ApiKey, Depends(contributor)]
_READ_ERRORS = (401, 403, 422, 429, 503)
_WRITE_ERRORS = (401, 403, 408, 413, 422, 429, 503)


#: Long work stops between parts of this many traces once its request has timed out.
_PART = 32


async def _body_of(request: Request) -> bytes:
    settings = _state(request).settings
    return await read_body(request, settings.max_body_bytes, settings.read_timeout_s)


def _traces(
    state: ServiceState, key: ApiKey, body: bytes, source_format: str | None, *, many: bool | None
) -> list[ReasoningTrace]:
    """The body's traces (parsed in a worker thread: a large batch is CPU work), charged to
    ``key``'s rate: one unit per trace, the request's own unit included. ``many=None``: a
    list of traces, or one, as the body says."""
    data = parse_json(body)
    if many is None:
        many = bool(source_format) or isinstance(data, list)
    traces = traces_of(data, source_format, state.settings, many=many)
    state.keys.charge(key, len(traces) - 1)
    return traces


def _in_parts(traces: list[ReasoningTrace]) -> list[list[ReasoningTrace]]:
    return [traces[start : start + _PART] for start in range(0, len(traces), _PART)]


def _json_answer(model: Any, exclude: set[str] | None = None) -> Response:
    """``model`` as FastAPI would answer it, serialised in the worker thread, not the loop."""
    return JSONResponse(model.model_dump(mode="json", by_alias=True, exclude=exclude))


def _answer(state: ServiceState, model: Any) -> Response:
    """``model`` without the fields the source leaves out (a knowledge base: kp view's own)."""
    return _json_answer(model, state.source.left_out(type(model)) or None)


def _writable(request: Request) -> None:
    """Before the key: a source that stores nothing answers a write 405, whose ``Allow`` names
    the reads of the same path (``GET /v1/traces``), if any."""
    if _state(request).source.engine is None:
        raise ReadOnly("GET, HEAD" if request.url.path == "/v1/traces" else "")


@router.post(
    "/v1/score",
    response_model=ScoreResponse,
    responses=_errors(405, *_WRITE_ERRORS),
    dependencies=[Depends(_writable)],
    openapi_extra=_body(
        {"anyOf": [_TRACE, {"type": "array", "items": _TRACE}]},
        "A trace, or a list of traces (or, with `from`, a log record).",
    ),
    summary="Score traces against the base, storing nothing",
)
async def score(request: Request, key: Reader, source_format: From = None) -> Response:
    state = _state(request)
    body = await _body_of(request)

    def work() -> Response:
        traces = _traces(state, key, body, source_format, many=None)
        records = []
        for part in _in_parts(traces):
            stop_point()
            records.extend(state.engine.score(part, key.viewer))
        return _json_answer(ScoreResponse(records=records))

    return await state.work(key.id, work)


async def _contribute(
    request: Request, key: ApiKey, source_format: str | None, *, many: bool
) -> list[Contribution]:
    state = _state(request)
    body = await _body_of(request)
    source = "POST /v1/traces" + (f"?from={source_format}" if source_format else "")

    def redact_then_contribute() -> list[Contribution]:
        traces = _traces(state, key, body, source_format, many=many)
        refuse_unstorable_ids(traces, many=many)
        results: list[Contribution] = []
        for part in _in_parts(traces):
            stop_point()  # parts stored before a timeout stay stored: posting again is safe
            redacted = [state.redact(trace) for trace in part]
            results.extend(state.engine.contribute(redacted, key, source))
        return results

    return await state.work(key.id, redact_then_contribute)


@router.post(
    "/v1/traces",
    status_code=201,
    response_model=Contribution,
    responses={
        200: {
            "model": Contribution,
            "description": "Already stored (the stored result), or rejected.",
        },
        **_errors(405, 409, *_WRITE_ERRORS),
    },
    dependencies=[Depends(_writable)],
    openapi_extra=_body(_TRACE, "A trace (or, with `from`, a log record holding one)."),
    summary="Contribute a trace: stored when its value reaches the threshold",
)
async def contribute(
    request: Request, response: Response, key: Contributor, source_format: From = None
) -> Contribution:
    result = (await _contribute(request, key, source_format, many=False))[0]
    if result.status == "conflict":
        raise HTTPException(409, result.explanation)
    response.status_code = 201 if result.status == "accepted" else 200
    return result


@router.post(
    "/v1/traces/batch",
    response_model=ContributionBatch,
    responses=_errors(405, *_WRITE_ERRORS),
    dependencies=[Depends(_writable)],
    openapi_extra=_body(
        {"type": "array", "items": _TRACE}, "A list of traces (or, with `from`, a log record)."
    ),
    summary="Contribute several traces; one result each",
)
async def contribute_batch(
    request: Request, key: Contributor, source_format: From = None
) -> ContributionBatch:
    return ContributionBatch(results=await _contribute(request, key, source_format, many=True))


_SORT_HELP = (
    "value or added_at, with - for descending (default -added_at). kp view also sorts by "
    "complexity, novelty, tool_diversity, outcome, success, domain and id (default -value)."
)
_KP_VIEW = "kp view only: the least (value_min) or most (value_max) value listed."


@router.get(
    "/v1/traces",
    response_model=TraceList,
    responses=_errors(*_READ_ERRORS),
    summary="The traces this key may see, a page at a time",
)
async def list_traces(
    request: Request,
    key: Reader,
    # The document lists a knowledge base's sorts; kp view takes more (its docs say which).
    sort: Annotated[
        str | None, Query(description=_SORT_HELP, json_schema_extra={"enum": list(BASE_SORTS)})
    ] = None,
    domain: Annotated[str | None, Query(description="Only this task_domain.")] = None,
    q: Annotated[str | None, Query(description="Only ids or objectives containing this.")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=2**62)] = 0,
    value_min: Annotated[float | None, Query(allow_inf_nan=False, description=_KP_VIEW)] = None,
    value_max: Annotated[float | None, Query(allow_inf_nan=False, description=_KP_VIEW)] = None,
) -> TraceList:
    state = _state(request)
    query = ListQuery(sort, domain, q, limit, offset, value_min, value_max)
    return await state.read(state.source.listing, key.viewer, query)


@router.get(
    "/v1/traces/{trace_id}",
    response_model=TraceDetail,
    responses=_errors(404, *_READ_ERRORS),
    summary="A stored trace, its score record and its near-duplicates",
)
async def get_trace(
    request: Request, key: Reader, trace_id: Annotated[str, Path(max_length=1000)]
) -> Response:
    state = _state(request)
    found = await state.read(state.source.detail, trace_id, key.viewer)
    if found is None:
        raise HTTPException(404, f"no trace {trace_id}")
    return _answer(state, found)


@router.get(
    "/v1/compare",
    response_model=TraceComparison,
    responses=_errors(404, *_READ_ERRORS),
    summary="Two stored traces compared: where they parted, calls, flipped criteria",
)
async def compare(
    request: Request,
    key: Reader,
    a: Annotated[str, Query(max_length=1000, description="The trace before.")],
    b: Annotated[str, Query(max_length=1000, description="The trace after.")],
    rubric: Annotated[
        Literal["agent", "none"],
        Query(description="Evaluate both with the built-in agent rubric, or not."),
    ] = "agent",
) -> Response:
    state = _state(request)

    def work() -> TraceComparison | str:
        return state.source.compare(a, b, key.viewer, None if rubric == "none" else rubric)

    found = await state.work(key.id, work)
    if isinstance(found, str):
        raise HTTPException(404, f"no trace {found}")
    return _json_answer(found)


@router.post(
    "/v1/search",
    response_model=SearchResponse,
    responses=_errors(*_WRITE_ERRORS),
    openapi_extra=_body(
        {"$ref": "#/components/schemas/SearchRequest"}, "A text or a trace, and k."
    ),
    summary="The k stored traces this key may see most similar to a text or a trace",
)
async def search(request: Request, key: Reader) -> SearchResponse:
    state = _state(request)
    body = await _body_of(request)
    return await state.work(key.id, _search, state, key, body)


def _search(state: ServiceState, key: ApiKey, body: bytes) -> SearchResponse:
    data = parse_json(body)
    try:
        query = SearchRequest.model_validate(data)
    except ValidationError as exc:
        problems = [problem(format_path(e["loc"]), e["msg"]) for e in exc.errors(include_url=False)]
        raise RequestProblem(f"invalid search: {problems[0]}", problems) from None
    if (query.text is None) == (query.trace is None):
        wrong = problem("", "give either text or trace")
        raise RequestProblem("give either text or trace", [wrong])
    text = query.text
    if query.trace is not None:
        try:
            trace: ReasoningTrace = traces_of(query.trace, None, state.settings, many=False)[0]
        except RequestProblem as exc:
            problems = [problem(_under("trace", p.path), p.message) for p in exc.problems]
            raise RequestProblem(f"invalid trace: {problems[0]}", problems) from None
        text = task_text(trace).text
    assert text is not None
    k = min(query.k, state.settings.max_k)
    try:
        hits, reason = state.source.search(text, k, key.viewer, query.prefer)
    except ValueError as exc:  # a text over recall's limit, or blank
        wrong = problem("text", str(exc).removeprefix("query: "))
        raise RequestProblem(f"invalid search: text: {wrong.message}", [wrong]) from None
    return SearchResponse(hits=hits, reason=reason)


def _under(prefix: str, path: str) -> str:
    return prefix if not path else prefix + ("" if path.startswith("[") else ".") + path


@router.get(
    "/v1/stats",
    response_model=Stats,
    responses=_errors(*_READ_ERRORS),
    summary="Counts over the traces this key may see",
)
async def stats(request: Request, key: Reader) -> Response:
    state = _state(request)
    return _answer(state, await state.read(state.source.stats, key))


@router.get(
    "/v1/groups",
    response_model=GroupList,
    responses=_errors(404, *_READ_ERRORS),
    summary="kp view only: the groups of near-duplicates read from kp curate --groups files",
    include_in_schema=False,  # the service keeps none (404); the contract documents GroupList
)
async def groups(request: Request, key: Reader) -> Response:
    state = _state(request)
    found = await state.read(state.source.groups)
    if found is None:
        raise HTTPException(404, "this server keeps no groups: kp view reads kp curate --groups")
    return _answer(state, found)


@router.get(
    "/v1/runs/compare",
    response_model=EvaluationComparison,
    responses=_errors(404, *_READ_ERRORS),
    summary="kp view only: the kp eval lines of two files compared",
    include_in_schema=False,  # the service keeps no runs (404)
)
async def compare_runs(
    request: Request,
    key: Reader,
    a: Annotated[str | None, Query(description="The file of kp eval lines before.")] = None,
    b: Annotated[str | None, Query(description="The file of kp eval lines after.")] = None,
    by: Annotated[str | None, Query(description="Pair the cases by id (default) or task.")] = None,
) -> Response:
    state = _state(request)
    found = await state.read(state.source.compare_runs, a, b, by)
    if found is None:
        raise HTTPException(404, "this server keeps no runs: kp view reads kp eval files")
    if isinstance(found, str):
        raise HTTPException(404, f"no kp eval lines read from {found}")
    return _answer(state, found)


@router.get(
    "/healthz",
    response_model=Health,
    responses={503: {"model": Health, "description": "The base does not answer."}},
    summary="Whether the base answers, and which embedder scores (no key needed)",
)
async def healthz(request: Request) -> Any:
    state = _state(request)
    # Nothing an anonymous caller could learn about the contents: no counts, no location.
    base, embedder = state.source.health()
    status = "ok"
    try:
        await state.read(state.source.ping)  # one small query: the base answers
    except Exception as exc:  # any failure to answer is what this endpoint reports
        status = "unavailable"
        base["error"] = type(exc).__name__
    health = Health(
        status=status,
        version=__version__,
        knowledge_base=base,
        embedder=embedder,
        redaction=state.redaction,
    )
    return JSONResponse(health.model_dump(), status_code=200 if status == "ok" else 503)
