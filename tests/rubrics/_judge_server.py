"""A chat-completions server on loopback that answers from a script, for the judge's tests.

Each request takes the next scripted :class:`Reply`; when the script is empty, ``default``
answers (a function of the request body). The server records every request and the most
requests it had in flight at once.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing.Unpack is 3.11+


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


def completion(
    content: str | None, *, refusal: str | None = None, prompt: int = 10, completion: int = 5
) -> Reply:
    """A 200 chat completion whose first choice says ``content`` and costs the given tokens."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if refusal is not None:
        message["refusal"] = refusal
    return Reply(
        body={
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion},
        }
    )


class Tokens(TypedDict, total=False):
    """The token counts a scripted completion reports (:func:`completion`'s defaults else)."""

    prompt: int
    completion: int


def structured(verdict: str, reasoning: str = "Because.", **tokens: Unpack[Tokens]) -> Reply:
    return completion(json.dumps({"reasoning": reasoning, "verdict": verdict}), **tokens)


class ScriptedServer:
    def __init__(self) -> None:
        self.script: deque[Reply] = deque()
        self.default: Callable[[dict[str, Any]], Reply] = lambda body: structured("yes")
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.paths: list[str] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._http.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._http.server_address[1]}/v1"

    def add(self, *replies: Reply) -> None:
        self.script.extend(replies)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server._lock:
                    server.requests.append(body)
                    server.headers.append(dict(self.headers))
                    server.paths.append(self.path)
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                    reply = server.script.popleft() if server.script else server.default(body)
                try:
                    time.sleep(reply.delay)
                    data = (
                        reply.body.encode()
                        if isinstance(reply.body, str)
                        else json.dumps(reply.body).encode()
                    )
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up waiting (a timeout test)
                finally:
                    with server._lock:
                        server.in_flight -= 1

        return Handler

    @contextmanager
    def running(self) -> Iterator[ScriptedServer]:
        thread = threading.Thread(target=self._http.serve_forever, args=(0.02,), daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._http.shutdown()
            self._http.server_close()
            thread.join()
