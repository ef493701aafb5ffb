"""The backends every knowledge-base test runs against.

PostgreSQL is a real server (16, with pgvector) started once per session by ``pgserver``, in a
temporary folder, listening on a Unix socket only; each test gets a database of its own. When
the server cannot start here (no shared memory, say), the PostgreSQL tests are skipped with
the reason.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

_databases = itertools.count()


@pytest.fixture(scope="session")
def postgres_admin_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The superuser URL of a PostgreSQL server for this session (``postgres`` database)."""
    try:
        with warnings.catch_warnings():  # platformdirs: "XDG_RUNTIME_DIR is not set"
            warnings.simplefilter("ignore")
            from pgserver.postgres_server import get_server
        import psycopg  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"PostgreSQL tests need pgserver and psycopg ({exc})")
    # Not under pytest's temporary folder: pytest keeps it private to its user (0700), and as
    # root pgserver runs the server as a "pgserver" user that must reach the data folder.
    folder = Path(tempfile.mkdtemp(prefix="knowledgepulse-pg-"))
    folder.chmod(0o755)
    try:
        server = get_server(folder / "data", cleanup_mode="stop")
    except Exception as exc:
        detail = getattr(exc, "stderr", None) or getattr(exc, "output", None) or ""
        if isinstance(detail, bytes):
            detail = detail.decode(errors="replace")
        message = f"cannot start PostgreSQL with pgserver: {type(exc).__name__}: {exc} {detail}"
        shutil.rmtree(folder, ignore_errors=True)
        if os.environ.get("CI"):
            pytest.fail(message)  # CI must run the PostgreSQL tests, not skip them
        pytest.skip(message)
    try:
        yield server.get_uri()
    finally:
        server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


def new_database(admin_url: str, owner: str | None = None) -> str:
    """Create an empty database; its URL (the admin's user, or ``owner`` without password)."""
    import psycopg

    name = f"kb_{next(_databases)}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}" + (f" OWNER {owner}" if owner else ""))
    parts = urlsplit(admin_url)
    netloc = f"{owner}@{parts.hostname or ''}" if owner else parts.netloc
    return urlunsplit((parts.scheme, netloc, f"/{name}", parts.query, ""))


@pytest.fixture(params=["sqlite", "postgresql"])
def kb_location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a fresh, empty knowledge base lives, for each backend."""
    if request.param == "postgresql":
        return new_database(request.getfixturevalue("postgres_admin_url"))
    return str(tmp_path / "kb.sqlite")
