"""Sending a captured trace to a ``kp serve`` instance: ``POST /v1/traces`` with a Bearer key."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request

from ..._schema import ReasoningTrace
from ...scoring._run import accepted_trace
from ...scoring._scorer import ValueScore

__all__ = ["API_KEY_VARIABLE", "contribute"]

#: Where the key comes from when ``api_key`` is not given.
API_KEY_VARIABLE = "KNOWLEDGEPULSE_API_KEY"


def contribute(
    trace: ReasoningTrace,
    score: ValueScore,
    url: str,
    api_key: str | None = None,
    *,
    timeout: float = 10.0,
) -> None:
    """POST the trace (``metadata.quality_score`` set to its value) to ``url``/v1/traces.

    Raises ``OSError`` (``urllib.error.URLError``) when the server cannot be reached or does
    not answer 2xx; the message carries the status and the start of the server's answer.
    """
    data = accepted_trace(trace, score)
    headers = {"Content-Type": "application/json"}
    key = api_key if api_key is not None else os.environ.get(API_KEY_VARIABLE)
    if key:
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(
        url.rstrip("/") + "/v1/traces",
        data=json.dumps(data, ensure_ascii=False).encode("utf-8"),
        headers=headers,
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read()
    except urllib.error.HTTPError as exc:
        answer = exc.read(200).decode("utf-8", "replace")
        raise urllib.error.URLError(f"{url} answered {exc.code}: {answer}") from None
