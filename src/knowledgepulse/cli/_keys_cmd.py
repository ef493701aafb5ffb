"""``kp keys``: create, list and revoke the API keys of a knowledge base (for ``kp serve``)."""

from __future__ import annotations

import json

import click

from ._app import app
from ._kb_cmd import kb_option


@app.group(
    "keys",
    epilog=(
        "\b\nExamples:\n"
        "  kp keys create --kb team.sqlite --name ci --scope contribute --org acme\n"
        "  kp keys list --kb team.sqlite\n"
        "  kp keys revoke ci --kb team.sqlite"
    ),
)
def keys_group() -> None:
    """API keys for kp serve: create (shown once, stored hashed), list, revoke."""


@keys_group.command(
    "create",
    epilog="\b\nExamples:\n  kp keys create --kb team.sqlite --name ci --scope contribute\n  kp keys create --kb team.sqlite --name alice --scope read --org acme",
)
@kb_option
@click.option(
    "--name", metavar="NAME", required=True, help="A name for the key, unique in this base."
)
@click.option(
    "--scope",
    type=click.Choice(["read", "contribute", "admin"]),
    required=True,
    help="read: score, search and read; contribute: also add traces; admin: also see every trace.",
)
@click.option("--org", metavar="ORG", help="The key's organisation (sees its org-visible traces).")
def create_command(location: str, name: str, scope: str, org: str | None) -> None:
    """Create a key and print it, once: only its hash is stored (creates the base if new)."""
    from ..kb import open_knowledge_base

    with open_knowledge_base(location) as kb:
        try:
            key, secret = kb.create_api_key(name, scope, org)
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
    click.echo(secret)
    org_text = f", org {key.org}" if key.org else ""
    click.echo(
        f"key {key.name} ({key.scope}{org_text}) created; it is shown only now: keep it",
        err=True,
    )


@keys_group.command(
    "list",
    epilog="\b\nExamples:\n  kp keys list --kb team.sqlite\n  kp keys list --kb postgresql://kp@db/kb",
)
@kb_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_command(location: str, as_json: bool) -> None:
    """The keys (never their secrets): name, scope, org, created, revoked."""
    from ..kb import open_knowledge_base

    with open_knowledge_base(location, create=False) as kb:
        keys = kb.api_keys()
    if as_json:
        rows = [
            {
                "id": k.id,
                "name": k.name,
                "scope": k.scope,
                "org": k.org,
                "created_at": k.created_at,
                "revoked_at": k.revoked_at,
            }
            for k in keys
        ]
        click.echo(json.dumps(rows, indent=2))
        return
    for k in keys:
        state = f"revoked {k.revoked_at}" if k.revoked_at else "live"
        click.echo(f"{k.name:<20} {k.scope:<10} {k.org or '-':<12} {k.created_at}  {state}")


@keys_group.command("revoke", epilog="\b\nExamples:\n  kp keys revoke ci --kb team.sqlite")
@click.argument("name")
@kb_option
def revoke_command(name: str, location: str) -> None:
    """Revoke the key NAME (a running kp serve stops taking it within 10 s)."""
    from ..kb import open_knowledge_base

    with open_knowledge_base(location, create=False) as kb:
        if not kb.revoke_api_key(name):
            raise click.UsageError(f"no live key named {name!r} in {kb.location}")
    click.echo(f"key {name} revoked")
