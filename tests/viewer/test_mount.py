"""``mount_viewer``: the page served by a FastAPI application (``kp serve``) next to ``/v1``."""

from __future__ import annotations

import pytest

from knowledgepulse.viewer import STATIC_DIR, mount_viewer


def test_the_three_files_are_in_the_static_dir() -> None:
    assert sorted(p.name for p in STATIC_DIR.iterdir()) == ["index.html", "viewer.css", "viewer.js"]


def test_mounted_at_the_root_after_the_api_routes() -> None:
    pytest.importorskip("fastapi", reason="fastapi (kp serve's dependency) is missing")
    pytest.importorskip("fastapi.testclient", reason="httpx is missing")
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    app = FastAPI()

    @app.get("/v1/stats")
    def stats() -> dict[str, int]:
        return {"traces": 0}

    mount_viewer(app)
    client = TestClient(app)

    page = client.get("/")
    assert page.status_code == 200
    assert '<script src="viewer.js" defer></script>' in page.text
    assert client.get("/viewer.js").text == (STATIC_DIR / "viewer.js").read_text()
    assert client.get("/viewer.css").status_code == 200
    assert client.get("/v1/stats").json() == {"traces": 0}
