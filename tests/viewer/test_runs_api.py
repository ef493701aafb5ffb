"""GET /v1/runs/compare (kp view only): two files of eval lines compared, and what it refuses."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from knowledgepulse.compare import EvaluationComparison

from ._running import kp_view
from .conftest import ALPHA, ViewFiles


def get(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def test_runs_are_compared_by_file(view_files: ViewFiles, tmp_path: Path) -> None:
    from .test_compare_browser import run_line, write_runs

    before, after = write_runs(tmp_path)
    other = tmp_path / "other-rubric.jsonl"
    other.write_text(json.dumps(run_line(ALPHA, True, "successful_completion", "mine")) + "\n")
    with kp_view([str(view_files.traces), before, after, str(other)]) as running:
        ask = running.url + "v1/runs/compare?"
        status, body = get(ask + urlencode({"a": before, "b": after}))
        assert status == 200
        comparison = EvaluationComparison.model_validate(body)
        assert (comparison.paired, comparison.cases_regressed) == (2, [ALPHA])
        assert [k.name for k in comparison.criteria if k.dropped] == ["y"]
        status, body = get(ask + urlencode({"a": before, "b": str(view_files.traces)}))
        assert (status, body) == (
            404,
            {"detail": f"no kp eval lines read from {view_files.traces}", "problems": []},
        )
        status, body = get(ask + urlencode({"a": before, "b": str(other)}))
        assert status == 422
        assert body["detail"] == (
            f"{before} was graded with rubric 'agent' and {other} with rubric 'mine': "
            "results of different rubrics are not compared"
        )
        status, body = get(ask + urlencode({"a": before}))
        assert (status, body["detail"]) == (422, "b: expected a file of kp eval lines")
        status, body = get(ask + urlencode({"a": before, "b": after, "by": "task"}))
        assert status == 422 and "the line names no task" in body["detail"]
