"""One near-duplicate line: the score's explanation, the service's ``near_duplicates`` and the
MCP ``duplicate_of`` all draw it with ``is_near_duplicate``, so a stored trace on either side
of ``NEAR_DUPLICATE`` gets the same answer from each.

The similarities are exact: the embedder below gives the stored trace the first unit vector
and the probe a vector whose first component is the similarity wanted (float32 values, on the
memory's exact grid). No float32 equals 0.95, so the two probes are the float32 values either
side of it: the smallest at or above the threshold and the largest below it;
``is_near_duplicate`` itself is checked at exactly the threshold.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import httpx
import numpy as np
import numpy.typing as npt
import pytest

from knowledgepulse.embedding import check_embedder
from knowledgepulse.kb import EmbeddingIdentity, open_knowledge_base
from knowledgepulse.scoring._formulas import NEAR_DUPLICATE, is_near_duplicate
from knowledgepulse.service import ServiceSettings, create_app, server_in_thread
from service.conftest import add_keys, trace

from .conftest import http_session
from .test_tools import call

ANCHOR = "kp:trace:anchor"
PROBE = "kp:trace:probe"
#: The float32 similarities either side of the threshold, as float64.
AT = float(np.nextafter(np.float32(NEAR_DUPLICATE), np.float32(1)))
BELOW = float(np.float32(NEAR_DUPLICATE))


class TwoVectorEmbedder:
    """The first unit vector for a text holding ``anchor``; for one holding ``probe`` a unit
    vector at cosine :attr:`similarity` to it."""

    name = "TwoVectorEmbedder"
    dimensions = 8

    def __init__(self, similarity: float) -> None:
        self.similarity = similarity

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for row, text in enumerate(texts):
            if "anchor" in text:
                out[row, 0] = 1.0
            else:
                out[row, 0] = self.similarity
                out[row, 1] = math.sqrt(1.0 - self.similarity**2)
        return out


def test_the_threshold_itself_is_a_near_duplicate() -> None:
    assert AT >= NEAR_DUPLICATE > BELOW
    assert is_near_duplicate(NEAR_DUPLICATE) is True
    assert is_near_duplicate(math.nextafter(NEAR_DUPLICATE, 0.0)) is False
    assert is_near_duplicate(AT) is True
    assert is_near_duplicate(BELOW) is False


@pytest.mark.parametrize(("similarity", "near"), [(AT, True), (BELOW, False)])
def test_service_mcp_and_explanation_agree(tmp_path: Path, similarity: float, near: bool) -> None:
    embedder = check_embedder(TwoVectorEmbedder(similarity))
    kb = open_knowledge_base(tmp_path / "kb.sqlite", EmbeddingIdentity.of(embedder))
    keys = add_keys(kb)
    app = create_app(kb, embedder, settings=ServiceSettings(rate_per_s=0), threshold=0.0)
    headers = {"Authorization": f"Bearer {keys['alice']}"}
    try:
        with server_in_thread(app) as url, httpx.Client(base_url=url, headers=headers) as rest:
            stored = rest.post("/v1/traces", json=trace(ANCHOR, words="anchor words"))
            assert stored.json()["status"] == "accepted"

            async def contribute() -> Any:
                async with http_session(url, keys["alice"]) as session:
                    return await call(
                        session, "contribute_trace", trace=trace(PROBE, words="probe words")
                    )

            mcp = anyio.run(contribute)
            detail = rest.get(f"/v1/traces/{PROBE}").json()
    finally:
        kb.close()

    assert mcp["status"] == "accepted"
    assert mcp["duplicate_of"] == (
        {"id": ANCHOR, "similarity": round(similarity, 4)} if near else None
    )
    assert detail["near_duplicates"] == ([{"id": ANCHOR, "similarity": similarity}] if near else [])
    kind = "near-duplicate of" if near else "nearest"
    assert f"({kind} {ANCHOR} (cos 0.95))" in detail["record"]["explanation"]
    assert detail["record"]["nearest"] == {"id": ANCHOR, "similarity": similarity}
