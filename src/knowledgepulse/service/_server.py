"""Running the application on uvicorn: in the foreground (``kp serve``) or in a thread."""

from __future__ import annotations

import math
import signal
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["run_server", "server_in_thread"]


def _server(config: Any) -> Any:
    """A uvicorn server whose event loop reports accept errors at a bounded rate."""
    import asyncio

    import uvicorn

    from ._connections import AcceptErrorLog

    class Server(uvicorn.Server):
        async def serve(self, sockets: list[socket.socket] | None = None) -> None:
            asyncio.get_running_loop().set_exception_handler(AcceptErrorLog())
            await super().serve(sockets)

    return Server(config)


def _config(app: Any, host: str, port: int, drain_s: float, **options: Any) -> Any:
    import uvicorn

    from ._connections import ConnectionGuard, connection_cap, guarded_protocol
    from ._logs import redact_access_log
    from ._settings import ServiceSettings

    service = getattr(getattr(app, "state", None), "service", None)
    settings = getattr(service, "settings", None) or ServiceSettings()
    guard = ConnectionGuard(connection_cap(settings.max_connections), settings.header_timeout_s)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        # h11 with a header deadline and a connection cap (see _connections.py).
        http=guarded_protocol(guard),
        # Graceful shutdown: on SIGTERM/SIGINT stop accepting, let the requests in flight
        # finish (up to drain_s), then run the shutdown that closes the base.
        timeout_graceful_shutdown=math.ceil(drain_s),
        timeout_keep_alive=5,
        server_header=False,
        **options,
    )
    redact_access_log()  # after the Config, which configures uvicorn's loggers
    return config


def run_server(
    app: Any, host: str, port: int, *, drain_s: float = 30.0, log_level: str = "info"
) -> None:
    """Serve ``app`` until SIGINT or SIGTERM, then drain the requests in flight.

    After a SIGTERM it returns normally: uvicorn hands the signal on to the handler that was
    there before it, and a stop asked for and carried out is a clean exit, not a kill.
    """
    previous = signal.signal(signal.SIGTERM, lambda *_: None)
    try:
        _server(_config(app, host, port, drain_s, log_level=log_level)).run()
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def server_in_thread(
    app: Any,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    drain_s: float = 5.0,
    log_level: str = "warning",
) -> Iterator[str]:
    """Serve ``app`` in a background thread; yields its base URL (``http://127.0.0.1:PORT``,
    ``http://[::1]:PORT``).

    Port 0 picks a free port; an address that cannot be listened on raises ``OSError`` before
    anything starts. On exit the server drains and stops, as on SIGTERM.
    """
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    server = _server(_config(app, host, bound, drain_s, log_level=log_level))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the server did not start")
        time.sleep(0.01)
    try:
        yield f"http://{shown}:{bound}"
    finally:
        server.should_exit = True
        thread.join(timeout=drain_s + 10)
        sock.close()
