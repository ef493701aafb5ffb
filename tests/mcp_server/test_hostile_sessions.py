"""MCP sessions and GET streams against one greedy key (issue 37, findings 2 and 5): per-key
caps that give up the key's own oldest first, and held streams that cannot take every
connection. Raw HTTP over loopback, as a hostile client sends it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from knowledgepulse.service import ServiceSettings, create_app, server_in_thread
from service._hostile import child_server
from service.conftest import add_keys, embedder, open_base

from .test_transports import ACCEPT, INITIALIZE

VERSION = {"Mcp-Protocol-Version": "2025-11-25"}
LISTING = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def _auth(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


async def _open(client: httpx.AsyncClient, secret: str) -> str:
    opened = await client.post("/mcp", json=INITIALIZE, headers={**ACCEPT, **_auth(secret)})
    assert opened.status_code == 200, opened.text
    session: str = opened.headers["mcp-session-id"]
    headers = {**ACCEPT, **VERSION, **_auth(secret), "Mcp-Session-Id": session}
    assert (await client.post("/mcp", json=INITIALIZED, headers=headers)).status_code == 202
    return session


async def _status(client: httpx.AsyncClient, secret: str, session: str) -> int:
    headers = {**ACCEPT, **VERSION, **_auth(secret), "Mcp-Session-Id": session}
    return (await client.post("/mcp", json=LISTING, headers=headers)).status_code


@pytest.fixture
def service(tmp_path: Path) -> Any:
    kb = open_base(tmp_path / "kb.sqlite")
    keys = add_keys(kb)
    settings = ServiceSettings(rate_per_s=0, mcp_sessions_per_key=3, mcp_streams_per_key=2)
    app = create_app(kb, embedder(), settings=settings, threshold=0.5)
    with server_in_thread(app) as url:
        yield url, keys, app
    kb.close()


def test_a_key_holds_at_most_its_sessions_and_gives_up_its_oldest(service: Any) -> None:
    """Finding 5: one key could open the SDK's every session (10,000), and every other key's
    ``initialize`` was answered 503. Now the key's least recently used go past its cap."""
    url, keys, app = service

    async def scenario() -> None:
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            bobs = await _open(client, keys["bob"])
            alices = [await _open(client, keys["alice"]) for _ in range(3)]
            assert await _status(client, keys["alice"], alices[0]) == 200  # used: most recent
            alices += [await _open(client, keys["alice"]) for _ in range(2)]
            await anyio.sleep(0.2)  # the given-up sessions' tasks wind down
            statuses = [await _status(client, keys["alice"], s) for s in alices]
            assert statuses == [200, 404, 404, 200, 200]
            assert await _status(client, keys["bob"], bobs) == 200  # another key's: untouched
            assert app.state.mcp_sessions.count(keys_id(app, "alice")) == 3

    anyio.run(scenario)


def keys_id(app: Any, name: str) -> str:
    kb = app.state.service.engine.kb
    return str(next(key.id for key in kb.api_keys() if key.name == name))


def test_a_key_holds_at_most_its_streams_and_the_oldest_ends(service: Any) -> None:
    """Finding 2: GET streams were held for ever. Past the key's cap its oldest one ends."""
    url, keys, _ = service
    ended: list[int] = []

    async def scenario() -> None:
        limits = httpx.Limits(max_connections=20)
        async with httpx.AsyncClient(base_url=url, timeout=30, limits=limits) as client:
            sessions = [await _open(client, keys["alice"]) for _ in range(3)]

            async def hold(number: int, session: str) -> None:
                headers = {
                    "Accept": "text/event-stream",
                    **VERSION,
                    **_auth(keys["alice"]),
                    "Mcp-Session-Id": session,
                }
                async with client.stream("GET", "/mcp", headers=headers) as answer:
                    assert answer.status_code == 200
                    async for _ in answer.aiter_bytes():
                        pass
                ended.append(number)

            with anyio.move_on_after(3):
                async with anyio.create_task_group() as group:
                    for number, session in enumerate(sessions):
                        group.start_soon(hold, number, session)
                        await anyio.sleep(0.3)
                    await anyio.sleep(1.0)
                    assert ended == [0]  # the third stream ended the first
                    group.cancel_scope.cancel()

    anyio.run(scenario)
    assert ended == [0]


def _p99(latencies: list[float]) -> float:
    ordered = sorted(latencies)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


@pytest.mark.slow
def test_a_flood_of_streams_leaves_healthz_and_other_keys_fast(tmp_path: Path) -> None:
    """Every key opening sessions and holding GET streams past ``--max-connections 24``:
    another client's ``/healthz`` and ``/v1/stats`` still answer (the oldest stream is given up
    for a new connection), p99 under 500 ms. Before, the held streams took every connection
    and the others got connection resets."""
    with child_server(tmp_path, max_connections=24) as server:
        latencies: dict[str, list[float]] = {"/healthz": [], "/v1/stats": []}
        failures: list[str] = []

        async def scenario() -> None:
            limits = httpx.Limits(max_connections=200)
            async with httpx.AsyncClient(base_url=server.url, timeout=30, limits=limits) as flood:

                async def hold(who: str) -> None:
                    secret = server.keys[who]
                    try:
                        session = await _open(flood, secret)
                        headers = {
                            "Accept": "text/event-stream",
                            **VERSION,
                            **_auth(secret),
                            "Mcp-Session-Id": session,
                        }
                        async with flood.stream("GET", "/mcp", headers=headers) as answer:
                            async for _ in answer.aiter_bytes():
                                pass
                    except (httpx.HTTPError, AssertionError):
                        pass  # given up, as it should be

                async with anyio.create_task_group() as group:
                    for _ in range(8):
                        for who in ("alice", "bob", "carol", "reader", "admin"):
                            group.start_soon(hold, who)
                    await anyio.sleep(3.0)  # 40 streams asked for, 24 connections
                    async with httpx.AsyncClient(base_url=server.url, timeout=10) as other:
                        for _ in range(20):
                            for path in latencies:
                                headers = _auth(server.keys["reader"])
                                started = time.monotonic()
                                try:
                                    answer = await other.get(path, headers=headers)
                                    assert answer.status_code == 200, answer.text
                                except httpx.HTTPError as exc:
                                    failures.append(f"{path}: {exc!r}")
                                    continue
                                latencies[path].append(time.monotonic() - started)
                    group.cancel_scope.cancel()

        anyio.run(scenario)
    assert failures == []
    print({path: round(_p99(taken), 3) for path, taken in latencies.items()})  # with -s
    for path, taken in latencies.items():
        assert _p99(taken) < 0.5, (path, sorted(taken)[-3:])


def test_a_body_sent_slowly_to_mcp_is_cut_off_like_v1s(tmp_path: Path) -> None:
    """A keyed client dripping its POST body held its connection for ever (the SDK reads
    bodies without a deadline): now ``/mcp`` reads it as ``/v1`` does, 408 past the body
    read timeout."""
    import socket

    kb = open_base(tmp_path / "kb.sqlite")
    keys = add_keys(kb)
    settings = ServiceSettings(rate_per_s=0, read_timeout_s=1.0)
    app = create_app(kb, embedder(), settings=settings, threshold=0.5)
    try:
        with server_in_thread(app) as url:
            port = int(url.rsplit(":", 1)[1])
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                head = (
                    "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    "Accept: application/json, text/event-stream\r\nContent-Length: 500\r\n"
                    f"Authorization: Bearer {keys['alice']}\r\n\r\n"
                )
                sock.sendall(head.encode())
                started = time.monotonic()
                answer = b""
                while b"\r\n\r\n" not in answer and time.monotonic() - started < 8:
                    sock.sendall(b" ")
                    sock.settimeout(0.3)
                    try:
                        answer += sock.recv(4096)
                    except TimeoutError:
                        continue
                took = time.monotonic() - started
                # The head and the chunked body may come in separate packets (CI once read
                # only the head): read on, without dripping, until the body's end or EOF.
                sock.settimeout(2.0)
                while b"0\r\n\r\n" not in answer and time.monotonic() - started < 10:
                    try:
                        more = sock.recv(4096)
                    except TimeoutError:
                        break
                    if not more:
                        break
                    answer += more
    finally:
        kb.close()
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
    assert b"the request body took longer than 1 s to arrive" in answer
    # Cut off after the 1 s timeout, not held until the 500 bytes drip in (~150 s); the margin
    # is for busy cores (a full suite beside another job took over 3 s here once).
    assert took < 6.0, took
