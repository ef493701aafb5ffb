"""The viewer page in headless Chromium on ``kp serve`` (issue 22 item 7): the Groups link is
not offered by a server without groups, and ``#/groups`` says why instead of "Not Found";
the header forgets the stored API key."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from service.conftest import Serve, serving, trace

from .test_viewer_browser import Browser, chromium, table_ids

pytestmark = pytest.mark.browser
__all__ = ["chromium"]  # the fixture, used by name


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    yield from serving(tmp_path)


def _sign_in(page: Any, key: str) -> None:
    page.get_by_role("dialog", name="API key needed").wait_for()
    page.get_by_label("API key", exact=True).fill(key)
    page.get_by_role("button", name="Use this key").click()


def test_groups_under_kp_serve_are_explained_not_found(
    chromium: tuple[Any, Any], serve: Serve, tmp_path: Path
) -> None:
    with serve() as service:
        assert service.client("alice").post("/v1/traces", json=trace("kp:trace:1")).is_success
        browser = Browser(chromium, service.url)
        page = browser.page
        page.goto(service.url + "/", wait_until="load")
        _sign_in(page, service.keys["alice"])
        page.locator("#traces tbody tr").first.wait_for()
        where = browser.shot(tmp_path / "serve-table.png")
        assert table_ids(page) == ["kp:trace:1"], where
        assert not page.locator("#nav-groups").is_visible(), where
        page.goto(service.url + "/#/groups", wait_until="load")
        page.get_by_text("This server keeps no groups:").wait_for()
        where = browser.shot(tmp_path / "serve-groups.png")
        assert "Not Found" not in page.locator("body").inner_text(), where
    # Chromium reports each refused request on the console: the first reads before the key
    # was given (401, which is what opens the key dialog) and /v1/groups (404).
    unexpected = [
        e for e in browser.errors if "status of 404" not in e and "status of 401" not in e
    ]
    assert unexpected == [], where


def test_the_stored_key_can_be_forgotten(
    chromium: tuple[Any, Any], serve: Serve, tmp_path: Path
) -> None:
    with serve() as service:
        browser = Browser(chromium, service.url)
        page = browser.page
        page.goto(service.url + "/", wait_until="load")
        forget = page.get_by_role("button", name="Forget the API key")
        assert not forget.is_visible()
        _sign_in(page, service.keys["reader"])
        page.get_by_role("heading", name="Traces").wait_for()
        where = browser.shot(tmp_path / "signed-in.png")
        assert page.evaluate("localStorage.getItem('knowledgepulse.apiKey')"), where
        forget.click()
        page.get_by_role("dialog", name="API key needed").wait_for()
        where = browser.shot(tmp_path / "forgotten.png")
        assert page.evaluate("localStorage.getItem('knowledgepulse.apiKey')") is None, where
        assert not forget.is_visible(), where
    assert browser.foreign_requests() == [], where
