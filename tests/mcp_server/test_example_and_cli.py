"""``kp mcp`` from the command line, and the agent-loop example run as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from knowledgepulse.cli import main
from knowledgepulse.embedding import INSTALL_HINT, embedder_available

ROOT = Path(__file__).resolve().parents[2]


def test_kp_mcp_needs_the_embedder(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code = main(["mcp", "--kb", str(tmp_path / "kb.sqlite")])  # the tests turn it off
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("kp: error: kp mcp searches by embedding and needs the embedder:")


def test_kp_mcp_refuses_a_key_the_base_does_not_know(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not embedder_available():
        pytest.skip(f"needs the embedder ({INSTALL_HINT})")
    monkeypatch.delenv("KNOWLEDGEPULSE_EMBEDDER")
    key_file = tmp_path / "key"
    key_file.write_text("kp_x_y\n")
    code = main(["mcp", "--kb", str(tmp_path / "kb.sqlite"), "--api-key-file", str(key_file)])
    err = capsys.readouterr().err
    assert code == 2
    assert f"--api-key-file {key_file}: not a valid key of this base (unknown or revoked)" in err
    monkeypatch.setenv("KNOWLEDGEPULSE_API_KEY", "kp_x_z")
    assert main(["mcp", "--kb", str(tmp_path / "kb.sqlite")]) == 2
    err = capsys.readouterr().err
    assert "$KNOWLEDGEPULSE_API_KEY: not a valid key of this base (unknown or revoked)" in err


def test_kp_mcp_takes_no_key_in_its_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    """Finding 9 of issue 37: ``--api-key KEY`` put the key in argv, readable by any local
    user (ps, /proc/PID/cmdline). Refused before anything is opened, saying where it goes."""
    assert main(["mcp", "--kb", "unused.sqlite", "--api-key", "kp_x_y"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        "kp: error: --api-key puts the key in the command line, where every local user can "
        "read it (ps): give --api-key-file PATH, or set KNOWLEDGEPULSE_API_KEY"
    )
    assert "kp_x_y" not in err
    assert main(["mcp", "--kb", "unused.sqlite", "--api-key-file", "/nonexistent/key"]) == 2
    assert "--api-key-file /nonexistent/key: cannot read it" in capsys.readouterr().err


@pytest.mark.embedder
@pytest.mark.slow
@pytest.mark.skipif(not embedder_available(), reason=f"needs the embedder ({INSTALL_HINT})")
def test_the_agent_loop_example_recalls_then_contributes(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key != "KNOWLEDGEPULSE_EMBEDDER"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "mcp_agent_loop.py"), str(tmp_path / "kb.sqlite")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 7, done.stdout
    assert lines[0].startswith("seeded: 30 traces contributed, ")
    # Run 1 recalls the two stored damaged-item refunds first, and skips the policy check.
    recalled = lines[1].removeprefix("run 1: recalled 3 examples: ").split(", ")
    assert {item.split(" ")[0] for item in recalled[:2]} == {
        "kp:trace:refund-damaged-a10482",
        "kp:trace:refund-damaged-a10597",
    }
    assert lines[2].startswith("run 1: 3 model calls, 5 steps: Refunded $89.00")
    assert lines[3].startswith("run 1: contributed kp:trace:openai:chatcmpl-1: score ")
    # Run 2 recalls run 1 first, and its contribution is reported as run 1's duplicate.
    assert lines[4].startswith("run 2: recalled 3 examples: kp:trace:openai:chatcmpl-1 (")
    assert lines[6].endswith("duplicate of kp:trace:openai:chatcmpl-1 (1.00)")


def test_kp_serve_answers_its_own_address_and_the_allowed_hosts() -> None:
    from knowledgepulse.cli._serve_cmd import _mcp_hosts

    assert _mcp_hosts("127.0.0.1", ()) == ("127.0.0.1",)
    assert _mcp_hosts("0.0.0.0", ()) == ()  # a wildcard is no name a client uses
    assert _mcp_hosts("0.0.0.0", ("kb.example.org",)) == ("kb.example.org",)
    assert _mcp_hosts("10.0.0.5", ("kb.example.org",)) == ("kb.example.org", "10.0.0.5")
    assert _mcp_hosts("fd00::5", ()) == ("[fd00::5]",)
