"""Every kp command explains itself: each option has a description, and each subcommand of
kp kb and kp keys shows its own examples."""

from __future__ import annotations

import click
import pytest

from knowledgepulse.cli._app import app


def _commands() -> list[tuple[str, click.Command]]:
    context = click.Context(app)
    found: list[tuple[str, click.Command]] = []

    def walk(command: click.Command, path: str) -> None:
        if isinstance(command, click.Group):
            for name in command.list_commands(context):
                sub = command.get_command(context, name)
                assert sub is not None
                walk(sub, f"{path} {name}")
        else:
            found.append((path, command))

    walk(app, "kp")
    return found


COMMANDS = _commands()


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=[p for p, _ in COMMANDS])
def test_every_option_has_a_description(path: str, command: click.Command) -> None:
    bare = [
        option.opts[0]
        for option in command.params
        if isinstance(option, click.Option) and not option.hidden and not option.help
    ]
    assert bare == [], f"{path}: options without help"


@pytest.mark.parametrize(
    ("path", "command"),
    [(p, c) for p, c in COMMANDS if p.startswith(("kp kb ", "kp keys "))],
    ids=[p for p, _ in COMMANDS if p.startswith(("kp kb ", "kp keys "))],
)
def test_kb_and_keys_subcommands_show_their_own_examples(path: str, command: click.Command) -> None:
    examples = (command.epilog or "").split("Examples:", 1)
    assert len(examples) == 2, f"{path}: no examples"
    assert path.removeprefix("kp ") in examples[1], f"{path}: examples of another command"
