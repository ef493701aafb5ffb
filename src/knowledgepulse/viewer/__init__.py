"""The trace viewer: a web page to browse scored traces, their steps, rubric results and groups.

The page (``index.html``, ``viewer.js``, ``viewer.css`` in :data:`STATIC_DIR`) is plain
JavaScript calling the ``/v1`` API on its own origin. ``kp serve`` mounts it with
:func:`mount_viewer`. ``kp view`` serves the same application over the files read by
:func:`load_view_files` (``knowledgepulse.service.FilesSource``, a read-only source of
``knowledgepulse.service.create_source_app``); where the ``serve`` extra is absent,
:class:`ViewerServer` (the standard library's server) answers the same contract from memory.
"""

from ._load import GroupEntry, ViewedTrace, ViewerData, load_view_files
from ._queries import (
    QueryError,
    group_list,
    list_traces,
    search_traces,
    trace_detail,
    trace_stats,
)
from ._server import ViewerServer, is_loopback
from ._static import STATIC_DIR, STATIC_FILES, mount_viewer

__all__ = [
    "STATIC_DIR",
    "STATIC_FILES",
    "GroupEntry",
    "QueryError",
    "ViewedTrace",
    "ViewerData",
    "ViewerServer",
    "group_list",
    "is_loopback",
    "list_traces",
    "load_view_files",
    "mount_viewer",
    "search_traces",
    "trace_detail",
    "trace_stats",
]
