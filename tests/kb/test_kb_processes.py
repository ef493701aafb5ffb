"""Several processes on one base, and processes killed mid-run: nothing lost, nothing doubled."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from knowledgepulse.kb import (
    EmbeddingIdentity,
    KnowledgeBaseError,
    open_knowledge_base,
)

from ._writers import run_writers

IDENTITY = EmbeddingIdentity(model="hashing", dimensions=384, windowing="whole")
TESTS = Path(__file__).resolve().parents[1]


def test_concurrent_writers_never_both_accept_a_near_duplicate(kb_location: str) -> None:
    count, workers = 20, 4
    open_knowledge_base(kb_location, IDENTITY).close()
    added = run_writers(kb_location, workers, count)
    accepted = [trace_id for worker in added for trace_id in worker]
    tasks = [trace_id.rsplit("-", 1)[1] for trace_id in accepted]
    assert sorted(tasks, key=int) == [str(i) for i in range(count)]  # each task once, no more
    with open_knowledge_base(kb_location) as kb:
        assert len(kb) == count
        assert kb.check() == []


KILLED_WRITER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {tests!r})
    import knowledgepulse as kp
    from _helpers import HashingEmbedder, make_trace
    from knowledgepulse.kb import EmbeddingIdentity, open_knowledge_base

    identity = EmbeddingIdentity(model="hashing", dimensions=384, windowing="whole")
    with open_knowledge_base({location!r}, identity) as kb:
        scorer = kp.Scorer(embedder=HashingEmbedder(), memory=kb, batch_size=8)
        traces = (
            make_trace(trace_id=f"kp:trace:{{i}}", objective=f"objective {{i}} " * 20)
            for i in range({count})
        )
        for n, _ in enumerate(scorer.iter_scores(traces)):
            if n == 40:
                print("started", flush=True)
    """
)


def test_a_writer_killed_mid_run_leaves_a_sound_base(kb_location: str) -> None:
    count = 3000
    script = KILLED_WRITER.format(tests=str(TESTS), location=kb_location, count=count)
    process = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert process.stdout is not None and process.stderr is not None
    assert process.stdout.readline().strip() == "started", process.stderr.read()
    time.sleep(0.3)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    with open_knowledge_base(kb_location) as kb:
        assert kb.check() == []
        partial = len(kb)
    assert 0 < partial < count
    # A re-run completes without duplicates.
    rerun = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr
    with open_knowledge_base(kb_location) as kb:
        assert len(kb) == count
        assert len({t.id for t in kb.iter_stored()}) == count
        assert kb.check() == []


def test_files_that_are_not_a_base_are_refused_untouched(tmp_path: Path) -> None:
    if not str(tmp_path):
        pytest.skip()
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not a database at all" * 100)
    before = junk.read_bytes()
    with pytest.raises(KnowledgeBaseError, match="not a knowledge base"):
        open_knowledge_base(junk, IDENTITY)
    assert junk.read_bytes() == before

    import sqlite3

    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE notes (x)")
    with pytest.raises(KnowledgeBaseError, match="an SQLite file but not a knowledge base"):
        open_knowledge_base(other, IDENTITY)

    newer = tmp_path / "newer.sqlite"
    open_knowledge_base(newer, IDENTITY).close()
    with sqlite3.connect(newer) as conn:
        conn.execute("UPDATE kb_meta SET value = '99' WHERE key = 'version'")
    with pytest.raises(KnowledgeBaseError, match="written by a newer knowledgepulse"):
        open_knowledge_base(newer, IDENTITY)
