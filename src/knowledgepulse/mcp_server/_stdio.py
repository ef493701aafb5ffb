"""``kp mcp``: the server over stdio, for an MCP client that starts it as a subprocess.

The SDK's stdio transport owns the process's stdin and stdout (anything else printed goes to
stderr, so a stray print cannot corrupt a frame); a line that is not JSON-RPC is answered with
a parse error and the server reads on; the server ends cleanly when the client closes stdin.
"""

from __future__ import annotations

from typing import Any

import anyio
from mcp.server.stdio import stdio_server

from ..kb import ApiKey
from ._memory import LOCAL_KEY, TraceMemory
from ._server import build_server

__all__ = ["run_stdio", "serve_stdio"]


async def serve_stdio(memory: TraceMemory, key: ApiKey = LOCAL_KEY) -> None:
    """Serve ``memory`` on this process's stdin/stdout until the client closes stdin."""

    async def identify(_: Any) -> ApiKey:
        return key

    server = build_server(memory, identify)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def run_stdio(memory: TraceMemory, key: ApiKey = LOCAL_KEY) -> None:
    """:func:`serve_stdio`, blocking (the ``kp mcp`` command)."""
    anyio.run(serve_stdio, memory, key)
