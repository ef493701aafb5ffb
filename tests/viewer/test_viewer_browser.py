"""The viewer page in headless Chromium, on a running ``kp view``: search, trace, links,
sorting, filtering, groups, the API key prompt; no console error, no request elsewhere."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from ._running import kp_view
from .conftest import ALPHA, ALPHA_AGAIN, BETA, DELTA, EPSILON, XSS_OBJECTIVE, ViewFiles

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


class Browser:
    """A page on ``origin`` that records console errors and every request made."""

    def __init__(self, chromium: tuple[Any, Any], origin: str) -> None:
        browser, self.expect = chromium
        self.origin = origin
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page = browser.new_page(viewport={"width": 1280, "height": 900})
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: self.requests.append(r.url))

    def shot(self, path: Path) -> str:
        self.page.screenshot(path=str(path), full_page=True)
        return f"screenshot: {path}"

    def foreign_requests(self) -> list[str]:
        return [url for url in self.requests if not url.startswith(self.origin)]


@pytest.fixture
def chromium() -> Iterator[tuple[Any, Any]]:
    """The browser, and playwright's ``expect`` (imported only when Chromium is there)."""
    if not CHROMIUM.exists() or shutil.which(str(CHROMIUM)) is None:
        pytest.skip(f"{CHROMIUM} not found; run .ci/install-browser.sh")
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright (Python package) is not installed"
    )
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser, sync_api.expect
        finally:
            browser.close()


def table_ids(page: Any) -> list[str]:
    return [
        str(i)
        for i in page.locator("#traces tbody tr").evaluate_all(
            "rows => rows.map(r => r.dataset.id)"
        )
    ]


def test_search_trace_near_duplicate_sort_filter_groups(
    chromium: tuple[Any, Any], view_files: ViewFiles, tmp_path: Path
) -> None:
    with kp_view(view_files.all) as running:
        browser = Browser(chromium, running.url)
        page, expect = browser.page, browser.expect
        page.goto(running.url, wait_until="load")
        page.locator("#traces tbody tr").first.wait_for()
        where = browser.shot(tmp_path / "1-table.png")
        assert table_ids(page) == [BETA, ALPHA, ALPHA_AGAIN, EPSILON, DELTA], where
        assert page.locator("#search-note").inner_text() == (
            "Text search: finds the words in trace ids and objectives (no embedder is loaded)."
        ), where
        # Text from the files is shown as text, never run as HTML.
        assert page.get_by_text(XSS_OBJECTIVE).count() == 1, where
        assert page.evaluate("window.__xss") is None, where

        # Sort: a click on a header sorts by it, descending first; a second click ascending.
        page.get_by_role("button", name="Novelty").click()
        expect(page).to_have_url(re.compile(r"sort=-novelty"))
        page.locator(f'#traces tbody tr[data-id="{ALPHA_AGAIN}"]:last-child').wait_for()
        where = browser.shot(tmp_path / "2-sorted.png")
        assert table_ids(page) == [BETA, DELTA, EPSILON, ALPHA, ALPHA_AGAIN], where
        header = page.locator("th", has=page.get_by_role("button", name="Novelty"))
        assert header.get_attribute("aria-sort") == "descending", where
        page.get_by_role("button", name="Novelty").click()
        # Three new tasks tie at novelty 1 and keep their order either way.
        page.locator(f'#traces tbody tr[data-id="{EPSILON}"]:last-child').wait_for()
        assert table_ids(page) == [ALPHA_AGAIN, ALPHA, BETA, DELTA, EPSILON], where
        assert header.get_attribute("aria-sort") == "ascending", where

        # Filter by domain, then by value range.
        page.get_by_label("Domain").fill("finance")
        page.get_by_role("button", name="Apply filters").click()
        expect(page.locator("#traces tbody tr")).to_have_count(2)
        where = browser.shot(tmp_path / "3-finance.png")
        assert table_ids(page) == [BETA, EPSILON], where  # still by novelty, ascending (a tie)
        assert "Traces 1–2 of 2" in page.locator("#traces caption").inner_text(), where
        page.get_by_role("button", name="Clear").click()
        # Clear draws a new form: fields filled before it is drawn are lost with the old one
        # (under load the value from was, and 3 traces came back).
        expect(page.locator("#traces tbody tr")).to_have_count(5)
        expect(page).not_to_have_url(re.compile(r"domain="))
        page.get_by_label("Value from").fill("0.2")
        page.get_by_label("Value to").fill("0.6")
        page.get_by_role("button", name="Apply filters").click()
        expect(page).to_have_url(re.compile(r"min=0\.2.*max=0\.6"))
        expect(page.locator("#traces tbody tr")).to_have_count(2)
        assert sorted(table_ids(page)) == [ALPHA_AGAIN, EPSILON], where

        # Search, then a hit, then its near-duplicate.
        page.get_by_label("Search traces").fill("SQL injection")
        page.get_by_role("button", name="Search", exact=True).click()
        page.locator("table.hits tbody tr").first.wait_for()
        where = browser.shot(tmp_path / "4-search.png")
        hits = page.locator("table.hits tbody tr th a").all_inner_texts()
        assert hits == [ALPHA, ALPHA_AGAIN], where
        page.get_by_role("link", name=ALPHA, exact=True).click()
        page.locator("#steps-title").wait_for()
        where = browser.shot(tmp_path / "5-trace.png")
        assert page.locator("h1").inner_text() == f"Trace {ALPHA}", where
        steps = page.locator("table.steps tbody tr")
        assert steps.count() == 5, where
        assert steps.nth(1).locator("td").all_inner_texts()[:3] == [
            "1",
            "tool call",
            "github_pr_read",
        ], where
        assert page.locator("table.criteria tbody tr").all_inner_texts() == [
            "found_vulnerability\t0.50\t✓ pass",
            "cited_file\t0.30\t✓ pass",
            "proposed_fix\t0.20\t✗ fail",
        ], where
        assert (
            "value 0.66875 with profile 'default'"
            in page.locator("#score-title ~ p.explanation").inner_text()
        ), where
        facts = page.locator("section[aria-labelledby=score-title] dl.facts")
        assert facts.locator("dt").all_inner_texts()[:3] == ["Value", "Complexity", "Novelty"], (
            where
        )
        assert facts.locator("dd").all_inner_texts()[:3] == [
            "0.669",
            "0.425",
            "0.500 (empty_cache)",
        ], where
        assert page.locator("main > dl.facts").inner_text().split("\n")[:4] == [
            "Domain",
            "code-review",
            "Success",
            "yes",
        ], where
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), where
        duplicates = page.locator("ul.near-duplicates li")
        assert duplicates.all_inner_texts() == [f"{ALPHA_AGAIN} (similarity 0.988)"], where
        duplicates.get_by_role("link").click()
        expect(page.locator("h1")).to_have_text(f"Trace {ALPHA_AGAIN}")
        where = browser.shot(tmp_path / "6-duplicate.png")
        assert duplicates.all_inner_texts() == [f"{ALPHA} (similarity 0.988)"], where
        # The back button returns to the trace it came from.
        page.go_back()
        expect(page.locator("h1")).to_have_text(f"Trace {ALPHA}")

        # The nearest trace column links to the trace.
        page.goto(running.url + "#/?sort=-value", wait_until="load")
        row = page.locator(f'#traces tbody tr[data-id="{EPSILON}"]')
        row.locator("td.nearest a").click()
        # (by the task text, epsilon's nearest trace seen before it is alpha's repeat)
        expect(page.locator("h1")).to_have_text(f"Trace {ALPHA_AGAIN}")

        # Groups.
        page.get_by_role("link", name="Groups").click()
        page.locator("section.group").first.wait_for()
        where = browser.shot(tmp_path / "7-groups.png")
        group = page.locator("section.group")
        assert group.count() == 1, where
        assert group.locator("h2").inner_text() == f"Kept {ALPHA}", where
        assert group.locator("table.duplicates tbody tr").all_inner_texts() == [
            f"{ALPHA_AGAIN}\t0.988\t0.669"
        ], where
        assert page.locator("#nav-groups").get_attribute("aria-current") == "page", where
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), where

    assert browser.errors == [], where
    assert browser.foreign_requests() == [], where


def test_the_page_asks_for_the_api_key_once(
    chromium: tuple[Any, Any], view_files: ViewFiles, tmp_path: Path
) -> None:
    with kp_view(view_files.all, "--api-key-env", "KP_TEST_KEY", env={"KP_TEST_KEY": "s3"}) as (
        running
    ):
        browser = Browser(chromium, running.url)
        page = browser.page
        page.goto(running.url, wait_until="load")
        dialog = page.get_by_role("dialog", name="API key needed")
        dialog.wait_for()
        where = browser.shot(tmp_path / "1-key.png")
        page.get_by_label("API key", exact=True).fill("wrong")
        page.get_by_role("button", name="Use this key").click()
        page.get_by_text("That key was refused.").wait_for()
        page.get_by_label("API key", exact=True).fill("s3")
        page.get_by_role("button", name="Use this key").click()
        page.locator("#traces tbody tr").first.wait_for()
        where = browser.shot(tmp_path / "2-table.png")
        assert len(table_ids(page)) == 5, where
        assert page.evaluate("localStorage.getItem('knowledgepulse.apiKey')") == "s3", where

        page.reload(wait_until="load")
        page.locator("#traces tbody tr").first.wait_for()
        assert not dialog.is_visible(), where

    # Chromium reports each refused request (401) on the console; nothing else may appear.
    unexpected = [e for e in browser.errors if "status of 401" not in e]
    assert unexpected == [], where
    assert browser.foreign_requests() == [], where


def test_a_server_that_sorts_by_value_only_gets_the_page_sorted_in_the_browser(
    chromium: tuple[Any, Any], view_files: ViewFiles, tmp_path: Path
) -> None:
    """kp serve's contract sorts by value and added_at: another column is sorted in the page."""

    def refuse_other_sorts(route: Any) -> None:
        sort = parse_qs(urlsplit(route.request.url).query).get("sort", ["-value"])[0]
        if sort.lstrip("-") in ("value", "added_at"):
            route.continue_()
        else:
            route.fulfill(status=422, json={"detail": [{"msg": "sort: unsupported"}]})

    with kp_view(view_files.all) as running:
        browser = Browser(chromium, running.url)
        page, expect = browser.page, browser.expect
        page.route("**/v1/traces?*", refuse_other_sorts)
        page.goto(running.url + "#/?sort=-novelty", wait_until="load")
        note = page.get_by_text("This server sorts by value and date added only")
        note.wait_for()
        where = browser.shot(tmp_path / "sorted-in-page.png")
        assert table_ids(page) == [BETA, DELTA, EPSILON, ALPHA, ALPHA_AGAIN], where
        expect(page.locator("th[aria-sort=descending]")).to_have_text("Novelty ▼")

    unexpected = [e for e in browser.errors if "status of 422" not in e]
    assert unexpected == [], where
