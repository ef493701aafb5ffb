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
