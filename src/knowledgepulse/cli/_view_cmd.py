"""``kp view``: browse score / eval outputs, traces and curation groups in a web page."""

from __future__ import annotations

import os
import sys

import click

from ..runs import EXIT_OK, MAX_REJECTIONS_SHOWN, stderr_console
from ._app import app
from ._options import PATHS_HELP, host_option, port_option
from ._run import check_paths

DEFAULT_PORT = 8751


@app.command(
    "view",
    epilog=(
        PATHS_HELP + "\n\b\nEach line is recognised by its shape: kp score and kp eval lines,\n"
        "ReasoningTraces (their steps) and kp curate --groups lines. Search matches\n"
        "words in trace ids and objectives (no embedder is loaded). Stop with Ctrl-C.\n\n"
        "\b\nExamples:\n"
        "  kp score examples/traces.jsonl -o scores.jsonl\n"
        "  kp view scores.jsonl examples/traces.jsonl\n"
        "  kp view scores.jsonl evals.jsonl traces/ groups.jsonl --port 0 --no-open"
    ),
)
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@host_option
@port_option(DEFAULT_PORT)
@click.option(
    "--open/--no-open",
    "open_browser",
    default=True,
    show_default=True,
    help="Open the page in a web browser.",
)
@click.option(
    "--api-key-env",
    metavar="VAR",
    help="Require 'Authorization: Bearer KEY' on the API, KEY read from this environment "
    "variable (the page asks for it once). For a --host others can reach.",
)
def view_command(
    files: tuple[str, ...], host: str, port: int, open_browser: bool, api_key_env: str | None
) -> None:
    """Browse scored traces, their steps, rubric results and near-duplicates in a web page."""
    from ..viewer import ViewerServer, load_view_files

    api_key = None
    if api_key_env is not None:
        api_key = os.environ.get(api_key_env)
        if not api_key:
            raise click.UsageError(f"--api-key-env {api_key_env}: the variable is not set")
    data = load_view_files(check_paths(files))
    console = stderr_console()
    for problem in (data.skipped + data.warnings)[:MAX_REJECTIONS_SHOWN]:
        console.print(problem, markup=False, highlight=False)
    if not data.traces and not data.groups:
        raise click.ClickException(
            f"nothing to view in {len(data.files)} files: no score, eval, trace or groups line"
        )
    try:
        server = ViewerServer(data, host=host, port=port, api_key=api_key)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise click.ClickException(
            f"cannot listen on {host}:{port}: {reason} (--port 0 picks a free port)"
        ) from None
    # Ctrl-C is how the server stops, whenever it comes (even while starting): exit 0.
    try:
        with server:
            click.echo(
                f"kp view: {len(data.traces)} traces, {len(data.groups)} groups from "
                f"{len(data.files)} files ({len(data.skipped)} lines skipped) at {server.url}"
            )
            if api_key is None and not server.loopback:
                console.print(
                    f"warning: listening on {host} without --api-key-env: whoever reaches it "
                    "can read every trace",
                    highlight=False,
                )
            if open_browser:
                _open(server.url)
            click.echo("press Ctrl-C to stop")
            server.wait()
    except KeyboardInterrupt:
        click.echo("stopped")
    raise click.exceptions.Exit(EXIT_OK)


def _open(url: str) -> None:
    # Without a display, webbrowser would start a text browser on this very terminal.
    no_display = not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    if sys.platform.startswith("linux") and no_display:
        click.echo(f"no display to open a browser on: open {url}")
        return
    import webbrowser

    webbrowser.open(url)
