"""``kp mcp``: the knowledge base as an MCP server over stdio (see docs/mcp.md)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from ._app import app
from ._kb_cmd import kb_option
from ._options import API_KEY_VARIABLE, api_key_file_option, read_api_key

if TYPE_CHECKING:
    from ..kb import KnowledgeBase


@app.command(
    "mcp",
    epilog=(
        "\b\nExamples:\n"
        "  kp mcp --kb team.sqlite\n"
        "  kp mcp --kb postgresql://kp@db/kb --threshold 0.6\n"
        "  kp mcp --kb team.sqlite --api-key-file ~/.config/kp/key"
    ),
)
@kb_option
@click.option(
    "--threshold",
    type=click.FloatRange(0.0, 1.0),
    metavar="T",
    help="Value a contribution must reach to be stored; kept in the base "
    "[default: the base's, else 0.5].",
)
@api_key_file_option
# The old way: a key in the command line is readable by every local user (ps, /proc), so it is
# refused, by name, with where the key goes now.
@click.option("--api-key", "old_api_key", hidden=True, default=None)
def mcp_command(
    location: str, threshold: float | None, api_key_file: Path | None, old_api_key: str | None
) -> None:
    """Serve a knowledge base to an MCP client over stdio: search, read and contribute traces.

    The client starts this command and talks JSON-RPC on its stdin and stdout; the server acts
    as the key (kp keys create) of --api-key-file or $KNOWLEDGEPULSE_API_KEY: it sees the traces
    that key sees and contributes as it; without a key, as the base's owner, who sees every
    trace. Log lines go to stderr.
    """
    if old_api_key is not None:
        raise click.UsageError(
            "--api-key puts the key in the command line, where every local user can read it "
            f"(ps): give --api-key-file PATH, or set {API_KEY_VARIABLE}"
        )
    api_key, given_as = read_api_key(api_key_file)
    from ..embedding import choose_embedder
    from ..kb import EmbeddingIdentity, open_knowledge_base
    from ..mcp_server import LOCAL_KEY, TraceMemory, run_stdio
    from ..service import ServiceSettings
    from ..service._bodies import load_redactor
    from ..service._engine import Engine

    chosen = choose_embedder("auto")
    if chosen.embedder is None:
        raise click.UsageError(
            f"kp mcp searches by embedding and needs the embedder: {chosen.reason}"
        )
    embedder = chosen.embedder
    warm_up = getattr(embedder, "warm_up", None)
    if callable(warm_up):  # the model loads now, not on the client's first call
        warm_up()
    with open_knowledge_base(location, EmbeddingIdentity.of(embedder)) as kb:
        key = LOCAL_KEY
        if api_key:
            verified = kb.verify_api_key(api_key)
            if verified is None:
                raise click.UsageError(
                    f"{given_as}: not a valid key of this base (unknown or revoked)"
                )
            key = verified
        engine = Engine(kb, embedder, _threshold(kb, threshold))
        redact, redaction = load_redactor()
        click.echo(
            f"kp mcp: {kb.location} ({len(kb):,} traces, threshold {engine.threshold:g}), "
            f"embedder {embedder.name}, redaction {redaction}; serving on stdio",
            err=True,
        )
        run_stdio(TraceMemory(engine, ServiceSettings(), redact), key)


def _threshold(kb: KnowledgeBase, given: float | None) -> float:
    from ..service import DEFAULT_THRESHOLD

    setting = kb.setting
    if given is not None:
        kb.set_setting("threshold", repr(float(given)))
        return float(given)
    kept = setting("threshold")
    return float(kept) if kept is not None else DEFAULT_THRESHOLD
