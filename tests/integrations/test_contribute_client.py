"""The HTTP client of ``capture(contribute_to=...)`` against a hostile server (issue 37,
findings 7 and 8): it follows no redirect (the bearer key goes to the server named only),
reads a bounded answer and keeps one deadline for the whole exchange. Real loopback servers."""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading
import time
import urllib.error
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from knowledgepulse.integrations._capture._contribute import post_json

Behaviour = Callable[[socket.socket], None]


@contextmanager
def raw_server(behaviour: Behaviour) -> Iterator[tuple[str, list[bytes]]]:
    """A loopback server that reads a request's head, records it and then does ``behaviour``
    on the socket; yields its URL and the heads it got."""
    heads: list[bytes] = []

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            data = b""
            while b"\r\n\r\n" not in data:
                more = self.request.recv(65536)
                if not more:
                    return
                data += more
            heads.append(data.split(b"\r\n\r\n", 1)[0])
            with contextlib.suppress(OSError):  # the client went away: what the tests want
                behaviour(self.request)

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", heads
    finally:
        server.shutdown()
        server.server_close()


def test_a_redirect_is_not_followed_and_the_key_goes_nowhere_else() -> None:
    with raw_server(lambda s: s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")) as (
        elsewhere,
        taken,
    ):
        for status in (301, 302, 303, 307, 308):

            def redirect(sock: socket.socket, status: int = status) -> None:
                sock.sendall(
                    f"HTTP/1.1 {status} Moved\r\nLocation: {elsewhere}/v1/traces\r\n"
                    "Content-Length: 0\r\n\r\n".encode()
                )

            with raw_server(redirect) as (url, heads):
                with pytest.raises(urllib.error.URLError) as caught:
                    post_json(url, "/v1/traces", {"id": "x"}, "kp_secret_key", timeout=5)
                assert str(caught.value.reason) == (
                    f"{url} answered {status} (a redirect to {elsewhere}/v1/traces): not "
                    "followed, the key goes to the server named only"
                )
                assert b"Authorization: Bearer kp_secret_key" in heads[0]
        assert taken == []  # the other host never saw a request, nor the key


def test_an_answer_too_large_is_cut_off() -> None:
    def endless(sock: socket.socket) -> None:
        sock.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")
        block = b"x" * 65536
        for _ in range(400 * 16):  # 400 MiB, unless the client leaves first
            sock.sendall(block)

    def declared(sock: socket.socket) -> None:
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 419430400\r\n\r\n")

    with raw_server(endless) as (url, _):
        started = time.monotonic()
        with pytest.raises(urllib.error.URLError) as caught:
            post_json(url, "/v1/traces", {}, None, timeout=20, max_answer_bytes=1024 * 1024)
        assert str(caught.value.reason) == f"{url} answered more than 1,048,576 bytes; not read on"
        assert time.monotonic() - started < 10
    with raw_server(declared) as (url, _):
        with pytest.raises(urllib.error.URLError) as caught:
            post_json(url, "/v1/traces", {}, None, timeout=20)
        assert str(caught.value.reason) == (
            f"{url} answered 419,430,400 bytes; at most 1,048,576 are read"
        )


@pytest.mark.parametrize("where", ["head", "body"])
def test_one_deadline_for_the_whole_exchange(where: str) -> None:
    """A server dripping a byte every 0.2 s never lets a socket timeout fire: the deadline
    does."""

    def drip(sock: socket.socket) -> None:
        if where == "body":
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
        for _ in range(100):
            sock.sendall(b"x" if where == "body" else b"X-Slow: x\r\n"[:1])
            time.sleep(0.2)

    with raw_server(drip) as (url, _):
        started = time.monotonic()
        with pytest.raises(urllib.error.URLError) as caught:
            post_json(url, "/v1/traces", {}, None, timeout=1.5)
        took = time.monotonic() - started
        assert str(caught.value.reason).startswith(f"{url} took longer than 1.5 s to answer")
        assert 1.4 < took < 3.0
