"""Facts of real trace files that ``kp import`` lost (issue 36), each on the real file or an
excerpt of it under ``tests/data/importers/<format>/`` (origin and licence in its
``SOURCE.md``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from knowledgepulse import ReasoningTrace
from knowledgepulse.cli import main
from knowledgepulse.importers import read_traces_from_paths

from ._util import DATA

OLD_SWE_AGENT = [
    DATA / "swe_agent" / "swe-agent__test-repo-i1.traj",
    DATA / "swe_agent" / "networking_1.traj",
    DATA / "swe_agent" / "humanevalfix-python-0.traj",
]


def _traces(path: Path, fmt: str = "auto") -> list[ReasoningTrace]:
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


# -- non-run traces in a span file ---------------------------------------------------------------

VERCEL_ALL_SPANS = DATA / "otel" / "all-spans.json"
EMBED_TRACES = ("045d21a7f69972edf509fe0ff911f3f5", "91621bbaaf1920e94ae594e91b3a99fd")


def test_embedding_traces_in_a_span_file_are_counted_and_named_not_rejected(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The Vercel AI SDK dump holds 8 runs and 2 ``ai.embed`` traces: a trace with no model,
    agent or tool span is not a run; it is named in the summary, and the import exits 0."""
    out = tmp_path / "o.jsonl"
    code = main(["import", str(VERCEL_ALL_SPANS), "--from", "auto", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert len(out.read_text().splitlines()) == 8
    assert "records in: 10 = processed 10 + rejected 0; traces written: 8" in err
    for otel_id in EMBED_TRACES:
        assert f"trace {otel_id}: not a run" in err
    assert "ai.embed" in err
    assert "no agent steps" not in err


def test_the_units_of_non_run_traces_name_them() -> None:
    units = list(read_traces_from_paths([str(VERCEL_ALL_SPANS)], "otel"))
    assert [u.problems for u in units] == [[]] * 10
    named = [note for u in units for note in u.not_runs]
    assert named == [
        "trace 045d21a7f69972edf509fe0ff911f3f5: not a run (spans: ai.embed.doEmbed; "
        "no model, agent or tool span)",
        "trace 91621bbaaf1920e94ae594e91b3a99fd: not a run (spans: ai.embed; "
        "no model, agent or tool span)",
    ]
    assert sum(len(u.traces) for u in units) == 8
