"""Recording the calls made through the official ``openai`` and ``anthropic`` clients.

While at least one capture is open, the clients' ``create`` methods (Chat Completions and
Messages, sync and async) are replaced by wrappers; the last capture to close puts the
originals back. A wrapper records a call only for the run in its context (a
:class:`contextvars.ContextVar`), so concurrent runs — threads, asyncio tasks — never mix, and
calls made outside any run go through untouched. Recording never changes what the client
returns or raises.
"""

from __future__ import annotations

import functools
import importlib
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from .._errors import MissingDependencyError

__all__ = ["ACTIVE", "Call", "Recorder", "patched_clients", "plain"]

Provider = Literal["openai", "anthropic"]

#: (provider, module, class) of each ``create`` that is recorded.
_TARGETS: list[tuple[Provider, str, str]] = [
    ("openai", "openai.resources.chat.completions", "Completions"),
    ("openai", "openai.resources.chat.completions", "AsyncCompletions"),
    ("anthropic", "anthropic.resources.messages", "Messages"),
    ("anthropic", "anthropic.resources.messages", "AsyncMessages"),
]


@dataclass
class Call:
    """One model call: what was asked, and the reply or the error."""

    provider: Provider
    request: dict[str, Any]
    response: dict[str, Any] | None = None
    error: BaseException | None = None


class Recorder(Protocol):
    def started(self, provider: Provider, request: Mapping[str, Any]) -> Call: ...

    def instruct(self, provider: Provider, request: dict[str, Any]) -> dict[str, Any]: ...


#: The run the current context records into (None: calls are not recorded).
ACTIVE: ContextVar[Recorder | None] = ContextVar("knowledgepulse_capture", default=None)


def plain(value: Any) -> Any:
    """JSON-like data from what a client takes or returns (pydantic models, dicts, lists)."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return plain(dump(mode="json", exclude_none=True))
    if isinstance(value, Mapping):
        return {str(key): plain(item) for key, item in value.items() if item is not None}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    return value


def _record_reply(call: Call, response: Any) -> None:
    # A raw or streamed response (with_raw_response, stream=True) is passed on unread.
    if callable(getattr(response, "model_dump", None)):
        call.response = plain(response)


def _sync_wrapper(original: Callable[..., Any], provider: Provider) -> Callable[..., Any]:
    @functools.wraps(original)
    def create(self: Any, *args: Any, **kwargs: Any) -> Any:
        recorder = ACTIVE.get()
        if recorder is None:
            return original(self, *args, **kwargs)
        call = recorder.started(provider, kwargs)
        kwargs = recorder.instruct(provider, kwargs)
        try:
            response = original(self, *args, **kwargs)
        except Exception as exc:
            call.error = exc
            raise
        _record_reply(call, response)
        return response

    return create


def _async_wrapper(original: Callable[..., Any], provider: Provider) -> Callable[..., Any]:
    @functools.wraps(original)
    async def create(self: Any, *args: Any, **kwargs: Any) -> Any:
        recorder = ACTIVE.get()
        if recorder is None:
            return await original(self, *args, **kwargs)
        call = recorder.started(provider, kwargs)
        kwargs = recorder.instruct(provider, kwargs)
        try:
            response = await original(self, *args, **kwargs)
        except Exception as exc:
            call.error = exc
            raise
        _record_reply(call, response)
        return response

    return create


@dataclass
class _Patches:
    lock: threading.Lock = field(default_factory=threading.Lock)
    users: int = 0
    originals: list[tuple[type, Callable[..., Any]]] = field(default_factory=list)


_PATCHES = _Patches()


def _install() -> None:
    for provider, module_name, class_name in _TARGETS:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        cls = getattr(module, class_name)
        original = cls.__dict__["create"]
        wrap = _async_wrapper if class_name.startswith("Async") else _sync_wrapper
        cls.create = wrap(original, provider)
        _PATCHES.originals.append((cls, original))
    if not _PATCHES.originals:
        raise MissingDependencyError("capturing agent runs", "capture", ["openai", "anthropic"])


def _restore() -> None:
    while _PATCHES.originals:
        cls, original = _PATCHES.originals.pop()
        cls.create = original  # type: ignore[attr-defined]


@contextmanager
def patched_clients() -> Iterator[None]:
    """The clients' ``create`` methods are recorded inside; the first user patches them and
    the last one puts the originals back."""
    with _PATCHES.lock:
        if _PATCHES.users == 0:
            _install()
        _PATCHES.users += 1
    try:
        yield
    finally:
        with _PATCHES.lock:
            _PATCHES.users -= 1
            if _PATCHES.users == 0:
                _restore()
