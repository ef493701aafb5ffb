"""Options shared by several commands, declared once."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from ..scoring._profiles import ProfileRegistry

F = TypeVar("F", bound=Callable[..., Any])

PATHS_HELP = (
    "\b\nPATH: .json (one object or a list), .jsonl, their .gz forms, directories\n"
    "(searched recursively, hidden files skipped) or - for stdin (read as JSONL).\n"
)


def paths_argument(function: F) -> F:
    return click.argument("paths", nargs=-1, required=True, metavar="PATH...")(function)


def quiet_option(function: F) -> F:
    return click.option("--quiet", "-q", is_flag=True, help="No progress bar and no summary.")(
        function
    )


def output_option(help_text: str) -> Callable[[F], F]:
    return click.option("--output", "-o", metavar="FILE", help=help_text)


def rejects_option(function: F) -> F:
    return click.option(
        "--rejects",
        metavar="FILE",
        help="Write rejected records here (JSONL: source, line, index, errors, record).",
    )(function)


def max_errors_option(function: F) -> F:
    return click.option(
        "--max-errors",
        type=click.IntRange(min=1),
        metavar="N",
        help="Stop after N rejected records (the accounting line still adds up).",
    )(function)


def from_option(default: str | None = "trace") -> Callable[[F], F]:
    """``--from FORMAT``; required when there is no ``default`` (kp import)."""
    settings: dict[str, Any] = {"required": True}
    if default is not None:
        # Passing default=None would count as a default in click 8.3+ and defeat required.
        settings = {"default": default, "show_default": True}
    return click.option(
        "--from",
        "source_format",
        metavar="FORMAT",
        help="Input format: trace (ReasoningTrace JSON), auto (detected per record), or a log "
        "format (listed in 'kp import --help').",
        **settings,
    )


def override_options(function: F) -> F:
    """Values set on every trace read, whatever the source says; recorded in each trace."""
    for option in reversed(
        [
            click.option(
                "--domain",
                "task_domain",
                metavar="DOMAIN",
                help="Set metadata.task_domain of every trace (overrides the input).",
            ),
            click.option(
                "--success/--failure",
                "success",
                default=None,
                help="Set metadata.success of every trace (overrides the input).",
            ),
            click.option(
                "--confidence",
                type=click.FloatRange(0.0, 1.0),
                metavar="C",
                help="Set outcome.confidence of every trace (overrides the input).",
            ),
        ]
    ):
        function = option(function)
    return function


def embedder_option(function: F) -> F:
    """``--embedder``: which MiniLM runtime embeds the traces (see ``choose_embedder``)."""
    return click.option(
        "--embedder",
        "embedder_choice",
        type=click.Choice(["auto", "onnx", "openvino", "bf16"]),
        default="auto",
        show_default=True,
        help="auto: on CPUs with native bf16, openvino (bf16), else bf16 (torch, the fast "
        "extra); elsewhere onnx (fp32).",
    )(function)


def batch_size_option(function: F) -> F:
    """``--batch-size``: traces embedded per call (never changes a result, only speed)."""
    return click.option(
        "--batch-size",
        type=click.IntRange(min=1),
        metavar="N",
        default=64,
        show_default=True,
        help="Traces embedded per batch (the output is the same for any size).",
    )(function)


def host_option(function: F) -> F:
    """``--host ADDR``: where a server listens (loopback unless said otherwise)."""
    return click.option(
        "--host",
        metavar="ADDR",
        default="127.0.0.1",
        show_default=True,
        help="The address to listen on.",
    )(function)


def port_option(default: int) -> Callable[[F], F]:
    """``--port N``: the TCP port a server listens on."""
    return click.option(
        "--port",
        type=click.IntRange(0, 65535),
        metavar="N",
        default=default,
        show_default=True,
        help="The TCP port to listen on (0: any free port).",
    )


#: Where a command takes its API key from without ``--api-key-file`` (as ``capture`` does).
API_KEY_VARIABLE = "KNOWLEDGEPULSE_API_KEY"


def api_key_file_option(function: F) -> F:
    """``--api-key-file PATH``: the one way a command takes a key; never the key in argv,
    where every local user can read it (ps, /proc)."""
    return click.option(
        "--api-key-file",
        type=click.Path(dir_okay=False, path_type=Path),
        metavar="PATH",
        help=f"Read the API key from the first line of this file [default: ${API_KEY_VARIABLE}].",
    )(function)


def read_api_key(path: Path | None) -> tuple[str | None, str]:
    """The key of ``--api-key-file`` (its first line), else of ``$KNOWLEDGEPULSE_API_KEY``, else
    None; and where it came from, for messages. An unreadable or empty file is a usage error."""
    if path is None:
        return os.environ.get(API_KEY_VARIABLE) or None, f"${API_KEY_VARIABLE}"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise click.UsageError(f"--api-key-file {path}: cannot read it ({exc})") from None
    lines = text.strip().splitlines()
    if not lines:
        raise click.UsageError(f"--api-key-file {path}: the file is empty")
    return lines[0].strip(), f"--api-key-file {path}"


def profiles_option(function: F) -> F:
    """``--profiles FILE``: custom domain weights for the value score."""
    return click.option(
        "--profiles",
        type=click.Path(path_type=Path),
        metavar="FILE",
        help="Custom domain weights (TOML, YAML or JSON).",
    )(function)


def profile_registry(profiles: Path | None) -> ProfileRegistry:
    """The built-in profiles plus those of ``--profiles``; a missing or invalid file is a
    usage error (exit 2) naming it."""
    from ..scoring._profiles import ProfileRegistry, load_profiles

    registry = ProfileRegistry()
    if profiles is None:
        return registry
    if not profiles.is_file():
        raise click.UsageError(f"no such profiles file: {profiles}")
    try:
        for profile in load_profiles(profiles).values():
            registry.register(profile)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    return registry


def option_groups(**groups: type) -> Callable[[F], F]:
    """Gather a command's options into frozen dataclasses: ``name=Class`` passes the command
    ``name``, a ``Class`` made of the options named as its fields. The options stay declared
    one by one, so ``--help`` lists them in the order they are declared."""

    def decorate(function: F) -> F:
        @functools.wraps(function)
        def command(**values: Any) -> Any:
            for name, group in groups.items():
                values[name] = group(**{f.name: values.pop(f.name) for f in fields(group)})
            return function(**values)

        return command  # type: ignore[return-value]

    return decorate
