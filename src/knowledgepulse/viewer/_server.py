"""``kp view``'s fallback web server: the page and the ``/v1`` API from memory, on the standard
library, where the ``serve`` extra (FastAPI, uvicorn) is absent. With the extra, ``kp view``
serves the service's own application over its files (``knowledgepulse.service.FilesSource``);
``tests/viewer/test_contract.py`` holds both to the same contract.

:class:`ViewerServer` runs a threading ``http.server`` in a background thread. It answers:

- the page's three files (:data:`STATIC_FILES`), with a content security policy that lets
  the page reach nothing but its own origin;
- the ``/v1`` endpoints of :mod:`._queries` as JSON, each answer one of the service's models
  (:mod:`knowledgepulse.api_models`), every error an ``ErrorBody`` with its ``problems``; with
  ``api_key`` set, each needs ``Authorization: Bearer KEY`` (401 otherwise), as ``kp serve``
  does.

When bound to a loopback address, a request whose ``Host`` header names anything but a
loopback name is refused (403): a web page elsewhere cannot reach the server by pointing its
own host name at 127.0.0.1 (DNS rebinding) and read the traces.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import socket
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from pydantic import BaseModel

from ..api_models import ErrorBody, Problem
from ._load import ViewerData
from ._queries import (
    QueryError,
    compare_runs,
    compare_two,
    group_list,
    list_traces,
    search_traces,
    trace_detail,
    trace_stats,
)
from ._static import STATIC_DIR, STATIC_FILES

__all__ = ["ViewerServer", "is_loopback"]

_LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1"}
_MAX_BODY = 1 << 20
_SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


class ViewerServer:
    """The viewer page and its API over ``data``, served in a background thread.

    Args:
        data: what ``kp view`` loaded (:func:`load_view_files`).
        host: the address to listen on (default loopback).
        port: the port; 0 picks a free one (see :attr:`url`).
        api_key: when set, every ``/v1`` request needs ``Authorization: Bearer <api_key>``.

    Use as a context manager, or call :meth:`start` and :meth:`close`.
    """

    def __init__(
        self, data: ViewerData, host: str = "127.0.0.1", port: int = 0, api_key: str | None = None
    ) -> None:
        self.loopback = is_loopback(host)
        handler = type(
            "_BoundHandler",
            (_Handler,),
            {"data": data, "api_key": api_key, "loopback_only": self.loopback},
        )
        server_class = _IPv6Server if ":" in host else ThreadingHTTPServer
        self._server = server_class((host, port), handler)
        self._thread: threading.Thread | None = None
        self._serving = threading.Event()  # set while serve_forever runs

    @property
    def url(self) -> str:
        """The page's address, e.g. ``http://127.0.0.1:8751/``."""
        host, port = self._server.server_address[:2]
        name = host.decode() if isinstance(host, bytes) else str(host)
        shown = f"[{name}]" if ":" in name else name
        return f"http://{shown}:{port}/"

    def start(self) -> ViewerServer:
        # A short poll: close() (and so every test's teardown) waits for one poll at most.
        self._serving.set()
        self._thread = threading.Thread(target=self._serve, name="kp-view", daemon=True)
        self._thread.start()
        return self

    def _serve(self) -> None:
        try:
            self._server.serve_forever(0.05)
        finally:
            self._serving.clear()

    def wait(self) -> None:
        """Block until the server stops (a KeyboardInterrupt here stops waiting).

        Sleeps and looks, rather than joining the thread: a KeyboardInterrupt that lands
        inside ``Thread.join()`` can leave the thread's state lock taken, and the join in
        :meth:`close` then waits forever (``kp view`` hung on Ctrl-C on a busy machine).
        """
        while self._thread is not None and self._serving.is_set():
            time.sleep(0.2)

    def close(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> ViewerServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


class _IPv6Server(ThreadingHTTPServer):
    address_family = socket.AF_INET6


class _Handler(BaseHTTPRequestHandler):
    data: ViewerData
    api_key: str | None
    loopback_only: bool
    # HTTP/1.0 (the default): one request per connection, so a body left unread (a refused
    # POST) can never be taken for the next request.
    server_version = "kp-view"

    def do_GET(self) -> None:
        self._answer("GET")

    def do_HEAD(self) -> None:
        self._answer("HEAD")

    def do_POST(self) -> None:
        self._answer("POST")

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the terminal shows what kp view says, not one line per request."""

    def _answer(self, method: str) -> None:
        if self.loopback_only and not self._hostis_loopback():
            self._send_error(HTTPStatus.FORBIDDEN, "this server answers localhost only")
            return
        path = urlsplit(self.path).path
        if not path.startswith("/v1/"):
            self._send_static(method, path)
        elif not self._authorized():
            self._send_error(
                HTTPStatus.UNAUTHORIZED,
                "an API key is needed: Authorization: Bearer KEY",
                headers={"WWW-Authenticate": "Bearer"},
            )
        else:
            self._send_api(method, path)

    def _hostis_loopback(self) -> bool:
        host = self.headers.get("Host", "")
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        return name.strip("[]").lower() in _LOOPBACK_NAMES

    def _authorized(self) -> bool:
        if self.api_key is None:
            return True
        given = self.headers.get("Authorization", "")
        expected = f"Bearer {self.api_key}"
        return hmac.compare_digest(given.encode(), expected.encode())

    def _send_static(self, method: str, path: str) -> None:
        found = STATIC_FILES.get(path)
        if found is None or method == "POST":
            self._send_error(HTTPStatus.NOT_FOUND, f"no such page: {path}")
            return
        name, content_type = found
        body = (STATIC_DIR / name).read_bytes()
        self._send(HTTPStatus.OK, body, content_type, head_only=method == "HEAD")

    def _send_api(self, method: str, path: str) -> None:
        query = parse_qs(urlsplit(self.path).query, keep_blank_values=True)
        try:
            if method == "POST" and path == "/v1/search":
                self._send_json(HTTPStatus.OK, search_traces(self.data, self._json_body()))
            elif method == "POST":
                self._send_error(HTTPStatus.METHOD_NOT_ALLOWED, "method not allowed")
            elif path == "/v1/traces":
                self._send_json(HTTPStatus.OK, list_traces(self.data, query))
            elif path.startswith("/v1/traces/"):
                trace_id = unquote(path[len("/v1/traces/") :])
                detail = trace_detail(self.data, trace_id)
                if detail is None:
                    self._send_error(HTTPStatus.NOT_FOUND, f"no trace {trace_id}")
                else:
                    self._send_json(HTTPStatus.OK, detail)
            elif path == "/v1/compare":
                compared = compare_two(self.data, query)
                if isinstance(compared, str):
                    self._send_error(HTTPStatus.NOT_FOUND, f"no trace {compared}")
                else:
                    self._send_json(HTTPStatus.OK, compared)
            elif path == "/v1/runs/compare":
                runs = compare_runs(self.data, query)
                if isinstance(runs, str):
                    self._send_error(HTTPStatus.NOT_FOUND, f"no kp eval lines read from {runs}")
                else:
                    self._send_json(HTTPStatus.OK, runs)
            elif path == "/v1/stats":
                self._send_json(HTTPStatus.OK, trace_stats(self.data))
            elif path == "/v1/groups":
                self._send_json(HTTPStatus.OK, group_list(self.data))
            else:
                self._send_error(HTTPStatus.NOT_FOUND, f"no such endpoint: {path}")
        except QueryError as exc:
            wrong = Problem(path=exc.path, message=exc.message)
            self._send_error(HTTPStatus.UNPROCESSABLE_ENTITY, str(exc), [wrong])

    def _json_body(self) -> Any:
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            raise QueryError("Content-Length", "expected a number") from None
        if not 0 < length <= _MAX_BODY:
            raise QueryError("", f"expected a JSON body of at most {_MAX_BODY} bytes")
        try:
            return json.loads(self.rfile.read(length))
        except RecursionError:
            raise QueryError("", "the body is not JSON: nested too deeply") from None
        except ValueError:
            raise QueryError("", "the body is not JSON") from None

    def _send_error(
        self,
        status: HTTPStatus,
        detail: str,
        problems: list[Problem] | None = None,
        *,
        headers: dict[str, str] | None = None,
    ) -> None:
        self._send_json(status, ErrorBody(detail=detail, problems=problems or []), headers)

    def _send_json(
        self, status: HTTPStatus, body: BaseModel, headers: dict[str, str] | None = None
    ) -> None:
        data = body.model_dump(mode="json", by_alias=True)
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        self._send(status, text.encode(), "application/json", headers=headers)

    def _send(
        self,
        status: HTTPStatus,
        body: bytes,
        content_type: str,
        *,
        headers: dict[str, str] | None = None,
        head_only: bool = False,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in {**_SECURITY_HEADERS, **(headers or {})}.items():
            self.send_header(name, value)
        self.end_headers()
        if not head_only:
            self.wfile.write(body)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is this machine's loopback."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
