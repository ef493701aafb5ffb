"""Both MCP transports over one fresh base, driven by the official ``mcp`` client.

``stdio``: ``stdio_server.py`` (the stdio server with the hashing embedder) started by the
SDK's ``stdio_client``, acting as the key asked for. ``http``: ``kp serve``'s application on a
free loopback port, ``/mcp`` reached with the SDK's ``streamable_http_client`` and the key as
its bearer. Either way a test gets ``open_session(who)``, an async context manager yielding an
initialised ``ClientSession``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
pytest.importorskip("fastapi")

import httpx2
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from knowledgepulse.service import ServiceSettings, create_app, server_in_thread
from service.conftest import add_keys, embedder, open_base

HERE = Path(__file__).resolve().parent
#: The limits both transports run with (stdio_server.py sets the same).
MAX_BODY = 64 * 1024
MAX_STEPS = 50

OpenSession = Callable[[str], AbstractAsyncContextManager[ClientSession]]


@dataclass
class Transport:
    kind: str
    kb: Any
    keys: dict[str, str]
    open_session: OpenSession
    url: str | None = None


async def connect(session: ClientSession, mode: str) -> None:
    """``initialize`` (the 2025-11-25 handshake) or ``discover`` (2026-07-28: stateless, no
    handshake, no session id)."""
    if mode == "discover":
        await session.discover()
    else:
        await session.initialize()


@asynccontextmanager
async def stdio_session(
    base: Path, secret: str | None, mode: str = "initialize"
) -> AsyncIterator[ClientSession]:
    args = [str(HERE / "stdio_server.py"), str(base)]
    # The SDK passes on only a few variables: the child gets this process's module path, and
    # the key as kp mcp takes it (never in its arguments).
    env = {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    if secret:
        env["KNOWLEDGEPULSE_API_KEY"] = secret
    params = StdioServerParameters(command=sys.executable, args=args, env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await connect(session, mode)
        yield session


@asynccontextmanager
async def http_session(
    url: str, secret: str, mode: str = "initialize"
) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {secret}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as client,
        streamable_http_client(f"{url}/mcp", http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await connect(session, mode)
        yield session


@pytest.fixture(params=["stdio", "http"])
def transport(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Transport]:
    base = tmp_path / "kb.sqlite"
    kb = open_base(base)
    keys = add_keys(kb)
    try:
        if request.param == "stdio":
            yield Transport("stdio", kb, keys, lambda who: stdio_session(base, keys.get(who)))
            return
        settings = ServiceSettings(rate_per_s=0, max_body_bytes=MAX_BODY, max_steps=MAX_STEPS)
        app = create_app(kb, embedder(), settings=settings, threshold=0.5)
        with server_in_thread(app) as url:
            yield Transport("http", kb, keys, lambda who: http_session(url, keys[who]), url=url)
    finally:
        kb.close()
