"""The knowledge base as an MCP server: agents recall similar successful runs and contribute
their own, over stdio (``kp mcp``) or streamable HTTP (``/mcp`` in ``kp serve``).

Tools: ``search_traces``, ``get_trace``, ``contribute_trace``, and ``search`` / ``fetch`` (the
pair ChatGPT connectors require); resources ``kp://trace/{id}``. The tools are a thin shell over
the library (:func:`knowledgepulse.recall`'s search) and the service's engine (scoring,
redaction, deduplication, visibility), so a key sees through MCP what it sees through ``/v1``.
See ``docs/mcp.md``. Needs the ``mcp`` extra.
"""

from __future__ import annotations

from .._errors import MissingDependencyError

try:
    import mcp  # noqa: F401
    import starlette  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise MissingDependencyError("the MCP server", "mcp", [exc.name or "mcp"]) from None

from ._http import mount_mcp
from ._memory import LOCAL_KEY, NotFound, ToolProblem, TraceMemory
from ._server import build_server
from ._stdio import run_stdio, serve_stdio
from ._tools import TOOLS

__all__ = [
    "LOCAL_KEY",
    "TOOLS",
    "NotFound",
    "ToolProblem",
    "TraceMemory",
    "build_server",
    "mount_mcp",
    "run_stdio",
    "serve_stdio",
]
