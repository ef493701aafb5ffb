"""``kp schema``: the JSON Schema of a trace, a score line or an eval line."""

from __future__ import annotations

import json

import click

from ._app import app


@app.command(
    "schema",
    epilog=(
        "\b\nExamples:\n"
        "  kp schema trace > reasoning-trace.schema.json\n"
        "  kp schema score\n"
        "  kp schema eval\n"
        "  kp schema groups\n"
        "  kp schema diff"
    ),
)
@click.argument("kind", type=click.Choice(["trace", "score", "eval", "groups", "diff"]))
def schema_command(kind: str) -> None:
    """Print the JSON Schema of a ReasoningTrace (trace), a kp score line, a kp eval line, a
    kp curate --groups line or a kp diff --json document (diff)."""
    from ..records import json_schema

    if kind == "diff":
        from ..compare import diff_schema

        click.echo(json.dumps(diff_schema(), indent=2, ensure_ascii=False))
        return
    click.echo(json.dumps(json_schema(kind), indent=2, ensure_ascii=False))  # type: ignore[arg-type]
