"""The compare page in headless Chromium, on a running ``kp view``: two tau-bench attempts side
by side (flipped criteria on top, the parting row marked), picking two traces in the form,
"compare with nearest" from a trace page, and an id that was not read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from _helpers import TAU_BENCH

from ._running import kp_view
from .conftest import ALPHA, ALPHA_AGAIN, BETA, ViewFiles
from .test_viewer_browser import Browser, chromium  # noqa: F401  (the fixture)

pytestmark = pytest.mark.browser

TRIAL = "kp:trace:openai:tau-bench:task-0:trial-"


def tau_bench_attempts(tmp_path: Path) -> str:
    from knowledgepulse.importers import ImportOptions, read_traces_from_paths

    wanted = {TRIAL + "0", TRIAL + "1"}
    found = []
    for conversion in read_traces_from_paths([str(TAU_BENCH)], "openai", ImportOptions()):
        found += [t for t in conversion.traces if t.id in wanted]
        if len(found) == 2:
            break
    path = tmp_path / "attempts.jsonl"
    path.write_text("".join(json.dumps(t.to_dict()) + "\n" for t in found))
    return str(path)


def test_two_attempts_side_by_side(chromium: tuple[Any, Any], tmp_path: Path) -> None:  # noqa: F811
    with kp_view([tau_bench_attempts(tmp_path)]) as running:
        browser = Browser(chromium, running.url)
        page = browser.page
        page.goto(f"{running.url}#/compare", wait_until="load")
        page.locator("#compare-form").wait_for()
        assert page.locator("h1").inner_text() == "Compare two traces"
        page.get_by_label("Trace A (before)").fill(TRIAL + "0")
        page.get_by_label("Trace B (after)").fill(TRIAL + "1")
        page.get_by_role("button", name="Compare", exact=True).click()
        page.locator("table.aligned tbody tr").first.wait_for()
        where = browser.shot(tmp_path / "compare.png")
        # The flipped criteria come first, before the side-by-side rows.
        headings = page.locator("main h2").all_inner_texts()
        assert headings == ["Flipped criteria", "Calls", "Side by side"], where
        flip = page.locator('table.flipped tr[data-criterion="confirmed_before_write"]')
        cells = flip.locator("td").all_inner_texts()
        assert cells[0] == "regressed", where
        assert cells[2] == (
            "failed: book_reservation at steps 15, 19 without the user's consent since the proposal; "
            "book_reservation at step 15 pays with 'certificate_4856383' (payment_methods), a means "
            "of payment no user turn named; book_reservation at step 19 pays with "
            "'certificate_4856383' (payment_methods), a means of payment no user turn named"
        ), where
        parting = page.locator("#parting-row")
        assert parting.count() == 1, where
        assert parting.get_attribute("data-relation") == "different", where
        assert parting.get_attribute("aria-current") == "step", where
        assert parting.locator("td").all_inner_texts()[:2] == ["parted here · # different", "0"]
        assert page.locator("table.aligned tbody tr").count() == 32, (
            where
        )  # as compare_traces aligns them
        facts = page.locator("dl.facts").inner_text()
        assert "First call that differs" in facts and "step 4 of A, step 4 of B" in facts, where
        assert "payment_methods[0].amount: 250 → 100" in page.locator("ul.calls").inner_text()
        assert browser.errors == [] and browser.foreign_requests() == [], where


def test_compare_with_nearest_and_a_missing_id(
    chromium: tuple[Any, Any],  # noqa: F811
    view_files: ViewFiles,
    tmp_path: Path,
) -> None:
    with kp_view(view_files.all) as running:
        browser = Browser(chromium, running.url)
        page = browser.page
        page.goto(f"{running.url}#/trace/{quote(ALPHA_AGAIN, safe='')}", wait_until="load")
        page.locator("#compare-nearest").click()
        page.locator("table.aligned tbody tr").first.wait_for()
        where = browser.shot(tmp_path / "nearest.png")
        assert f"a={quote(ALPHA_AGAIN, safe='')}" in page.url, where
        assert f"b={quote(ALPHA, safe='')}" in page.url, where
        assert page.locator("#compare-b").input_value() == ALPHA, where
        # The same steps: nothing parted, no row marked.
        assert page.locator("#parting-row").count() == 0, where
        assert "Parted at" in page.locator("dl.facts").inner_text(), where
        page.goto(f"{running.url}#/compare?a={quote(ALPHA)}&b=kp%3Atrace%3Anope", wait_until="load")
        error = page.locator("#error")
        error.wait_for()
        assert error.inner_text() == "no trace kp:trace:nope", browser.shot(tmp_path / "404.png")
        assert browser.foreign_requests() == []


def run_line(case_id: str, y: bool, outcome: str, rubric: str = "agent") -> dict[str, Any]:
    return {
        "schema": "knowledgepulse.eval/1",
        "rubric": rubric,
        "case_id": case_id,
        "score": 1.0 if y else 0.5,
        "details": {"x": True, "y": y},
        "weights": {"x": 0.5, "y": 0.5},
        "outcome_type": outcome,
        "explanation": "",
    }


def write_runs(tmp_path: Path) -> tuple[str, str]:
    before, after = tmp_path / "run-a.jsonl", tmp_path / "run-b.jsonl"
    before.write_text(
        json.dumps(run_line(ALPHA, True, "successful_completion"))
        + "\n"
        + json.dumps(run_line(BETA, False, "graceful_failure"))
        + "\n"
    )
    after.write_text(
        json.dumps(run_line(ALPHA, False, "graceful_failure"))
        + "\n"
        + json.dumps(run_line(BETA, False, "graceful_failure"))
        + "\n"
    )
    return str(before), str(after)


def test_two_evaluation_runs(
    chromium: tuple[Any, Any],  # noqa: F811
    view_files: ViewFiles,
    tmp_path: Path,
) -> None:
    before, after = write_runs(tmp_path)
    with kp_view([str(view_files.traces), before, after]) as running:
        browser = Browser(chromium, running.url)
        page = browser.page
        page.goto(f"{running.url}#/compare", wait_until="load")
        page.locator("#compare-runs").click()
        page.locator("#runs-form").wait_for()
        page.get_by_label("Run A (before)").select_option(before)
        page.get_by_label("Run B (after)").select_option(after)
        page.get_by_role("button", name="Compare runs").click()
        page.locator("table.run-criteria tbody tr").first.wait_for()
        where = browser.shot(tmp_path / "runs.png")
        row = page.locator('table.run-criteria tr[data-criterion="y"]')
        assert row.locator("td").all_inner_texts() == [
            "50.0%",
            "0.0% (dropped)",
            f"1: {ALPHA}",
            "0",
        ], where
        assert page.locator("ul.regressions li").all_inner_texts() == [
            "criterion y: pass rate 50.0% -> 0.0% (1 case(s) flipped pass -> fail)",
            f"1 case(s) flipped pass -> fail: {ALPHA}",
        ], where
        assert page.locator("#nav-compare").get_attribute("aria-current") == "page", where
        row.get_by_role("link", name=ALPHA).click()
        page.locator("#steps-title").wait_for()
        assert page.locator("h1").inner_text() == f"Trace {ALPHA}", where
        assert browser.errors == [] and browser.foreign_requests() == [], where
