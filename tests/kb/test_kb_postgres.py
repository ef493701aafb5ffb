"""What only the PostgreSQL knowledge base has: connection errors without passwords, the
pgvector extension, the HNSW index, and many writer processes on one server."""

from __future__ import annotations

import socket
import sys

import numpy as np
import numpy.typing as npt
import pytest

import knowledgepulse as kp
from _helpers import approx_float
from knowledgepulse._errors import MissingDependencyError
from knowledgepulse.kb import (
    EmbeddingIdentity,
    KnowledgeBaseError,
    StoredTrace,
    open_knowledge_base,
)
from knowledgepulse.kb._pgconnect import redact

from ._writers import run_writers
from .conftest import new_database

IDENTITY = EmbeddingIdentity(model="hashing", dimensions=384, windowing="whole")
SECRET = "hunter2-s3cret"


def unit(seed: int, dims: int = 384) -> npt.NDArray[np.float32]:
    row = np.random.default_rng(seed).normal(size=dims).astype(np.float32)
    normalised: npt.NDArray[np.float32] = row / np.linalg.norm(row)
    return normalised


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_redact_leaves_out_every_password() -> None:
    assert redact(f"postgresql://kp:{SECRET}@db.example:5432/kb") == (
        "postgresql://kp@db.example:5432/kb"
    )
    assert redact(f"postgresql://kp@/kb?host=/run/pg&password={SECRET}&sslmode=disable") == (
        "postgresql://kp@/kb?host=/run/pg&sslmode=disable"
    )
    assert redact("postgres://db/kb") == "postgres://db/kb"


def test_a_down_server_gives_one_line_without_the_password() -> None:
    pytest.importorskip("psycopg")
    port = closed_port()
    with pytest.raises(KnowledgeBaseError) as caught:
        open_knowledge_base(f"postgresql://kp:{SECRET}@127.0.0.1:{port}/kb", IDENTITY)
    message = str(caught.value)
    assert message.startswith(f"postgresql://kp@127.0.0.1:{port}/kb: cannot connect (")
    assert "\n" not in message and SECRET not in message


def test_a_refused_login_gives_the_url_without_the_password(postgres_admin_url: str) -> None:
    url = new_database(postgres_admin_url, owner=None)
    refused = url.replace("postgresql://postgres:@", f"postgresql://nobody:{SECRET}@", 1)
    assert refused != url
    with pytest.raises(KnowledgeBaseError) as caught:
        open_knowledge_base(refused, IDENTITY)
    message = str(caught.value)
    assert message.startswith(redact(refused) + ": cannot connect (")
    assert 'role "nobody" does not exist' in message
    assert "\n" not in message and SECRET not in message


def test_missing_psycopg_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg now raises ImportError
    with pytest.raises(MissingDependencyError) as caught:
        open_knowledge_base("postgresql://kp@127.0.0.1/kb", IDENTITY)
    assert (caught.value.extra, caught.value.modules) == ("postgres", ["psycopg"])
    assert str(caught.value) == (
        "the PostgreSQL knowledge base needs psycopg, which is not installed: "
        "pip install 'knowledgepulse[postgres]'"
    )


def test_a_database_without_pgvector_asks_for_the_extension(postgres_admin_url: str) -> None:
    import psycopg

    with psycopg.connect(postgres_admin_url, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS plain")
        conn.execute("CREATE ROLE plain LOGIN")  # not a superuser: cannot create extensions
    url = new_database(postgres_admin_url, owner="plain")
    with pytest.raises(KnowledgeBaseError, match=r"run CREATE EXTENSION vector in it") as caught:
        open_knowledge_base(url, IDENTITY)
    assert str(caught.value).startswith(f"{url}: needs the pgvector extension")
    with psycopg.connect(url) as conn:  # refused untouched
        assert conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
        ).fetchone() == (0,)


def test_databases_that_are_not_a_base_are_refused_untouched(postgres_admin_url: str) -> None:
    import psycopg

    other = new_database(postgres_admin_url)
    with psycopg.connect(other, autocommit=True) as conn:
        conn.execute("CREATE TABLE notes (x int)")
    with pytest.raises(KnowledgeBaseError, match="a PostgreSQL database but not a knowledge base"):
        open_knowledge_base(other, IDENTITY)
    with psycopg.connect(other) as conn:
        tables = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        assert tables.fetchall() == [("notes",)]

    with pytest.raises(KnowledgeBaseError, match="no such knowledge base"):
        open_knowledge_base(new_database(postgres_admin_url), IDENTITY, create=False)

    newer = new_database(postgres_admin_url)
    open_knowledge_base(newer, IDENTITY).close()
    with psycopg.connect(newer, autocommit=True) as conn:
        conn.execute("UPDATE kb_meta SET value = '99' WHERE key = 'version'")
    with pytest.raises(KnowledgeBaseError, match="written by a newer knowledgepulse"):
        open_knowledge_base(newer, IDENTITY)

    foreign = new_database(postgres_admin_url)
    open_knowledge_base(foreign, IDENTITY).close()
    with psycopg.connect(foreign, autocommit=True) as conn:
        conn.execute("UPDATE kb_meta SET value = 'something.else' WHERE key = 'format'")
    with pytest.raises(
        KnowledgeBaseError, match=r"\?host=\S+: not a knowledge base; nothing was changed"
    ):
        open_knowledge_base(foreign, IDENTITY)


def test_the_hnsw_index_answers_under_ann_and_past_the_threshold_under_auto(
    postgres_admin_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    items = [StoredTrace(id=f"x{i}", trace={"n": i}, vector=unit(i)) for i in range(40)]
    url = new_database(postgres_admin_url)
    with open_knowledge_base(url, IDENTITY, index="ann") as kb:
        assert kb.add_many(items) == 40
        assert kb.stats().index == "ann"
        assert kb.search(unit(7), 2)[0] == kp.kb.Hit("x7", approx_float(1.0, abs=1e-5))
        assert kb.check() == []
    with open_knowledge_base(url, IDENTITY, index="exact") as kb:
        assert kb.stats().index == "exact"
        assert [h.id for h in kb.search(unit(7), 1)] == ["x7"]

    monkeypatch.setattr("knowledgepulse.kb._postgres.ANN_THRESHOLD", 30)
    auto = new_database(postgres_admin_url)
    with open_knowledge_base(auto, IDENTITY) as kb:
        kb.add_many(items[:29])
        assert kb.stats().index == "exact"
        found = kb.nearest_then_add_many(np.stack([unit(29), unit(3)]), ["x29", "again-3"])
        assert found[1] == kp.Nearest("x3", approx_float(1.0, abs=1e-5))
        assert kb.stats().index == "ann"
        assert kb.similar("x29", 1)[0].id != "x29"


def test_eight_writer_processes_lose_nothing_and_never_both_accept_a_near_duplicate(
    postgres_admin_url: str,
) -> None:
    shared, own, workers = 24, 6, 8
    url = new_database(postgres_admin_url)
    open_knowledge_base(url, IDENTITY).close()
    added = run_writers(url, workers, shared, own)
    accepted = [trace_id for worker in added for trace_id in worker]
    shared_tasks = [t.rsplit("-", 1)[1] for t in accepted if t.startswith("kp:trace:w")]
    both_accepted = len(shared_tasks) - len(set(shared_tasks))
    assert both_accepted == 0
    assert sorted(shared_tasks, key=int) == [str(i) for i in range(shared)]  # none lost
    own_added = sorted(t for t in accepted if t.startswith("kp:trace:own"))
    assert own_added == sorted(f"kp:trace:own{w}-{i}" for w in range(workers) for i in range(own))
    with open_knowledge_base(url) as kb:
        assert len(kb) == shared + workers * own
        assert sorted(t.id for t in kb.iter_stored()) == sorted(accepted)
        assert kb.check() == []


def test_an_open_base_keeps_its_password_out_of_sight(postgres_admin_url: str) -> None:
    """The password is needed to connect, and nowhere after: no public attribute, no repr."""
    import psycopg

    with psycopg.connect(postgres_admin_url, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS keeper")
        conn.execute(f"CREATE ROLE keeper LOGIN SUPERUSER PASSWORD '{SECRET}'")
    url = new_database(postgres_admin_url, owner="keeper")
    with_password = url.replace("postgresql://keeper@", f"postgresql://keeper:{SECRET}@", 1)
    assert with_password != url
    kb = open_knowledge_base(with_password, IDENTITY)
    try:
        public = {name: value for name, value in vars(kb).items() if not name.startswith("_")}
        assert SECRET not in repr(public) and SECRET not in repr(kb)
        assert kb.location == redact(with_password)
    finally:
        kb.close()
