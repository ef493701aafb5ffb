"""``kp keys`` and ``kp serve`` from the command line; ``kp serve`` as a real process."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from knowledgepulse.cli import main
from knowledgepulse.embedding import INSTALL_HINT, embedder_available

from .conftest import trace


def kp(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_keys_are_created_once_listed_without_secrets_and_revoked(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    base = str(tmp_path / "team.sqlite")
    code, out, err = kp(capsys, "keys", "create", "--kb", base, "--name", "ci", "--scope", "read")
    assert code == 0
    secret = out.strip()
    assert secret.startswith("kp_") and len(secret) > 40
    assert err == "key ci (read) created; it is shown only now: keep it\n"
    code, _, err = kp(capsys, "keys", "create", "--kb", base, "--name", "ci", "--scope", "read")
    assert (code, err) == (
        2,
        "kp: error: a key named 'ci' exists already (see 'kp keys create --help')\n",
    )
    code, out, _ = kp(capsys, "keys", "list", "--kb", base, "--json")
    (row,) = json.loads(out)
    assert (row["name"], row["scope"], row["org"], row["revoked_at"]) == ("ci", "read", None, None)
    assert secret not in out and secret.split("_", 2)[2] not in Path(base).read_bytes().decode(
        "latin-1"
    )
    assert kp(capsys, "keys", "revoke", "ci", "--kb", base)[:2] == (0, "key ci revoked\n")
    assert kp(capsys, "keys", "revoke", "ci", "--kb", base)[0] == 2


def test_serve_refuses_to_run_without_the_embedder(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    base = str(tmp_path / "team.sqlite")
    code, _, err = kp(capsys, "serve", "--kb", base, "--no-embed")
    assert (code, err.split(" (see")[0]) == (
        2,
        "kp: error: --kb compares embeddings: kp serve cannot run with --no-embed",
    )
    code, _, err = kp(capsys, "serve", "--kb", base)  # the tests turn the embedder off
    assert code == 2 and err.startswith("kp: error: kp serve needs the embedder")


def test_serve_threads_are_threads_and_the_old_workers_name_still_works(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """--workers means processes elsewhere; kp serve's threads are --threads."""
    base = str(tmp_path / "team.sqlite")
    code, out, _ = kp(capsys, "serve", "--help")
    assert code == 0
    assert "--threads N" in out and "--workers" not in out
    code, _, err = kp(capsys, "serve", "--kb", base, "--workers", "2", "--no-embed")
    assert code == 2
    assert err.startswith("kp serve: --workers is now --threads (threads, not processes)\n")
    code, _, err = kp(capsys, "serve", "--kb", base, "--workers", "2", "--threads", "3")
    assert (code, err.split(" (see")[0]) == (
        2,
        "kp: error: --workers is the old name of --threads: give only --threads",
    )


@pytest.mark.embedder
@pytest.mark.slow
@pytest.mark.skipif(not embedder_available(), reason=f"needs the embedder ({INSTALL_HINT})")
def test_kp_serve_as_a_process_stops_on_sigterm_and_restarts_with_its_traces(
    tmp_path: Path,
) -> None:
    base = str(tmp_path / "team.sqlite")
    env = {key: value for key, value in os.environ.items() if key != "KNOWLEDGEPULSE_EMBEDDER"}
    created = subprocess.run(
        [
            sys.executable,
            "-m",
            "knowledgepulse",
            "keys",
            "create",
            "--kb",
            base,
            "--name",
            "me",
            "--scope",
            "contribute",
        ],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    headers = {"Authorization": f"Bearer {created.stdout.strip()}"}

    def start() -> tuple[subprocess.Popen[str], str]:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        process = subprocess.Popen(
            [sys.executable, "-m", "knowledgepulse", "serve", "--kb", base, "--port", str(port)],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and process.poll() is None:
            try:
                if httpx.get(f"{url}/healthz").status_code == 200:
                    return process, url
            except httpx.HTTPError:
                time.sleep(0.2)
        process.kill()
        raise AssertionError(
            f"kp serve did not start: {process.stderr.read() if process.stderr else ''}"
        )

    process, url = start()
    health = httpx.get(f"{url}/healthz").json()
    assert health["embedder"]["dimensions"] == 384 and health["status"] == "ok"
    posted = httpx.post(f"{url}/v1/traces", json=trace("kp:trace:1"), headers=headers, timeout=30)
    assert posted.status_code == 201, posted.text
    process.send_signal(signal.SIGTERM)
    assert process.wait(30) == 0
    process, url = start()
    try:
        again = httpx.get(f"{url}/v1/traces/kp:trace:1", headers=headers)
        assert again.status_code == 200
        assert again.json()["record"]["stored"] == "added"
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)


def test_the_startup_lines_name_the_viewer_and_how_to_make_a_key() -> None:
    """Issue 37 item 4: the start-up line pointed to /docs, not the viewer at /, and a fresh
    base gave no hint that a key must be created."""
    from knowledgepulse.cli._serve_cmd import startup_lines

    common: dict[str, Any] = dict(
        location="team.sqlite",
        traces=230,
        threshold=0.5,
        embedder="HashingEmbedder",
        redaction="on",
        host="127.0.0.1",
        port=8750,
    )
    assert startup_lines(**common, live_keys=0) == [
        "kp serve: team.sqlite (230 traces, threshold 0.5), embedder HashingEmbedder, redaction on",
        "kp serve: viewer http://127.0.0.1:8750/ · API http://127.0.0.1:8750/v1 (pages "
        "http://127.0.0.1:8750/docs) · MCP http://127.0.0.1:8750/mcp",
        "kp serve: the base has no API key yet, and everything but /healthz needs one: kp keys "
        "create --kb team.sqlite --name NAME --scope read|contribute|admin",
    ]
    assert len(startup_lines(**common, live_keys=1)) == 2
    assert startup_lines(**{**common, "host": "::1"}, live_keys=1)[1].startswith(
        "kp serve: viewer http://[::1]:8750/"
    )
