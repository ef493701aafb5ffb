"""Both protocol eras the installed ``mcp`` SDK speaks, with its official client, over both
transports (issue 37 item 3): 2025-11-25 (``initialize``, a session) and 2026-07-28
(stateless: ``server/discover``, no ``initialize``, no session id). Keys, scopes and
visibility hold the same in both."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from service.conftest import trace

from .conftest import Transport, http_session, stdio_session
from .test_tools import call, refused


@pytest.mark.parametrize("mode", ["initialize", "discover"])
def test_each_era_serves_the_tools_for_the_key(transport: Transport, mode: str) -> None:
    base = Path(transport.kb.location)

    def open_session(who: str) -> Any:
        if transport.kind == "stdio":
            return stdio_session(base, transport.keys.get(who), mode)
        assert transport.url is not None
        return http_session(transport.url, transport.keys[who], mode)

    expected = "2026-07-28" if mode == "discover" else "2025-11-25"
    private = trace("kp:trace:era1")

    async def scenario() -> None:
        async with open_session("alice") as session:
            assert session.protocol_version == expected
            stored = await call(session, "contribute_trace", trace=private, visibility="private")
            assert stored["status"] == "accepted"
            hits = (await call(session, "search_traces", query=private["task"]["objective"]))[
                "hits"
            ]
            assert [hit["id"] for hit in hits] == ["kp:trace:era1"]
        async with open_session("bob") as session:
            assert await refused(session, "get_trace", {"id": "kp:trace:era1"}) == (
                "no trace kp:trace:era1"
            )
        async with open_session("reader") as session:
            refusal = await refused(session, "contribute_trace", {"trace": trace("kp:trace:r")})
            assert refusal == "this key's scope is read; contribute_trace needs contribute"

    anyio.run(scenario)


def test_the_versions_served_are_the_sdks(transport: Transport) -> None:
    """What docs/mcp.md says is served: every handshake version and every modern one."""
    assert HANDSHAKE_PROTOCOL_VERSIONS[-1] == "2025-11-25"
    assert MODERN_PROTOCOL_VERSIONS == ("2026-07-28",)
    if transport.kind != "http":
        return
    assert transport.url is not None
    discover = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "server/discover",
        "params": {
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
            }
        },
    }
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "Mcp-Protocol-Version": "2026-07-28",
        "Mcp-Method": "server/discover",
    }
    anonymous = httpx.post(f"{transport.url}/mcp", json=discover, headers=headers, timeout=30)
    assert anonymous.status_code == 401  # no handshake, and still no way in without a key
    keyed = httpx.post(
        f"{transport.url}/mcp",
        json=discover,
        headers={**headers, "Authorization": f"Bearer {transport.keys['reader']}"},
        timeout=30,
    )
    assert keyed.status_code == 200, keyed.text
    assert "mcp-session-id" not in keyed.headers
    body = keyed.text
    payload = json.loads(body.split("data: ", 1)[1]) if body.startswith("event") else keyed.json()
    assert payload["result"]["supportedVersions"] == ["2026-07-28"]
