"""The service in a process of its own, for the hostile-client tests.

The tests that exhaust connections or flood the workers need the server in its own process:
its own open-file limit (lowered here, as ``ulimit -n`` would) and its own interpreter lock,
so that what the clients cost the test process is not measured as the server's latency.
Run as a script, this module serves a base with the hashing embedder until SIGTERM.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

_TESTS = Path(__file__).resolve().parents[1]


@dataclass
class ChildServer:
    url: str
    keys: dict[str, str]
    log: Path
    process: subprocess.Popen[bytes]

    def client(self, who: str | None = None, **options: Any) -> httpx.Client:
        headers = {} if who is None else {"Authorization": f"Bearer {self.keys[who]}"}
        return httpx.Client(base_url=self.url, headers=headers, **{"timeout": 30, **options})


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def child_server(
    tmp_path: Path,
    *,
    nofile: int | None = None,
    slow_embed_s: float = 0.0,
    drain_s: float = 5.0,
    **settings: Any,
) -> Iterator[ChildServer]:
    """The service over a fresh base in a child process, with ``settings`` (rate off unless
    given) and, when given, the open-file limit ``nofile``; its stderr goes to a file."""
    import knowledgepulse

    from .conftest import add_keys, open_base

    base = tmp_path / "kb.sqlite"
    kb = open_base(base)
    keys = add_keys(kb)
    kb.close()
    port = _free_port()
    log = tmp_path / "server.log"
    source = str(Path(knowledgepulse.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([source, str(_TESTS)])}
    config = {
        "kb": str(base),
        "port": port,
        "nofile": nofile,
        "drain_s": drain_s,
        "slow_embed_s": slow_embed_s,
        "settings": {"rate_per_s": 0, **settings},
    }
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), json.dumps(config)],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env=env,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the server did not start:\n" + log.read_text()[-3000:])
            time.sleep(0.1)
        yield ChildServer(url, keys, log, process)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=drain_s + 15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _serve(config: dict[str, Any]) -> None:
    if config["nofile"]:
        import resource

        resource.setrlimit(resource.RLIMIT_NOFILE, (config["nofile"], config["nofile"]))
    from _helpers import HashingEmbedder
    from knowledgepulse.embedding import check_embedder
    from knowledgepulse.kb import EmbeddingIdentity, open_knowledge_base
    from knowledgepulse.service import ServiceSettings, create_app, run_server

    class SlowEmbedder(HashingEmbedder):
        name = "HashingEmbedder"  # the identity the base was made with

        def embed(self, texts: Any) -> Any:
            time.sleep(config["slow_embed_s"])
            return super().embed(texts)

    embedder = check_embedder(SlowEmbedder() if config["slow_embed_s"] else HashingEmbedder())
    kb = open_knowledge_base(config["kb"], EmbeddingIdentity.of(embedder))
    app = create_app(kb, embedder, settings=ServiceSettings(**config["settings"]), close_kb=True)
    run_server(app, "127.0.0.1", config["port"], drain_s=config["drain_s"], log_level="warning")


if __name__ == "__main__":
    _serve(json.loads(sys.argv[1]))
