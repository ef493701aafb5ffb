"""``kp static-model``: build (or check) the static embedder's table ahead of its first use."""

from __future__ import annotations

import json
from typing import Any

import click

from ._app import app


@app.command(
    "static-model",
    epilog=(
        "\b\nThe table is built from the installed all-MiniLM-L6-v2 files with this project's\n"
        "encoder (no network) and cached under $KNOWLEDGEPULSE_STATIC_MODEL_DIR (default\n"
        "~/.cache/knowledgepulse/static). kp score --embedder static builds it on first use.\n"
        "\b\nExamples:\n"
        "  kp static-model            # build it if missing or unusable, print its card\n"
        "  kp static-model --check    # exit 2 if it is missing or unusable, naming the path\n"
        "  kp static-model --rebuild"
    ),
)
@click.option("--check", is_flag=True, help="Only check the cached table; build nothing.")
@click.option("--rebuild", is_flag=True, help="Build the table again even if it is usable.")
def static_model_command(check: bool, rebuild: bool) -> None:
    """Build or check the static embedder's token table, derived from the shipped MiniLM."""
    from ..embedding import build_static_model, load_static_model

    if check and rebuild:
        raise click.UsageError("--check and --rebuild exclude each other")
    # A StaticModelError names the path; kp prints it and exits 2.
    model = build_static_model() if rebuild else load_static_model(build=not check)
    card = {"path": str(model.path), **model.card}
    click.echo(json.dumps(card, indent=2, sort_keys=True))


def say_if_building(console: Any, quiet: bool) -> None:
    """Say that the static model is about to be built, and why (it names the path): the
    library's own warning goes to a logger kp does not print."""
    from ..runs._curate import static_model_note

    note = static_model_note()
    if note is not None and not quiet:
        console.print(note, markup=False, highlight=False)
