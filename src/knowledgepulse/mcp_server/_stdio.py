"""``kp mcp``: the server over stdio, for an MCP client that starts it as a subprocess.

The SDK's stdio transport owns the process's stdin and stdout (anything else printed goes to
stderr, so a stray print cannot corrupt a frame); a line that is not JSON-RPC is answered with
a parse error and the server reads on; the server ends cleanly when the client closes stdin.
"""

from __future__ import annotations

import os
import sys
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
    """:func:`serve_stdio`, blocking (the ``kp mcp`` command). A client that leaves while an
    answer is being written ends the server quietly (exit 0), not with a traceback."""
    try:
        anyio.run(serve_stdio, memory, key)
    except BaseException as exc:
        if not _client_gone(exc):
            raise
        _stdout_to_devnull()  # the interpreter's last flush would meet the same closed pipe


def _client_gone(exc: BaseException) -> bool:
    """Whether ``exc`` (or every exception of a group) says the client closed its end."""
    inner = getattr(exc, "exceptions", None)
    if isinstance(inner, tuple) and inner:
        return all(_client_gone(e) for e in inner)
    return isinstance(
        exc,
        (
            BrokenPipeError,
            ConnectionResetError,
            anyio.BrokenResourceError,
            anyio.ClosedResourceError,
        ),
    )


def _stdout_to_devnull() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
