"""A real server on loopback over a fresh knowledge base, and keys for three users.

The server is uvicorn in a background thread (``server_in_thread``), on a free port; clients
are httpx clients over TCP. The embedder is the deterministic hashing one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from _helpers import HashingEmbedder, make_trace
from knowledgepulse.embedding import check_embedder
from knowledgepulse.kb import EmbeddingIdentity, open_knowledge_base

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from knowledgepulse.service import ServiceSettings, create_app, server_in_thread


def embedder() -> Any:
    return check_embedder(HashingEmbedder())


def open_base(location: str | Path) -> Any:
    return open_knowledge_base(location, EmbeddingIdentity.of(embedder()))


def trace(
    trace_id: str, visibility: str = "network", words: str | None = None, **parts: Any
) -> dict[str, Any]:
    """A valid trace whose text is ``words`` (default: words made from the id, so that traces
    of different ids are novel against each other and the same words are a duplicate)."""
    own = trace_id.rsplit(":", 1)[-1].replace("-", "")
    text = words if words is not None else " ".join(f"{own}w{k}" for k in range(6))
    steps: list[dict[str, Any]] = [
        {"type": "thought", "content": f"Plan {text}"},
        {"type": "tool_call", "tool": {"name": "search"}, "input": {"q": text}},
        {"type": "observation", "content": f"Found {text}"},
        {"type": "tool_call", "tool": {"name": "read"}, "input": {}},
        {"type": "observation", "content": text},
    ]
    data = make_trace(steps, trace_id=trace_id, objective=f"Task {text}", **parts)
    data["metadata"]["visibility"] = visibility
    return data


@dataclass
class Service:
    url: str
    kb: Any
    keys: dict[str, str]

    def client(self, who: str | None = None, **options: Any) -> httpx.Client:
        headers = {} if who is None else {"Authorization": f"Bearer {self.keys[who]}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30, **options)


KEYS = {
    # name: (scope, org)
    "alice": ("contribute", "acme"),
    "bob": ("contribute", "acme"),
    "carol": ("contribute", "globex"),
    "reader": ("read", "acme"),
    "admin": ("admin", None),
}


def add_keys(kb: Any) -> dict[str, str]:
    return {name: kb.create_api_key(name, scope, org)[1] for name, (scope, org) in KEYS.items()}


Serve = Callable[..., AbstractContextManager[Service]]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    """``with serve(location=None, **settings) as service``: the app on a free loopback port."""
    yield from serving(tmp_path)


def serving(tmp_path: Path) -> Iterator[Serve]:
    """The ``serve`` fixture's body, for test folders with a conftest of their own."""
    from contextlib import contextmanager

    opened: list[Any] = []

    @contextmanager
    def start(
        location: str | Path | None = None,
        *,
        threshold: float | None = None,
        embed: Any = None,
        keys: dict[str, str] | None = None,
        **settings: Any,
    ) -> Iterator[Service]:
        kb = open_base(location or tmp_path / "kb.sqlite")
        opened.append(kb)
        made = keys if keys is not None else add_keys(kb)
        app = create_app(
            kb,
            embed or embedder(),
            settings=ServiceSettings(**{"rate_per_s": 0, **settings}),
            threshold=threshold,
        )
        with server_in_thread(app) as url:
            yield Service(url, kb, made)

    yield start
    for kb in opened:
        kb.close()
