"""Hostile clients without a key cannot exhaust the server's connections (issue 22, item 1).

The server runs in its own process with its open-file limit lowered to 256 (as ``ulimit -n
256`` would), and every client here is a raw socket or httpx over loopback.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from knowledgepulse.service import ServiceSettings

from ._hostile import ChildServer, child_server

resource = pytest.importorskip("resource")


def _connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    return sock


def _read_answer(sock: socket.socket) -> bytes:
    """One whole answer (headers and a body of its Content-Length) from ``sock``."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed after {data!r}")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.lower().split(b"\r\n")
        if line.startswith(b"content-length:")
    )
    while len(body) < length:
        body += sock.recv(65536)
    return head + b"\r\n\r\n" + body


def _closed_within(sock: socket.socket, seconds: float) -> float | None:
    """How long until the server closes ``sock`` (None: still open after ``seconds``)."""
    start = time.monotonic()
    sock.settimeout(seconds)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return time.monotonic() - start
    except (ConnectionResetError, BrokenPipeError):
        return time.monotonic() - start
    except TimeoutError:
        return None


class _SlowHeaders:
    """Clients that send one header line every ``every_s`` seconds, never finishing."""

    def __init__(self, url: str, count: int, every_s: float) -> None:
        self.sockets = [_connect(url) for _ in range(count)]
        self.closed_after: list[float] = []
        self._stop = threading.Event()
        self._every = every_s
        self._start = time.monotonic()
        for sock in self.sockets:
            sock.sendall(b"GET /v1/stats HTTP/1.1\r\nHost: kp\r\n")
        self._thread = threading.Thread(target=self._trickle, daemon=True)
        self._thread.start()

    def _trickle(self) -> None:
        line = 0
        alive = list(self.sockets)
        while alive and not self._stop.wait(self._every):
            line += 1
            for sock in list(alive):
                try:
                    sock.sendall(f"X-Line-{line}: still coming\r\n".encode())
                except OSError:
                    alive.remove(sock)
                    self.closed_after.append(time.monotonic() - self._start)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        for sock in self.sockets:
            sock.close()


@pytest.fixture
def limited(tmp_path: Path) -> Iterator[ChildServer]:
    with child_server(tmp_path, nofile=256) as server:
        yield server


def test_the_header_deadline_is_at_most_ten_seconds_by_default() -> None:
    assert ServiceSettings().header_timeout_s == 10.0


def test_300_silent_and_20_slow_header_sockets_leave_room_for_a_keyed_client(
    limited: ChildServer,
) -> None:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 600:
        pytest.skip(f"the test process needs 600 open files (its limit is {soft})")
    with ExitStack() as stack:
        silent = [stack.enter_context(_connect(limited.url)) for _ in range(300)]
        slow = _SlowHeaders(limited.url, 20, every_s=1.0)
        stack.callback(slow.stop)
        time.sleep(1.0)  # the server has accepted what it will accept
        with limited.client("reader") as client:
            started = time.monotonic()
            answer = client.get("/v1/stats", timeout=10)
            elapsed = time.monotonic() - started
        assert answer.status_code == 200, answer.text
        assert answer.json()["traces"] == 0
        assert elapsed < 2.0, f"the keyed request took {elapsed:.2f} s"
        assert len(silent) == 300
    time.sleep(1.0)
    print(f"keyed GET /v1/stats in {elapsed:.3f} s; log {limited.log.stat().st_size:,} bytes")
    assert limited.log.stat().st_size < 1_000_000


@pytest.fixture
def quick(tmp_path: Path) -> Iterator[ChildServer]:
    with child_server(tmp_path, header_timeout_s=2.0) as server:
        yield server


def test_silent_slow_header_and_early_answered_connections_are_closed(quick: ChildServer) -> None:
    silent = _connect(quick.url)
    slow = _SlowHeaders(quick.url, 1, every_s=0.5)
    # A request without a key whose client sends its body slowly: no key, no reprieve.
    unkeyed = _connect(quick.url)
    unkeyed.sendall(
        b"POST /v1/traces HTTP/1.1\r\nHost: kp\r\nContent-Length: 100000\r\n"
        b"Content-Type: application/json\r\n\r\n["
    )
    # A keep-alive connection answered 401, whose client then sends headers slowly.
    answered = _connect(quick.url)
    answered.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: kp\r\nContent-Length: 2\r\n\r\n[]")
    assert _read_answer(answered).startswith(b"HTTP/1.1 401 ")
    answered.sendall(b"GET /v1/stats HTTP/1.1\r\n")
    stop = threading.Event()

    def trickle() -> None:
        while not stop.wait(0.3):
            try:
                unkeyed.sendall(b" ")
                answered.sendall(b"X-More: 1\r\n")
            except OSError:
                return

    trickler = threading.Thread(target=trickle, daemon=True)
    trickler.start()
    try:
        assert (waited := _closed_within(silent, 6.0)) is not None and waited < 3.5
        assert (waited := _closed_within(unkeyed, 6.0)) is not None and waited < 3.5
        assert (waited := _closed_within(answered, 6.0)) is not None and waited < 3.5
        time.sleep(max(0.0, 3.5 - (time.monotonic() - slow._start)))
        assert slow.closed_after and slow.closed_after[0] < 3.5
    finally:
        stop.set()
        slow.stop()
        silent.close()
        unkeyed.close()
        answered.close()
    # The connections that were closed did not stop the server.
    with quick.client("reader") as client:
        assert client.get("/v1/stats").status_code == 200


def test_a_keep_alive_connection_waits_for_its_next_request_no_longer_than_the_deadline(
    quick: ChildServer,
) -> None:
    sock = _connect(quick.url)
    request = (
        f"GET /v1/stats HTTP/1.1\r\nHost: kp\r\nAuthorization: Bearer {quick.keys['reader']}"
        "\r\n\r\n"
    ).encode()
    for _ in range(3):  # each answer re-arms the deadline
        sock.sendall(request)
        assert _read_answer(sock).startswith(b"HTTP/1.1 200 ")
        time.sleep(1.0)
    sock.sendall(b"GET /v1/stats HTTP/1.1\r\n")  # then headers that never end
    waited = _closed_within(sock, 6.0)
    sock.close()
    assert waited is not None and waited < 2.5


def test_accept_errors_are_reported_once_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    import asyncio
    import errno
    import logging

    from knowledgepulse.service._connections import AcceptErrorLog

    now = [100.0]
    report = AcceptErrorLog(10.0, clock=lambda: now[0])
    loop = asyncio.new_event_loop()
    try:
        error = OSError(errno.EMFILE, "Too many open files")
        context = {"message": "socket.accept() out of system resource", "exception": error}
        with caplog.at_level(logging.WARNING, logger="uvicorn.error"):
            for _ in range(2048):
                report(loop, context)
            now[0] += 10.0
            report(loop, context)
    finally:
        loop.close()
    assert [r.getMessage() for r in caplog.records] == [
        "cannot accept connections: [Errno 24] Too many open files",
        "cannot accept connections: [Errno 24] Too many open files "
        "(2,047 more since the last report)",
    ]


def test_the_connection_cap_keeps_a_quarter_of_the_open_files() -> None:
    from knowledgepulse.service._connections import connection_cap

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert connection_cap(10**9) == max(8, soft - max(32, soft // 4))
    assert connection_cap(50) == min(50, max(8, soft - max(32, soft // 4)))
