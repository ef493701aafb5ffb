"""The access log without secrets: a key sent by mistake in a query string (``?api_key=``,
``?token=``) or anywhere in the request line is written as ``[REDACTED]``.

uvicorn writes each request line (``GET /v1/traces?api_key=... HTTP/1.1``) to the
``uvicorn.access`` logger; a filter on that logger rewrites the path before any handler sees
it, so every handler (console, file, a collector) gets the redacted line.
"""

from __future__ import annotations

import logging
import re
import urllib.parse

from ..kb._keys import KEY_PREFIX

__all__ = [
    "ACCESS_LOGGER",
    "REDACTED",
    "QuerySecretFilter",
    "redact_access_log",
    "redact_request_target",
]

ACCESS_LOGGER = "uvicorn.access"
REDACTED = "[REDACTED]"
#: Query parameter names whose values are secrets (matched anywhere in the name, any case).
_SECRET_NAME = re.compile(
    r"key|token|secret|passw|pwd|auth|credential|session|signature|sig\b|jwt|bearer", re.I
)
#: A knowledgepulse key anywhere (``kp_<id>_<secret>``), whatever the parameter is called.
_KEY_SHAPED = re.compile(re.escape(KEY_PREFIX) + r"[0-9A-Za-z]+_[0-9A-Za-z_\-%]+")


def redact_request_target(target: str) -> str:
    """``target`` (a path with its query string) with every secret-named parameter's value and
    every key-shaped text replaced by :data:`REDACTED`."""
    path, mark, query = target.partition("?")
    if mark:
        pairs = []
        for pair in re.split(r"([&;])", query):
            name, equals, value = pair.partition("=")
            if equals and value and _SECRET_NAME.search(urllib.parse.unquote_plus(name)):
                pair = f"{name}={REDACTED}"
            pairs.append(pair)
        query = "".join(pairs)
    return _KEY_SHAPED.sub(REDACTED, path + mark + query)


class QuerySecretFilter(logging.Filter):
    """Rewrites the request target of uvicorn's access log records (their third argument)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            record.args = (*args[:2], redact_request_target(args[2]), *args[3:])
        elif isinstance(record.msg, str) and _KEY_SHAPED.search(record.msg):
            record.msg = _KEY_SHAPED.sub(REDACTED, record.msg)
        return True


def redact_access_log() -> None:
    """Put the filter on the access logger (once; after uvicorn has configured logging)."""
    logger = logging.getLogger(ACCESS_LOGGER)
    if not any(isinstance(f, QuerySecretFilter) for f in logger.filters):
        logger.addFilter(QuerySecretFilter())
