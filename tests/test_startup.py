"""What start-up loads: ``import knowledgepulse`` and ``kp --help`` stay light.

Their speed is measured by ``python -m benchmarks``; these tests check the cause, which modules
get imported, so a heavy import slipping onto the path fails here on any machine.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import click
import pytest

from knowledgepulse.cli._app import COMMANDS, app

HEAVY = ("pydantic", "numpy", "rich", "onnxruntime", "torch", "ray", "fastapi")


def modules_loaded_by(code: str) -> set[str]:
    script = f"{code}\nimport json, sys; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    return set(json.loads(out.splitlines()[-1]))


def test_import_knowledgepulse_loads_nothing_heavy() -> None:
    loaded = modules_loaded_by("import knowledgepulse")
    assert [name for name in HEAVY if name in loaded] == []


def test_kp_help_imports_no_command_module() -> None:
    loaded = modules_loaded_by(
        "import contextlib, io\n"
        "from knowledgepulse.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert main(['--help']) == 0"
    )
    assert [name for name in HEAVY if name in loaded] == []
    commands = sorted(name for name in loaded if name.endswith("_cmd"))
    assert commands == []


def test_a_command_loads_only_its_own_module() -> None:
    loaded = modules_loaded_by(
        "import contextlib, io\n"
        "from knowledgepulse.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert main(['schema', '--help']) == 0"
    )
    assert sorted(name for name in loaded if name.endswith("_cmd")) == [
        "knowledgepulse.cli._schema_cmd"
    ]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_listed_help_is_the_commands_own(name: str) -> None:
    with click.Context(app) as ctx:
        command = app.get_command(ctx, name)
    assert command is not None and command.name == name
    assert COMMANDS[name][1] == command.get_short_help_str(limit=1_000)


def test_every_registered_command_is_listed() -> None:
    with click.Context(app) as ctx:
        for name in list(COMMANDS):
            app.get_command(ctx, name)
    assert sorted(app.commands) == sorted(COMMANDS)


def test_unknown_command_is_a_usage_error() -> None:
    from knowledgepulse.cli import main

    assert main(["nosuchcommand"]) == 2


@pytest.mark.parametrize("package", ["knowledgepulse", "knowledgepulse.distributed"])
def test_every_public_name_resolves(package: str) -> None:
    module = importlib.import_module(package)
    for name in module.__all__:
        assert getattr(module, name) is getattr(module, name)
    assert dir(module) == sorted(module.__all__)
    with pytest.raises(AttributeError, match="has no attribute 'missing'"):
        module.missing  # noqa: B018
