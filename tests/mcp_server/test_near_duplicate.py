"""One copy decision on every surface: the score's explanation and ``copy_of``, the service's
``near_duplicates``, the MCP ``duplicate_of`` and ``kp curate`` all name a copy the same way
(:mod:`knowledgepulse.copies`: exact by digest, near by estimated Jaccard ≥ the threshold), and
none names a trace that only looks alike to the embedder.

The embedder below puts every trace at cosine 0.99 of every other: a whole-trace vector that
cannot tell a copy from a sibling, as MiniLM's could not. Only the words decide.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import httpx
import numpy as np
import numpy.typing as npt
import pytest

from knowledgepulse.cli import main
from knowledgepulse.copies import COPY_SIMILARITY, copy_facets, estimated_similarity
from knowledgepulse.embedding import check_embedder
from knowledgepulse.kb import EmbeddingIdentity, open_knowledge_base
from knowledgepulse.records import ScoreRecord
from knowledgepulse.scoring._formulas import ValueScore
from knowledgepulse.service import ServiceSettings, create_app, server_in_thread
from service.conftest import add_keys, trace

from .conftest import http_session
from .test_tools import call

ANCHOR = "kp:trace:anchor"
PROBE = "kp:trace:probe"
WORDS = [f"word{k}" for k in range(40)]


class AlikeEmbedder:
    """Every text at cosine 0.99 of every other."""

    name = "AlikeEmbedder"
    dimensions = 8

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for row, text in enumerate(texts):
            out[row, 0] = 0.99 if "probe" in text else 1.0
            out[row, 1] = np.sqrt(1.0 - out[row, 0] ** 2)
        return out


def probe_words(changed: int) -> str:
    return " ".join(f"probe{k}" if k < changed else w for k, w in enumerate(WORDS))


def estimate(changed: int) -> float:
    import knowledgepulse as kp

    a, b = copy_facets(
        [
            kp.parse_trace(trace(ANCHOR, words=" ".join(WORDS))),
            kp.parse_trace(trace(PROBE, words=probe_words(changed))),
        ]
    )
    assert a.signature is not None and b.signature is not None
    return float(estimated_similarity(a.signature, b.signature))


def test_the_two_probes_sit_either_side_of_the_threshold() -> None:
    assert estimate(2) >= COPY_SIMILARITY > estimate(30)


@pytest.mark.parametrize(("changed", "copy"), [(2, True), (30, False)])
def test_service_mcp_explanation_and_curate_agree(
    tmp_path: Path, changed: int, copy: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    embedder = check_embedder(AlikeEmbedder())
    kb = open_knowledge_base(tmp_path / "kb.sqlite", EmbeddingIdentity.of(embedder))
    keys = add_keys(kb)
    app = create_app(kb, embedder, settings=ServiceSettings(rate_per_s=0), threshold=0.0)
    headers = {"Authorization": f"Bearer {keys['alice']}"}
    anchor = trace(ANCHOR, words=" ".join(WORDS))
    probe = trace(PROBE, words=probe_words(changed))
    try:
        with server_in_thread(app) as url, httpx.Client(base_url=url, headers=headers) as rest:
            stored = rest.post("/v1/traces", json=anchor)
            assert stored.json()["status"] == "accepted"

            async def contribute() -> Any:
                async with http_session(url, keys["alice"]) as session:
                    return await call(session, "contribute_trace", trace=probe)

            mcp = anyio.run(contribute)
            detail = rest.get(f"/v1/traces/{PROBE}").json()
    finally:
        kb.close()

    found = estimate(changed)
    assert mcp["status"] == "accepted"
    record = ScoreRecord.model_validate(detail["record"])
    if copy:
        assert mcp["duplicate_of"] == {
            "id": ANCHOR,
            "relation": "near_copy",
            "similarity": round(found, 4),
        }
        assert detail["near_duplicates"] == [{"id": ANCHOR, "similarity": found}]
        assert record.copy_of is not None and record.copy_of.id == ANCHOR
        assert f"(a copy of {ANCHOR} (estimated Jaccard {found:.2f}))" in record.explanation
    else:
        assert mcp["duplicate_of"] is None
        assert detail["near_duplicates"] == []
        assert record.copy_of is None
        # The embedder's nearest is named as the nearest (an attempt at the same task), never
        # as a duplicate.
        assert f"(nearest {ANCHOR}: same task, done the same way (similarity 0.99))" in (
            record.explanation
        )
    assert ValueScore.from_record(record).copy_of == record.copy_of

    # kp curate draws the same line.
    pile = tmp_path / "pile.jsonl"
    pile.write_text(json.dumps(anchor) + "\n" + json.dumps(probe) + "\n")
    argv = ["curate", str(pile), "-o", str(tmp_path / "k"), "--groups", str(tmp_path / "g")]
    assert main(argv) == 0
    groups = [json.loads(line) for line in (tmp_path / "g").read_text().splitlines()]
    capsys.readouterr()
    if copy:
        (group,) = groups
        members = [group["kept"], *(d["id"] for d in group["duplicates"])]
        assert sorted(members) == [ANCHOR, PROBE]
        assert group["duplicates"][0]["similarity"] == pytest.approx(found, abs=1e-6)
    else:
        assert groups == []
