"""``kp view``: browse score / eval outputs, traces and curation groups in a web page."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import click

from .._errors import MissingDependencyError
from ..runs import EXIT_OK, MAX_REJECTIONS_SHOWN, stderr_console
from ._app import app
from ._options import (
    API_KEY_VARIABLE,
    PATHS_HELP,
    api_key_file_option,
    host_option,
    port_option,
    read_api_key,
)
from ._run import check_paths

if TYPE_CHECKING:
    from ..viewer import ViewerData

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
        "  kp view scores.jsonl evals.jsonl traces/ groups.jsonl --port 0 --no-open\n"
        "  kp view scores.jsonl --host 0.0.0.0 --api-key-file ~/.config/kp/key"
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
@api_key_file_option
# The old spelling: the name of a variable holding the key. Still taken, with a note, so that
# scripts keep working; --api-key-file PATH (else $KNOWLEDGEPULSE_API_KEY) is the one spelling.
@click.option("--api-key-env", "old_api_key_env", metavar="VAR", hidden=True, default=None)
def view_command(
    files: tuple[str, ...],
    host: str,
    port: int,
    open_browser: bool,
    api_key_file: Path | None,
    old_api_key_env: str | None,
) -> None:
    """Browse scored traces, their steps, rubric results and near-duplicates in a web page.

    With a key (--api-key-file, else $KNOWLEDGEPULSE_API_KEY) the API needs
    'Authorization: Bearer KEY' (the page asks for it once): for a --host others can reach.
    """
    from ..viewer import is_loopback, load_view_files

    api_key = _api_key(api_key_file, old_api_key_env)
    data = load_view_files(check_paths(files))
    console = stderr_console()
    for problem in (data.skipped + data.warnings)[:MAX_REJECTIONS_SHOWN]:
        console.print(problem, markup=False, highlight=False)
    if not data.traces and not data.groups:
        raise click.ClickException(
            f"nothing to view in {len(data.files)} files: no score, eval, trace or groups line"
        )
    # Ctrl-C is how the server stops, whenever it comes (even while starting): exit 0.
    try:
        with _serving(data, host, port, api_key) as url:
            click.echo(
                f"kp view: {len(data.traces)} traces, {len(data.groups)} groups from "
                f"{len(data.files)} files ({len(data.skipped)} lines skipped) at {url}"
            )
            if api_key is None and not is_loopback(host):
                console.print(
                    f"warning: listening on {host} without an API key (--api-key-file): "
                    "whoever reaches it can read every trace",
                    highlight=False,
                )
            if open_browser:
                _open(url)
            click.echo("press Ctrl-C to stop")
            while True:
                time.sleep(3600)
    except KeyboardInterrupt:
        click.echo("stopped")
    raise click.exceptions.Exit(EXIT_OK)


def _api_key(path: Path | None, old_variable: str | None) -> str | None:
    if old_variable is None:
        return read_api_key(path)[0]
    click.echo(
        "kp view: --api-key-env is deprecated: give --api-key-file PATH, or set "
        f"{API_KEY_VARIABLE}",
        err=True,
    )
    if path is not None:
        raise click.UsageError("give --api-key-file or --api-key-env, not both")
    api_key = os.environ.get(old_variable)
    if not api_key:
        raise click.UsageError(f"--api-key-env {old_variable}: the variable is not set")
    return api_key


@contextmanager
def _serving(data: ViewerData, host: str, port: int, api_key: str | None) -> Iterator[str]:
    """The page's URL while the files are served: by the service's application (the ``serve``
    extra), else by the standard library's server answering the same contract."""
    try:
        from ..service import (
            SOURCE_SETTINGS,
            FilesSource,
            create_source_app,
            server_in_thread,
        )
    except MissingDependencyError:
        from ..viewer import ViewerServer

        try:
            server = ViewerServer(data, host=host, port=port, api_key=api_key)
        except OSError as exc:
            raise _cannot_listen(host, port, exc) from None
        with server:
            yield server.url
        return
    from ..viewer import is_loopback

    settings = replace(SOURCE_SETTINGS, loopback_hosts_only=is_loopback(host))
    app = create_source_app(FilesSource(data), api_key=api_key, settings=settings)
    try:
        serving = server_in_thread(app, host, port)
        url = serving.__enter__()
    except OSError as exc:
        raise _cannot_listen(host, port, exc) from None
    try:
        yield url + "/"
    finally:
        serving.__exit__(None, None, None)


def _cannot_listen(host: str, port: int, exc: OSError) -> click.ClickException:
    reason = exc.strerror or str(exc)
    return click.ClickException(
        f"cannot listen on {host}:{port}: {reason} (--port 0 picks a free port)"
    )


def _open(url: str) -> None:
    # Without a display, webbrowser would start a text browser on this very terminal.
    no_display = not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    if sys.platform.startswith("linux") and no_display:
        click.echo(f"no display to open a browser on: open {url}")
        return
    import webbrowser

    webbrowser.open(url)
