"""``python stdio_server.py KB [KEY]``: the stdio MCP server over KB with the hashing embedder
(what ``kp mcp`` runs, with the test embedder instead of MiniLM), acting as KEY if given."""

from __future__ import annotations

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
        key = LOCAL_KEY if len(sys.argv) < 3 else kb.verify_api_key(sys.argv[2])
        assert key is not None, "not a key of this base"
        redact, _ = load_redactor()
        settings = ServiceSettings(max_body_bytes=64 * 1024, max_steps=50)
        run_stdio(TraceMemory(Engine(kb, embedder, 0.5), settings, redact), key)


if __name__ == "__main__":
    main()
