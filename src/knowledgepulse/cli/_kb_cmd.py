"""``kp kb``: look into a knowledge base, check it, export and import it."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import click

from ..runs import Rejection, Run, open_writer, signals_held, stderr_console
from ._app import app
from ._options import quiet_option
from ._run import check_paths

if TYPE_CHECKING:
    from ..io._input_record import InputRecord
    from ..kb import EmbeddingIdentity, Hit, KnowledgeBase, StoredTrace
    from ..records import ScoreRecord

F = TypeVar("F", bound=Callable[..., Any])
EXPORT_SCHEMA = "knowledgepulse.kb-entry/1"


def kb_option(function: F) -> F:
    return click.option(
        "--kb",
        "location",
        required=True,
        metavar="FILE|URL",
        help="The knowledge base: an SQLite file or a postgresql:// URL.",
    )(function)


def json_option(function: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON.")(function)


@app.group(
    "kb",
    epilog=(
        "\b\nExamples:\n"
        "  kp kb stats --kb team.sqlite\n"
        "  kp kb search 'refund a cancelled flight' --kb team.sqlite -k 5\n"
        "  kp kb similar kp:trace:1234 --kb team.sqlite\n"
        "  kp kb show kp:trace:1234 --kb team.sqlite\n"
        "  kp kb export --kb team.sqlite -o team.jsonl.gz\n"
        "  kp kb import team.jsonl.gz --kb postgresql://kp@db/kb\n"
        "  kp kb check --kb team.sqlite"
    ),
)
def kb_group() -> None:
    """Look into a knowledge base: stats, search, similar traces, show, export, import, check."""


def _open(
    location: str, *, create: bool = False, identity: EmbeddingIdentity | None = None
) -> KnowledgeBase:
    from ..kb import open_knowledge_base

    return open_knowledge_base(location, identity, create=create)


@kb_group.command(
    "stats",
    epilog="\b\nExamples:\n  kp kb stats --kb team.sqlite\n  kp kb stats --kb postgresql://kp@db/kb --json",
)
@kb_option
@json_option
def stats_command(location: str, as_json: bool) -> None:
    """How many traces, by domain, made with which model, and when."""
    with _open(location) as kb:
        stats = kb.stats()
    data = stats.to_dict()
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    identity = stats.identity.describe() if stats.identity else "(no vectors yet)"
    mean = "-" if stats.mean_value is None else f"{stats.mean_value:.3f}"
    click.echo(f"knowledge base  {stats.location}")
    click.echo(f"traces          {stats.traces:,}   mean value {mean}")
    click.echo(f"vectors         {identity}; search: {stats.index}")
    click.echo(f"created         {stats.created_at}   last added {stats.last_added_at or '-'}")
    for domain, count in stats.by_domain.items():
        click.echo(f"  {domain:<24} {count:>8,}")


@kb_group.command(
    "search",
    epilog="\b\nExamples:\n  kp kb search 'refund a cancelled flight' --kb team.sqlite\n  kp kb search 'flaky test bisect' --kb team.sqlite -k 3",
)
@click.argument("text")
@kb_option
@click.option(
    "-k",
    "k",
    type=click.IntRange(1, 1000),
    metavar="N",
    default=10,
    show_default=True,
    help="How many traces.",
)
@json_option
def search_command(text: str, location: str, k: int, as_json: bool) -> None:
    """The stored traces that best match TEXT: the task vectors and the full-text index,
    fused (as recall ranks them), successful or not."""
    from ..kb import Hit
    from ..kb._recall import ranked_search, require_same_model

    with _open(location) as kb:
        embedder = _embedder_for_search(kb)
        require_same_model(kb, embedder)
        try:
            found, reason = ranked_search(kb, embedder, text, k=k, success_only=False)
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
        if reason is not None:
            stderr_console().print(f"no traces: {reason}", markup=False)
        _print_hits(kb, [Hit(hit.row.id, hit.similarity) for hit in found], as_json)


@kb_group.command(
    "similar",
    epilog="\b\nExamples:\n  kp kb similar kp:trace:1234 --kb team.sqlite\n  kp kb similar kp:trace:1234 --kb team.sqlite -k 3",
)
@click.argument("trace_id", metavar="ID")
@kb_option
@click.option(
    "-k",
    "k",
    type=click.IntRange(1, 1000),
    metavar="N",
    default=10,
    show_default=True,
    help="How many traces.",
)
@json_option
def similar_command(trace_id: str, location: str, k: int, as_json: bool) -> None:
    """The stored traces most similar to the stored trace ID."""
    with _open(location) as kb:
        try:
            hits = kb.similar(trace_id, k)
        except KeyError:
            raise click.UsageError(f"no trace {trace_id} in {kb.location}") from None
        _print_hits(kb, hits, as_json)


@kb_group.command(
    "show",
    epilog="\b\nExamples:\n  kp kb show kp:trace:1234 --kb team.sqlite\n  kp kb show kp:trace:1234 --kb team.sqlite | jq .record.score",
)
@click.argument("trace_id", metavar="ID")
@kb_option
def show_command(trace_id: str, location: str) -> None:
    """A stored trace with its score record, as JSON."""
    with _open(location) as kb:
        stored = kb.get(trace_id)
        if stored is None:
            raise click.UsageError(f"no trace {trace_id} in {kb.location}")
        click.echo(
            json.dumps(
                {
                    "id": stored.id,
                    "added_at": stored.added_at,
                    "source": stored.source,
                    "record": None if stored.record is None else stored.record.to_dict(),
                    "trace": stored.trace,
                },
                indent=2,
                ensure_ascii=False,
            )
        )


@kb_group.command(
    "check",
    epilog="\b\nExamples:\n  kp kb check --kb team.sqlite\n  kp kb check --kb postgresql://kp@db/kb",
)
@kb_option
def check_command(location: str) -> None:
    """Check the base: SQLite's integrity check, every vector and every stored JSON."""
    with _open(location) as kb:
        problems = kb.check()
        count = len(kb)
    for problem in problems:
        click.echo(problem)
    click.echo(f"{location}: {count:,} traces, {len(problems)} problems", err=True)
    raise click.exceptions.Exit(1 if problems else 0)


@kb_group.command(
    "export",
    epilog="\b\nExamples:\n  kp kb export --kb team.sqlite -o team.jsonl.gz\n  kp kb export --kb postgresql://kp@db/kb -o - | gzip > backup.jsonl.gz",
)
@kb_option
@click.option("--output", "-o", metavar="FILE", help="Write here (default stdout; .gz compresses).")
@quiet_option
def export_command(location: str, output: str | None, quiet: bool) -> None:
    """Every stored trace as one JSON line: trace, record, vector, provenance."""
    import numpy as np

    console = stderr_console()
    written = 0
    with _open(location) as kb, ExitStack() as stack:
        identity = kb.identity
        out = open_writer(stack, output)
        for stored in kb.iter_stored():
            out.write_json(
                {
                    "schema": EXPORT_SCHEMA,
                    "id": stored.id,
                    "model": identity.model if identity else None,
                    "dimensions": identity.dimensions if identity else None,
                    "windowing": identity.windowing if identity else None,
                    "vector": base64.b64encode(np.asarray(stored.vector, "<f4").tobytes()).decode(),
                    "added_at": stored.added_at,
                    "source": stored.source,
                    "visibility": stored.visibility,
                    "owner": stored.owner,
                    "org": stored.org,
                    "record": None if stored.record is None else stored.record.to_dict(),
                    "trace": stored.trace,
                }
            )
            written += 1
    if not quiet:
        console.print(f"exported {written:,} traces from {location}", highlight=False)


@kb_group.command(
    "import",
    epilog="\b\nExamples:\n  kp kb import team.jsonl.gz --kb postgresql://kp@db/kb\n  kp kb import old/*.jsonl --kb team.sqlite",
)
@click.argument("paths", nargs=-1, required=True, metavar="FILE...")
@kb_option
@quiet_option
def import_command(paths: tuple[str, ...], location: str, quiet: bool) -> None:
    """Add the traces of 'kp kb export' files to a base (ids already stored are skipped)."""
    from ..runs import read_units

    files = check_paths(paths)
    added = 0
    with ExitStack() as stack:
        run = Run(stack, label="importing", quiet=quiet, console=stderr_console())
        kb: KnowledgeBase | None = None
        batch: list[StoredTrace] = []

        def flush() -> None:
            nonlocal added
            if batch and kb is not None:  # a batch has a base: it opens on the first line
                with signals_held():
                    added += kb.add_many(batch)
                    run.tally.processed += len(batch)
                batch.clear()

        with run:
            for unit in read_units(_export_lines(files), run, hint=False):
                item, identity = unit.item, unit.identity
                if kb is None:
                    kb = _open(location, create=True, identity=identity)
                    stack.callback(kb.close)
                elif kb.identity is not None and kb.identity != identity:
                    message = (
                        f"vectors made with {identity.describe()}, not {kb.identity.describe()}"
                    )
                    run.tally.reject(Rejection(unit.records, [message]))
                    continue
                batch.append(item)
                if len(batch) >= 500:
                    flush()
                run.step()
            flush()
    tally = run.tally
    if not quiet or tally.interrupted:
        tally.print_folded()
        run.console.print(f"{tally.accounting()}; traces added: {added}", highlight=False)
    raise click.exceptions.Exit(tally.exit_code())


class _ExportLine(NamedTuple):
    """One line of a ``kp kb export`` file: the stored trace it holds, or why it is refused."""

    records: list[InputRecord]
    problems: list[str]
    item: Any = None
    identity: Any = None
    counted: int = 1


def _export_lines(files: list[str]) -> Iterator[_ExportLine]:
    """Each record of ``files`` read as an export line (see :func:`knowledgepulse.runs.read_units`)."""
    import numpy as np

    from ..io._reader import iter_records
    from ..kb import EmbeddingIdentity, StoredTrace

    for record in iter_records(files):
        data = record.data
        if record.error is not None or not isinstance(data, dict):
            problem = record.error or f"not a kp kb export line (schema {EXPORT_SCHEMA})"
            yield _ExportLine([record], [problem])
            continue
        if data.get("schema") != EXPORT_SCHEMA:
            yield _ExportLine([record], [f"not a kp kb export line (schema {EXPORT_SCHEMA})"])
            continue
        score_record, broken = _score_record(data.get("record"))
        try:
            identity = EmbeddingIdentity(
                str(data["model"]), int(data["dimensions"]), str(data["windowing"])
            )
            vector = np.frombuffer(base64.b64decode(data["vector"]), dtype="<f4")
            item = StoredTrace(
                id=str(data["id"]),
                trace=data["trace"],
                vector=vector,
                record=score_record,
                added_at=str(data["added_at"]),
                source=data.get("source"),
                visibility=str(data.get("visibility") or "network"),
                owner=data.get("owner"),
                org=data.get("org"),
            )
        except (KeyError, TypeError, ValueError) as exc:
            yield _ExportLine([record], [f"malformed export line: {exc}"])
            continue
        yield _ExportLine([record], broken, item, identity)


def _score_record(data: Any) -> tuple[ScoreRecord | None, list[str]]:
    """An export line's score record (None when absent), and what is wrong with it, one
    ``record.field: why`` each: a broken one is refused here, not when the base answers for
    the trace."""
    from pydantic import ValidationError

    from .._schema import format_path
    from ..records import ScoreRecord

    if data is None:
        return None, []
    try:
        return ScoreRecord.model_validate(data), []
    except ValidationError as exc:
        return None, [
            f"record.{format_path(e['loc'])}: {e['msg']}" if e["loc"] else f"record: {e['msg']}"
            for e in exc.errors(include_url=False)
        ]


def _embedder_for_search(kb: Any = None) -> Any:
    from ..embedding import STATIC_MODEL_NAME, choose_embedder

    # A base of static vectors is searched with the static embedder, any other with MiniLM.
    static = kb is not None and kb.identity is not None and kb.identity.model == STATIC_MODEL_NAME
    chosen = choose_embedder("static" if static else "auto")
    if chosen.embedder is None:
        raise click.UsageError(f"searching by text needs the embedder: {chosen.reason}")
    return chosen.embedder


def _print_hits(kb: KnowledgeBase, hits: list[Hit], as_json: bool) -> None:
    rows = []
    for hit in hits:
        stored = kb.get(hit.id)
        objective = ((stored.trace.get("task") or {}).get("objective") if stored else None) or ""
        rows.append(
            {
                "id": hit.id,
                "similarity": round(hit.similarity, 6),
                "value": stored.value if stored else None,
                "domain": stored.domain if stored else None,
                "objective": objective,
            }
        )
    if as_json:
        click.echo(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    for row in rows:
        value = "-" if row["value"] is None else f"{row['value']:.3f}"
        text = str(row["objective"]).replace("\n", " ")
        click.echo(f"{row['similarity']:.3f}  {value:>5}  {row['id']}  {text[:80]}")
