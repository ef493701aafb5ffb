"""The ``kp`` group; each command lives in its own module and registers itself here.

A command's module is imported when that command runs or shows its help, not before: ``kp
--help`` lists the commands from :data:`COMMANDS` and imports none of them.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any

import click

from .. import __version__

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}

#: Each command: the module that defines it (and registers it on ``app``), and its one-line
#: help as ``kp --help`` lists it (a test checks it is the command's own).
COMMANDS: dict[str, tuple[str, str]] = {
    "curate": (
        "._curate_cmd",
        "Drop copies: keep the most valuable trace of each group of copies, whatever the order.",
    ),
    "diff": (
        "._diff_cmd",
        "Compare two runs: where two traces parted and which criteria flipped, or two evaluations.",
    ),
    "eval": (
        "._eval_cmd",
        "Grade cases with a rubric of weighted yes/no criteria; print the report.",
    ),
    "import": (
        "._import_cmd",
        "Convert agent logs (OpenAI, Anthropic, OpenTelemetry, LangSmith, ATIF…) to "
        "ReasoningTraces.",
    ),
    "kb": (
        "._kb_cmd",
        "Look into a knowledge base: stats, search, similar traces, show, export, import, check.",
    ),
    "keys": (
        "._keys_cmd",
        "API keys for kp serve: create (shown once, stored hashed), list, revoke.",
    ),
    "mcp": (
        "._mcp_cmd",
        "Serve a knowledge base to an MCP client over stdio: search, read and contribute traces.",
    ),
    "redact": (
        "._redact_cmd",
        "Replace secrets and personal data in traces by typed placeholders ([EMAIL], "
        "[API_KEY:openai]…).",
    ),
    "report": (
        "._report_cmd",
        "One self-contained HTML report (plots, no network needed) from kp score / kp eval "
        "outputs.",
    ),
    "schema": (
        "._schema_cmd",
        "Print the JSON Schema of a ReasoningTrace (trace), a kp score line, a kp eval line, a "
        "kp curate --groups line or a kp diff --json document (diff).",
    ),
    "score": (
        "._score_cmd",
        "Score ReasoningTraces: one JSON line per trace with the score and its breakdown.",
    ),
    "serve": (
        "._serve_cmd",
        "Serve a knowledge base over HTTP: score, contribute, search and read traces.",
    ),
    "static-model": (
        "._static_cmd",
        "Build or check the static embedder's token table, derived from the shipped MiniLM.",
    ),
    "validate": (
        "._validate_cmd",
        "Check records against the schema; list each problem as file:line: field.path: problem.",
    ),
    "view": (
        "._view_cmd",
        "Browse scored traces, their steps, rubric results and near-duplicates in a web page.",
    ),
}


class LazyGroup(click.Group):
    """A group whose commands are imported on first use (see :data:`COMMANDS`)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.commands) | set(COMMANDS))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            import_module(COMMANDS[cmd_name][0], __package__)  # registers the command
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][1]) for name in sorted(COMMANDS)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(
    cls=LazyGroup,
    context_settings=CONTEXT_SETTINGS,
    epilog=(
        "\b\nExamples:\n"
        "  kp score examples/traces.jsonl --threshold 0.6 --accepted keep.jsonl\n"
        "  kp eval examples/scheduling.jsonl --rubric scheduling\n"
        "  kp validate logs/\n"
        "  kp import --from openai conversations.json -o traces.jsonl\n"
        "  kp report scores.jsonl evals.jsonl -o report.html\n"
        "  kp curate traces.jsonl -o kept.jsonl --groups groups.jsonl\n"
        "  kp kb stats --kb team.sqlite\n"
        "  kp schema score"
    ),
)
@click.version_option(
    __version__, "--version", prog_name="kp (knowledgepulse)", message="%(prog)s %(version)s"
)
def app() -> None:
    """Keep the agent traces worth keeping, and grade how well agents did."""


class EpilogWhenShown(click.Command):
    """A command whose epilog is written only when its help is shown.

    For an epilog that needs heavy imports (the importers' list of formats): ``kp --help`` and
    every other command start without them.
    """

    def __init__(self, *args: Any, epilog_from: Callable[[], str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._epilog_from = epilog_from

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        if self.epilog is None:
            self.epilog = self._epilog_from()
        super().format_epilog(ctx, formatter)
