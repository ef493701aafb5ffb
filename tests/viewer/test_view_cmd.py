"""``kp view`` on the command line: start, serve, stop with Ctrl-C; what it refuses."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from knowledgepulse.cli import main

from ._running import kp_view
from .conftest import ViewFiles, write_jsonl


def test_serves_the_files_until_ctrl_c(view_files: ViewFiles) -> None:
    with (
        kp_view(view_files.all) as running,
        urllib.request.urlopen(running.url + "v1/stats") as response,
    ):
        stats = json.load(response)
    out, err = running.rest_of_output()

    assert (stats["traces"], stats["groups"]) == (5, 1)
    assert running.process.returncode == 0
    assert running.first_line == (
        f"kp view: 5 traces, 1 groups from 4 files (0 lines skipped) at {running.url}"
    )
    assert out.splitlines() == ["press Ctrl-C to stop", "stopped"]
    assert err == ""


def test_lines_it_cannot_show_are_listed_on_stderr(view_files: ViewFiles, tmp_path: Path) -> None:
    broken = write_jsonl(tmp_path / "broken.jsonl", [{"hello": 1}])

    with kp_view([str(view_files.scores), str(broken)]) as running:
        pass
    _, err = running.rest_of_output()

    assert running.first_line == (
        f"kp view: 5 traces, 0 groups from 2 files (1 lines skipped) at {running.url}"
    )
    assert err == f"{broken}:1: neither a kp score nor a kp eval record\n"


def test_nothing_to_view_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = write_jsonl(tmp_path / "broken.jsonl", [{"hello": 1}])

    code = main(["view", str(broken), "--no-open"])

    assert code == 1
    assert capsys.readouterr().err == (
        f"{broken}:1: neither a kp score nor a kp eval record\n"
        "kp: error: nothing to view in 1 files: no score, eval, trace or groups line\n"
    )


def test_a_busy_port_is_an_error_naming_it(
    view_files: ViewFiles, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]

        code = main(["view", str(view_files.scores), "--port", str(port), "--no-open"])

    assert code == 1
    assert capsys.readouterr().err == (
        f"kp: error: cannot listen on 127.0.0.1:{port}: Address already in use "
        "(--port 0 picks a free port)\n"
    )


def test_an_unset_key_variable_is_a_usage_error(
    view_files: ViewFiles, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KP_VIEW_TEST_KEY", raising=False)

    code = main(["view", str(view_files.scores), "--api-key-env", "KP_VIEW_TEST_KEY"])

    assert code == 2
    assert capsys.readouterr().err.splitlines() == [
        # The old spelling is still taken, with a note naming the one spelling of a key.
        "kp view: --api-key-env is deprecated: give --api-key-file PATH, or set "
        "KNOWLEDGEPULSE_API_KEY",
        "kp: error: --api-key-env KP_VIEW_TEST_KEY: the variable is not set (see 'kp view --help')",
    ]


def _status(url: str, key: str | None = None) -> int:
    request = urllib.request.Request(url)
    if key is not None:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code


def test_the_key_comes_from_a_file_else_the_variable(view_files: ViewFiles, tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("from-the-file\n# the first line is the key\n", encoding="utf-8")
    variable = {"KNOWLEDGEPULSE_API_KEY": "from-the-variable"}

    with kp_view([str(view_files.scores)], "--api-key-file", str(key_file), env=variable) as run:
        stats = run.url + "v1/stats"
        by_file = (
            _status(stats),
            _status(stats, "from-the-variable"),
            _status(stats, "from-the-file"),
        )
    with kp_view([str(view_files.scores)], env=variable) as run:
        stats = run.url + "v1/stats"
        by_variable = (_status(stats), _status(stats, "from-the-variable"))

    assert by_file == (401, 401, 200)
    assert by_variable == (401, 200)


def test_an_empty_key_file_is_a_usage_error(
    view_files: ViewFiles, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "key"
    empty.write_text("\n", encoding="utf-8")

    code = main(["view", str(view_files.scores), "--api-key-file", str(empty)])

    assert code == 2
    assert f"kp: error: --api-key-file {empty}: the file is empty" in capsys.readouterr().err


def test_the_old_and_new_key_options_together_are_a_usage_error(
    view_files: ViewFiles, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("k\n", encoding="utf-8")

    code = main(
        ["view", str(view_files.scores), "--api-key-file", str(key_file), "--api-key-env", "V"]
    )

    assert code == 2
    assert capsys.readouterr().err.splitlines()[1:] == [
        "kp: error: give --api-key-file or --api-key-env, not both (see 'kp view --help')"
    ]
