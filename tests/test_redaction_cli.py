"""``kp redact`` as a user runs it: files in, redacted traces and counts out, rejects kept."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from _helpers import WORKED_EXAMPLE
from knowledgepulse.cli import main

DATA = Path(__file__).parent / "data"
STRIPE = "sk_" + "live_" + "4eC39HqLyjWDarjtT1zdp7dc"


def kp(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _trace(number: int, objective: str, level: str) -> dict[str, Any]:
    trace = copy.deepcopy(WORKED_EXAMPLE)
    trace["id"] = f"kp:trace:redact-{number}"
    trace["metadata"]["privacy_level"] = level
    trace["task"]["objective"] = objective
    return trace


@pytest.fixture
def traces_file(tmp_path: Path) -> Path:
    path = tmp_path / "traces.jsonl"
    records = [
        _trace(1, f"Charge with {STRIPE}, receipt to ana@example.com", "federated"),
        _trace(2, "Block 203.0.113.5 for bob@example.com", "private"),
    ]
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path


def test_redact_writes_redacted_traces_and_counts_per_kind(
    capsys: pytest.CaptureFixture[str], traces_file: Path, tmp_path: Path
) -> None:
    out_path = tmp_path / "redacted.jsonl"
    code, out, err = kp(capsys, "redact", str(traces_file), "-o", str(out_path))
    assert (code, out) == (0, "")
    assert err.splitlines() == [
        "records in: 2 = processed 2 + rejected 0; traces written: 2",
        "redacted: email 2, ip_address 1, stripe 1",
    ]
    rows = [json.loads(line) for line in out_path.read_text().splitlines()]
    assert [row["task"]["objective"] for row in rows] == [
        "Charge with [API_KEY:stripe], receipt to [EMAIL]",
        "Block [IP_ADDRESS] for [EMAIL]",
    ]
    assert [row["metadata"]["kp_redaction"] for row in rows] == [
        {"policy": "federated", "counts": {"email": 1, "stripe": 1}},
        {"policy": "private", "counts": {"email": 1, "ip_address": 1}},
    ]


def test_policy_option_applies_one_level_to_every_trace(
    capsys: pytest.CaptureFixture[str], traces_file: Path
) -> None:
    code, out, err = kp(capsys, "redact", str(traces_file), "--policy", "federated")
    assert code == 0
    objectives = [json.loads(line)["task"]["objective"] for line in out.splitlines()]
    assert objectives[1] == "Block 203.0.113.5 for [EMAIL]"
    assert err.splitlines()[-1] == "redacted: email 2, stripe 1"


def test_redact_reads_agent_logs_with_from(capsys: pytest.CaptureFixture[str]) -> None:
    sample = DATA / "tau_bench_sample.json"
    code, out, err = kp(capsys, "redact", "--from", "openai", str(sample))
    assert code == 0
    assert len(out.splitlines()) == 4
    assert err.splitlines() == [
        "records in: 4 = processed 4 + rejected 0; traces written: 4",
        "redacted: date_of_birth 15, email 1",
    ]


def test_invalid_records_are_rejected_and_the_rest_redacted(
    capsys: pytest.CaptureFixture[str], traces_file: Path, tmp_path: Path
) -> None:
    with traces_file.open("a") as handle:
        handle.write('{"@type": "ReasoningTrace"}\n')
    rejects = tmp_path / "rejects.jsonl"
    code, out, err = kp(capsys, "redact", str(traces_file), "--rejects", str(rejects), "-q")
    assert code == 1
    assert err.splitlines()[0] == f"{traces_file}:3: @context: required field is missing"
    assert len(out.splitlines()) == 2
    assert [json.loads(line)["line"] for line in rejects.read_text().splitlines()] == [3]


def test_an_unknown_level_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], traces_file: Path
) -> None:
    code, out, err = kp(capsys, "redact", str(traces_file), "--policy", "public")
    assert (code, out) == (2, "")
    assert "'public' is not one of 'federated', 'aggregated', 'private'" in err


def test_kp_redact_looks_inside_the_tool_object(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Issue 22 item 2: ``kp redact`` skipped the step's tool object, as redact_trace did."""
    record = _trace(3, "Query the orders", "federated")
    record["steps"][1]["tool"] = {
        "name": "github_pr_read",
        "config": {"api_key": STRIPE},
        "mcp_server": "postgres://app:hunter22@db.internal/app",
    }
    path = tmp_path / "tool.jsonl"
    path.write_text(json.dumps(record) + "\n")
    code, out, err = kp(capsys, "redact", str(path))
    assert code == 0
    assert json.loads(out)["steps"][1]["tool"] == {
        "name": "github_pr_read",
        "config": {"api_key": "[API_KEY:stripe]"},
        "mcp_server": "postgres://app:[PASSWORD]@db.internal/app",
    }
    assert err.splitlines()[-1] == "redacted: stripe 1, url_password 1"
