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


# -- one option, one spelling ------------------------------------------------------------------

#: What click shows for an option that does not say what it takes.
CLICK_TYPE_NAMES = {"INTEGER", "INTEGER RANGE", "FLOAT", "FLOAT RANGE", "TEXT", "BOOLEAN"}
#: Options that mean something else in each command that has them: each command's help says
#: what it writes, compares or stores.
PER_COMMAND = {
    "--by",  # what curate groups by; what diff pairs cases by
    "--embedder",  # kp curate has no static embedder (its choice set: issue 38, item 6)
    "--group-by",  # score and eval group as they write; report groups what it reads
    "--json",  # what is printed
    "--junit",  # what the test cases are
    "--kb",  # a base to store in (score), to count as seen (curate), to read A and B from (diff)
    "--output",  # what is written
    "--rubric",  # eval grades with it; diff lists the criteria that flipped
    "--threshold",  # the sharing gate (score), a line drawn (report), the contribution gate
}
#: Counts whose name says more than N does: attempts kept per task, a size in bytes.
NAMED_COUNTS = {("kp curate", "--keep-per-task"): "K", ("kp serve", "--max-body"): "BYTES"}


def _options() -> list[tuple[str, click.Option]]:
    return [
        (path, option)
        for path, command in COMMANDS
        for option in command.params
        if isinstance(option, click.Option) and not option.hidden and not option.is_flag
    ]


def _metavar(path: str, option: click.Option) -> str:
    return option.make_metavar(click.Context(click.Command(path)))


def _name(option: click.Option) -> str:
    return max(option.opts, key=len)


def test_every_option_names_what_it_takes() -> None:
    shown = [
        f"{path} {_name(option)} {_metavar(path, option)}"
        for path, option in _options()
        if _metavar(path, option) in CLICK_TYPE_NAMES
    ]
    assert shown == []


def test_a_count_is_n_a_similarity_s_and_a_duration_seconds() -> None:
    wrong = []
    for path, option in _options():
        name, metavar = _name(option), _metavar(path, option)
        expected = None
        if isinstance(option.type, click.IntRange) or option.type is click.INT:
            expected = NAMED_COUNTS.get((path, name), "N")
        elif "similarity" in name:
            expected = "S"
        elif "timeout" in name or "drain" in name:
            expected = "SECONDS"
        if expected is not None and metavar != expected:
            wrong.append(f"{path} {name} {metavar} (expected {expected})")
    assert wrong == []


def test_an_option_says_the_same_in_every_command() -> None:
    spellings: dict[str, set[tuple[str, str]]] = {}
    for path, option in _options():
        if _name(option) not in PER_COMMAND:
            spellings.setdefault(_name(option), set()).add(
                (_metavar(path, option), option.help or "")
            )
    assert {name: sorted(s) for name, s in spellings.items() if len(s) > 1} == {}


def test_a_key_is_taken_one_way_never_in_argv() -> None:
    """Every command that takes an API key takes it from --api-key-file PATH (else
    $KNOWLEDGEPULSE_API_KEY): no visible option carries a key, or the name of a variable."""
    takers = {
        path: _name(option)
        for path, option in _options()
        if "api-key" in _name(option) or "api_key" in (option.name or "")
    }
    assert takers == {"kp mcp": "--api-key-file", "kp view": "--api-key-file"}
