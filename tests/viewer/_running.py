"""Running ``kp view`` as a user does: a process, on loopback, on a free port; with the
``serve`` extra (the service's application) or as where it is absent (the stdlib server)."""

from __future__ import annotations

import os
import re
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SRC = Path(__file__).resolve().parents[2] / "src"
URL = re.compile(r" at (http://127\.0\.0\.1:\d+/)$")
#: ``kp view`` where the ``serve`` extra is not installed: fastapi and uvicorn cannot be imported.
WITHOUT_SERVE_EXTRA = (
    "import sys; sys.modules.update(fastapi=None, uvicorn=None); "
    "from knowledgepulse.cli import main; sys.exit(main(sys.argv[1:]))"
)
#: How kp view is started: the service's application, or the stdlib fallback server.
SERVERS = ("app", "stdlib")


@dataclass(frozen=True)
class Running:
    url: str
    first_line: str  # what kp view said when it started listening
    process: subprocess.Popen[str]

    def rest_of_output(self) -> tuple[str, str]:
        """stdout after the first line, and stderr, once the process has ended.

        Read through the same buffered streams as the first line (communicate() would skip
        what the buffer already holds).
        """
        self.process.wait(timeout=10)
        assert self.process.stdout is not None and self.process.stderr is not None
        return self.process.stdout.read(), self.process.stderr.read()


@contextmanager
def kp_view(
    files: Sequence[str], *options: str, env: dict[str, str] | None = None, server: str = "app"
) -> Iterator[Running]:
    """Start ``kp view FILES --port 0 --no-open``; stop it with SIGINT (Ctrl-C) on leaving.

    ``server="stdlib"``: as where the ``serve`` extra is absent (fastapi cannot be imported).
    """
    environment = {**os.environ, "PYTHONPATH": str(SRC), **(env or {})}
    start = ["-m", "knowledgepulse"] if server == "app" else ["-c", WITHOUT_SERVE_EXTRA]
    process = subprocess.Popen(
        [
            sys.executable,
            *start,
            "view",
            *files,
            "--port",
            "0",
            "--no-open",
            *options,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
        # Ctrl-C as a terminal delivers it: a suite started in the background of a
        # non-interactive shell (``make test &``) ignores SIGINT, every child inherited that,
        # and kp view never stopped (killed after the wait: exit -9).
        preexec_fn=_default_sigint,
    )
    try:
        url, first_line = _url_of(process)
        yield Running(url, first_line, process)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                # 30 s, not 10: late in a full suite on 2 busy cores, a clean Ctrl-C stop once
                # took longer than 10 s and the kill turned it into exit -9.
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _url_of(process: subprocess.Popen[str]) -> tuple[str, str]:
    """The URL and the line that gave it (printed once the server listens)."""
    assert process.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if selector.select(timeout=0.5):
            line = process.stdout.readline()
            found = URL.search(line.rstrip("\n"))
            if found:
                return found.group(1), line.rstrip("\n")
            if not line and process.poll() is not None:
                break
    stderr = process.stderr.read() if process.poll() is not None and process.stderr else ""
    raise AssertionError(f"kp view did not print its URL (exit {process.poll()}): {stderr}")


@dataclass(frozen=True)
class Served:
    url: str  # the page's address, ending in /


@contextmanager
def served(data: Any, server: str, api_key: str | None = None) -> Iterator[Served]:
    """``data`` (``load_view_files``) served in this process on loopback, as kp view serves it:
    the service's application over a ``FilesSource`` (``server="app"``), or the stdlib
    fallback server (``"stdlib"``)."""
    if server == "stdlib":
        from knowledgepulse.viewer import ViewerServer

        with ViewerServer(data, api_key=api_key) as running:
            yield Served(running.url)
        return
    import pytest

    pytest.importorskip("fastapi")
    from knowledgepulse.service import FilesSource, create_source_app, server_in_thread

    with server_in_thread(create_source_app(FilesSource(data), api_key=api_key)) as url:
        yield Served(url + "/")
