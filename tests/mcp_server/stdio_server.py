"""``python stdio_server.py KB``: the stdio MCP server over KB with the hashing embedder (what
``kp mcp`` runs, with the test embedder instead of MiniLM), acting as the key in
``$KNOWLEDGEPULSE_API_KEY`` if set (as ``kp mcp`` does; never a key in argv)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _helpers import HashingEmbedder
from knowledgepulse.embedding import check_embedder
from knowledgepulse.kb import EmbeddingIdentity, open_knowledge_base
from knowledgepulse.mcp_server import LOCAL_KEY, TraceMemory, run_stdio
from knowledgepulse.service import ServiceSettings
from knowledgepulse.service._bodies import load_redactor
from knowledgepulse.service._engine import Engine


def main() -> None:
    embedder = check_embedder(HashingEmbedder())
    with open_knowledge_base(sys.argv[1], EmbeddingIdentity.of(embedder)) as kb:
        secret = os.environ.get("KNOWLEDGEPULSE_API_KEY")
        key = LOCAL_KEY if not secret else kb.verify_api_key(secret)
        assert key is not None, "not a key of this base"
        redact, _ = load_redactor()
        settings = ServiceSettings(max_body_bytes=64 * 1024, max_steps=50)
        run_stdio(TraceMemory(Engine(kb, embedder, 0.5), settings, redact), key)


if __name__ == "__main__":
    main()
