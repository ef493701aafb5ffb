"""Returning memory that native runtimes freed to the operating system."""

from __future__ import annotations

from typing import Any

__all__ = ["release_freed_memory"]


def _malloc_trim() -> Any:
    """glibc's ``malloc_trim``, or None where the C library is not glibc."""
    import ctypes
    import ctypes.util

    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


_trim: Any = None
_trim_looked_up = False


def release_freed_memory() -> None:
    """Hand memory freed by the runtimes back to the operating system (glibc only).

    The runtimes allocate and free large, differently sized buffers for every batch; glibc
    keeps what they free in its heaps, so a long ``kp score`` run's resident memory crept up
    batch after batch. ``malloc_trim`` after each call returns it, for far less time than a
    batch takes.
    """
    global _trim, _trim_looked_up
    if not _trim_looked_up:
        _trim, _trim_looked_up = _malloc_trim(), True
    if _trim is not None:
        _trim(0)
