"""``kp serve``: the knowledge base as a web service (see docs/service.md)."""

from __future__ import annotations

import click
from click.core import ParameterSource

from ._app import app
from ._kb_cmd import kb_option
from ._options import host_option, port_option


@app.command(
    "serve",
    epilog=(
        "\b\nExamples:\n"
        "  kp keys create --kb team.sqlite --name me --scope contribute\n"
        "  kp serve --kb team.sqlite --port 8750\n"
        "  kp serve --kb postgresql://kp@db/kb --host 0.0.0.0 --threshold 0.6"
    ),
)
@kb_option
@host_option
@port_option(8750)
@click.option(
    "--threshold",
    type=click.FloatRange(0.0, 1.0),
    metavar="T",
    help="Value a contribution must reach to be stored; kept in the base "
    "[default: the base's, else 0.5].",
)
@click.option(
    "--max-body",
    "max_body_bytes",
    type=click.IntRange(1),
    default=1024 * 1024,
    show_default=True,
    metavar="BYTES",
    help="Largest request body (413 beyond).",
)
@click.option(
    "--max-steps",
    type=click.IntRange(1),
    metavar="N",
    default=1000,
    show_default=True,
    help="Most steps in one trace (413 beyond).",
)
@click.option(
    "--max-batch",
    type=click.IntRange(1),
    metavar="N",
    default=256,
    show_default=True,
    help="Most traces in one request (413 beyond).",
)
@click.option(
    "--rate",
    "rate_per_s",
    type=click.FloatRange(0.0),
    metavar="N",
    default=20.0,
    show_default=True,
    help="Work per second per key, on average: a request is 1, each trace it scores or "
    "contributes beyond the first 1 more (0: no limit; 429 beyond).",
)
@click.option(
    "--burst",
    type=click.IntRange(1),
    metavar="N",
    default=40,
    show_default=True,
    help="Work a key may ask for at once before --rate applies.",
)
@click.option(
    "--timeout",
    "request_timeout_s",
    type=click.FloatRange(0.1),
    default=30.0,
    show_default=True,
    metavar="SECONDS",
    help="Longest scoring or storing (503 beyond).",
)
@click.option(
    "--threads",
    type=click.IntRange(1),
    metavar="N",
    default=4,
    show_default=True,
    help="Threads embedding and scoring at once; one key holds at most half of them.",
)
# The old name: elsewhere --workers means processes (kp score, kp curate), so here it gave way
# to --threads; it is still taken, with a note, so that existing scripts keep working.
@click.option("--workers", "old_workers", type=click.IntRange(1), default=None, hidden=True)
@click.option(
    "--drain",
    "drain_s",
    type=click.FloatRange(0.0),
    default=30.0,
    show_default=True,
    metavar="SECONDS",
    help="On SIGTERM, how long requests in flight may finish.",
)
@click.option(
    "--header-timeout",
    "header_timeout_s",
    type=click.FloatRange(0.1),
    default=10.0,
    show_default=True,
    metavar="SECONDS",
    help="A request's headers must arrive within this long (else the connection closes).",
)
@click.option(
    "--max-connections",
    type=click.IntRange(1),
    metavar="N",
    default=1000,
    show_default=True,
    help="Most connections open at once (at most 3/4 of the open-file limit); past it the "
    "longest idle one is closed.",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME[:PORT]",
    help="A Host name /mcp answers besides loopback ones (repeatable; default: --host when it "
    "is a specific address). DNS-rebinding protection for MCP clients.",
)
@click.option("--no-embed", is_flag=True, hidden=True)
def serve_command(
    location: str,
    host: str,
    port: int,
    threshold: float | None,
    max_body_bytes: int,
    max_steps: int,
    max_batch: int,
    rate_per_s: float,
    burst: int,
    request_timeout_s: float,
    threads: int,
    old_workers: int | None,
    drain_s: float,
    header_timeout_s: float,
    max_connections: int,
    allowed_hosts: tuple[str, ...],
    no_embed: bool,
) -> None:
    """Serve a knowledge base over HTTP: score, contribute, search and read traces.

    Every endpoint but /healthz needs an API key (kp keys create). The OpenAPI document is
    at /openapi.json, its pages at /docs.
    """
    if old_workers is not None:
        if (
            click.get_current_context().get_parameter_source("threads")
            is not ParameterSource.DEFAULT
        ):
            raise click.UsageError("--workers is the old name of --threads: give only --threads")
        click.echo("kp serve: --workers is now --threads (threads, not processes)", err=True)
        threads = old_workers
    if no_embed:
        raise click.UsageError("--kb compares embeddings: kp serve cannot run with --no-embed")
    from ..embedding import choose_embedder
    from ..kb import EmbeddingIdentity, open_knowledge_base
    from ..service import ServiceSettings, create_app, run_server

    chosen = choose_embedder("auto")
    if chosen.embedder is None:
        raise click.UsageError(f"kp serve needs the embedder: {chosen.reason}")
    embedder = chosen.embedder
    warm_up = getattr(embedder, "warm_up", None)
    if callable(warm_up):
        warm_up()
    kb = open_knowledge_base(location, EmbeddingIdentity.of(embedder))
    settings = ServiceSettings(
        max_body_bytes=max_body_bytes,
        max_steps=max_steps,
        max_batch=max_batch,
        rate_per_s=rate_per_s,
        burst=burst,
        request_timeout_s=request_timeout_s,
        workers=threads,
        header_timeout_s=header_timeout_s,
        max_connections=max_connections,
        allowed_hosts=_mcp_hosts(host, allowed_hosts),
    )
    application = create_app(kb, embedder, settings=settings, threshold=threshold, close_kb=True)
    service = application.state.service
    live_keys = sum(key.revoked_at is None for key in kb.api_keys())
    for line in startup_lines(
        location=kb.location,
        traces=len(kb),
        threshold=service.engine.threshold,
        embedder=str(embedder.name),
        redaction=str(service.redaction),
        host=host,
        port=port,
        live_keys=live_keys,
    ):
        click.echo(line, err=True)
    run_server(application, host, port, drain_s=drain_s)


def startup_lines(
    *,
    location: str,
    traces: int,
    threshold: float,
    embedder: str,
    redaction: str,
    host: str,
    port: int,
    live_keys: int,
) -> list[str]:
    """What ``kp serve`` says when it starts: the base, the viewer's address (where a reader
    goes first), and, for a base without a live key, that every request needs one and how to
    make it."""
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}"
    lines = [
        f"kp serve: {location} ({traces:,} traces, threshold {threshold:g}), embedder "
        f"{embedder}, redaction {redaction}",
        f"kp serve: viewer {url}/ · API {url}/v1 (pages {url}/docs) · MCP {url}/mcp",
    ]
    if live_keys == 0:
        lines.append(
            "kp serve: the base has no API key yet, and everything but /healthz needs one: "
            f"kp keys create --kb {location} --name NAME --scope read|contribute|admin"
        )
    return lines


def _mcp_hosts(host: str, allowed: tuple[str, ...]) -> tuple[str, ...]:
    """The names /mcp answers besides loopback: those given, and the address listened on when
    it is a specific one (a wildcard address is no name a client uses)."""
    names = list(allowed)
    if host not in ("0.0.0.0", "::", "") and host not in names:
        names.append(f"[{host}]" if ":" in host else host)
    return tuple(names)
