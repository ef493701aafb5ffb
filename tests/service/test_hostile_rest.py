"""Hostile clients, issue 22 item 7 (the parts of the base and the viewer): a new SQLite base
is private to its owner, and a similarity is never above 1. A real server on loopback."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import numpy as np

from knowledgepulse._memory import _normalise

from .conftest import Serve, open_base, trace


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_sqlite_base_is_created_0600(tmp_path: Path) -> None:
    location = tmp_path / "deep" / "team.sqlite"
    kb = open_base(location)
    try:
        kb.create_api_key("ci", "read")
        modes = {p.name: _mode(p) for p in location.parent.iterdir()}
    finally:
        kb.close()
    assert modes == {"team.sqlite": 0o600, "team.sqlite-wal": 0o600, "team.sqlite-shm": 0o600}


def test_an_existing_base_keeps_its_mode(tmp_path: Path) -> None:
    location = tmp_path / "team.sqlite"
    open_base(location).close()
    location.chmod(0o640)
    open_base(location).close()
    assert _mode(location) == 0o640


# Rows whose float32 dot product with themselves, once normalised, is 1.0000001.
_OVER_ONE = _normalise(np.random.default_rng(7).standard_normal((1, 384)).astype(np.float32))


class _SameVector:
    """Every text embeds to one unit vector whose self-similarity rounds past 1."""

    name, dimensions = "same", 384

    def embed(self, texts: list[str]) -> Any:
        return np.repeat(_OVER_ONE, len(texts), axis=0)


def test_a_similarity_is_never_above_1(serve: Serve) -> None:
    assert float((_OVER_ONE @ _OVER_ONE.T)[0, 0]) > 1.0  # the premise
    with serve(embed=_SameVector()) as service:
        client = service.client("alice")
        assert client.post("/v1/traces", json=trace("kp:trace:1")).status_code == 201
        copy = client.post("/v1/traces", json=trace("kp:trace:2")).json()
        assert copy["nearest"]["similarity"] == 1.0
        assert copy["record"]["novelty"] == 0.0
        scored = client.post("/v1/score", json=trace("kp:trace:3")).json()["records"][0]
        assert scored["nearest"]["similarity"] == 1.0
        hits = client.post("/v1/search", json={"text": "anything", "k": 1}).json()["hits"]
        assert [hit["similarity"] for hit in hits] == [1.0]
