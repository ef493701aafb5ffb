"""Facts of real trace files that ``kp import`` lost (issue 36), each on the real file or an
excerpt of it under ``tests/data/importers/<format>/`` (origin and licence in its
``SOURCE.md``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from knowledgepulse.cli import main
from knowledgepulse.importers import read_traces_from_paths

from ._util import DATA

OLD_SWE_AGENT = [
    DATA / "swe_agent" / "swe-agent__test-repo-i1.traj",
    DATA / "swe_agent" / "networking_1.traj",
    DATA / "swe_agent" / "humanevalfix-python-0.traj",
]


def _traces(path: Path, fmt: str = "auto") -> list:
    return [t for unit in read_traces_from_paths([str(path)], fmt) for t in unit.traces]


# -- identity ----------------------------------------------------------------------------------


def test_old_swe_agent_trajectories_keep_distinct_ids() -> None:
    """SWE-agent 0.x writes ``environment: "swe_main"`` (the Docker image) in every .traj: it
    names no run, so three runs must not share the id it gave."""
    ids = [t.id for path in OLD_SWE_AGENT for t in _traces(path)]
    assert len(ids) == 3
    assert len(set(ids)) == 3
    assert "kp:trace:swe-agent:swe_main" not in ids
    for path in OLD_SWE_AGENT:
        (trace,) = _traces(path)
        assert trace.to_dict()["metadata"]["kp_import"]["environment"] == "swe_main"


# -- wrong format, silent loss ------------------------------------------------------------------


@pytest.mark.parametrize("name", ["anthropic_messages.json", "anthropic_payloads.json"])
def test_an_anthropic_messages_file_named_openai_is_refused_saying_use_anthropic(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--from openai`` read only the text parts of Anthropic messages: the tool_use and
    tool_result blocks (and the recovery after a failed result) were dropped, exit 0."""
    out = tmp_path / "o.jsonl"
    code = main(["import", str(DATA / name), "--from", "openai", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 1
    assert out.read_text() == ""
    assert "is an Anthropic content block" in err
    assert "it looks like anthropic: use --from anthropic" in err
    assert err.count("use --from") == 1
