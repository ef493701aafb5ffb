"""kp score --kb and kp kb, end to end on an SQLite base (the embedder is a test double)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from _helpers import HashingEmbedder, make_trace
from knowledgepulse.cli import main


@pytest.fixture(autouse=True)
def _hashing_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    from knowledgepulse import embedding

    def choose(*_: Any, **__: Any) -> Any:
        return embedding.EmbedderChoice(
            embedding.check_embedder(HashingEmbedder()), "onnx", "a test embedder"
        )

    monkeypatch.setattr(embedding, "choose_embedder", choose)


def kp(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def rows(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def write(path: Path, traces: list[dict[str, Any]]) -> str:
    path.write_text("".join(json.dumps(t) + "\n" for t in traces))
    return str(path)


def pile(suffix: str = "") -> list[dict[str, Any]]:
    return [
        make_trace(
            trace_id=f"kp:trace:{i}{suffix}",
            objective=f"task {i}: " + " ".join(f"w{i}x{k}" for k in range(8)),
        )
        for i in range(8)
    ]


def test_score_twice_then_under_new_ids(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = str(tmp_path / "kb.sqlite")
    source = write(tmp_path / "t.jsonl", pile())
    code, out, err = kp(capsys, "score", source, "--kb", base)
    assert code == 0, err
    assert [r["stored"] for r in rows(out)] == ["added"] * 8
    assert f"knowledge base: {base} (0 traces)" in err
    code, out, err = kp(capsys, "score", source, "--kb", base)
    assert code == 0 and f"knowledge base: {base} (8 traces)" in err
    assert [r["stored"] for r in rows(out)] == ["already_stored"] * 8
    renamed = write(tmp_path / "renamed.jsonl", pile("-again"))
    code, out, _ = kp(capsys, "score", renamed, "--kb", base, "--add", "none")
    assert code == 0
    for i, record in enumerate(rows(out)):
        assert record["nearest"]["id"] == f"kp:trace:{i}"
        assert record["novelty"] == pytest.approx(0.0, abs=1e-5)
        assert record["stored"] == "not_added"
    code, out, _ = kp(capsys, "kb", "stats", "--kb", base, "--json")
    assert json.loads(out)["traces"] == 8


def test_threshold_makes_add_accepted_by_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = str(tmp_path / "kb.sqlite")
    source = write(tmp_path / "t.jsonl", pile() + pile("-copy"))
    code, out, _ = kp(capsys, "score", source, "--kb", base, "--threshold", "0.55", "-q")
    assert code == 0
    scored = rows(out)
    assert [r["stored"] == "added" for r in scored] == [r["passed"] for r in scored]
    assert all(r["stored"] == "not_added" for r in scored[8:])


def test_kb_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = write(tmp_path / "t.jsonl", pile())
    base = str(tmp_path / "kb.sqlite")
    for args, message in [
        (["--kb", base, "--no-embed"], "cannot be used with --no-embed"),
        (["--add", "all"], "give --kb"),
        (["--kb", base, "--add", "accepted"], "--add accepted needs --threshold"),
    ]:
        code, _, err = kp(capsys, "score", source, *args)
        assert code == 2 and message in err, err
    junk = tmp_path / "junk.sqlite"
    junk.write_text("hello")
    code, _, err = kp(capsys, "score", source, "--kb", str(junk))
    assert code == 2 and "not a knowledge base" in err and junk.read_text() == "hello"


def test_kb_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = str(tmp_path / "kb.sqlite")
    kp(capsys, "score", write(tmp_path / "t.jsonl", pile()), "--kb", base, "-q")
    code, out, _ = kp(
        capsys, "kb", "search", "task 3: w3x0 w3x1", "--kb", base, "-k", "2", "--json"
    )
    hits = json.loads(out)
    assert code == 0 and hits[0]["id"] == "kp:trace:3" and len(hits) == 2
    # Fused with the full-text index, as recall ranks: an exact word finds its trace.
    code, out, _ = kp(capsys, "kb", "search", "w5x1", "--kb", base, "-k", "1", "--json")
    assert code == 0 and [h["id"] for h in json.loads(out)] == ["kp:trace:5"]
    code, out, err = kp(capsys, "kb", "search", "the of and", "--kb", base, "--json")
    assert (code, json.loads(out)) == (0, []) and "no traces:" in err
    code, out, _ = kp(capsys, "kb", "similar", "kp:trace:3", "--kb", base, "--json")
    assert code == 0 and "kp:trace:3" not in [h["id"] for h in json.loads(out)]
    code, out, _ = kp(capsys, "kb", "show", "kp:trace:3", "--kb", base)
    shown = json.loads(out)
    assert shown["trace"]["id"] == "kp:trace:3" and shown["record"]["stored"] == "added"
    assert shown["source"].endswith("t.jsonl:4")
    code, _, err = kp(capsys, "kb", "show", "kp:trace:nope", "--kb", base)
    assert code == 2 and "no trace kp:trace:nope" in err
    code, out, err = kp(capsys, "kb", "check", "--kb", base)
    assert (code, out) == (0, "") and "8 traces, 0 problems" in err
    export = str(tmp_path / "export.jsonl.gz")
    assert kp(capsys, "kb", "export", "--kb", base, "-o", export)[0] == 0
    copy = str(tmp_path / "copy.sqlite")
    code, _, err = kp(capsys, "kb", "import", export, "--kb", copy)
    assert code == 0 and "records in: 8 = processed 8 + rejected 0; traces added: 8" in err
    code, _, err = kp(capsys, "kb", "import", export, "--kb", copy)
    assert code == 0 and "traces added: 0" in err
    code, out, _ = kp(capsys, "kb", "stats", "--kb", copy)
    assert "traces          8" in out


def test_import_refuses_a_broken_score_record_by_file_line_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = str(tmp_path / "kb.sqlite")
    kp(capsys, "score", write(tmp_path / "t.jsonl", pile()), "--kb", base, "-q")
    export = tmp_path / "export.jsonl"
    assert kp(capsys, "kb", "export", "--kb", base, "-o", str(export))[0] == 0
    lines = rows(export.read_text())
    del lines[1]["record"]["novelty_source"]
    lines[3]["record"]["score"] = 1.5
    lines[4]["record"]["weights"] = {"complexity": 1, "novelty": 0, "tool_diversity": 0}
    lines[5]["record"] = "not a record"
    broken = write(tmp_path / "broken.jsonl", lines)
    code, _, err = kp(capsys, "kb", "import", broken, "--kb", str(tmp_path / "copy.sqlite"))
    assert code == 1
    assert err.splitlines() == [
        f"{broken}:2: record.novelty_source: Field required",
        f"{broken}:4: record.score: Input should be less than or equal to 1",
        f"{broken}:5: record.weights.outcome: Field required",
        f"{broken}:6: record: Input should be a valid dictionary or instance of ScoreRecord",
        "records in: 8 = processed 4 + rejected 4; traces added: 4",
    ]


def test_import_refuses_lines_that_are_not_export_lines_by_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    odd = tmp_path / "odd.jsonl"
    odd.write_text('{broken\n{"schema": "something else"}\n')
    code, _, err = kp(capsys, "kb", "import", str(odd), "--kb", str(tmp_path / "kb.sqlite"))
    assert code == 1
    assert err.splitlines() == [
        f"{odd}:1: invalid JSON: Expecting property name enclosed in double quotes (column 2)",
        f"{odd}:2: not a kp kb export line (schema knowledgepulse.kb-entry/1)",
        "records in: 2 = processed 0 + rejected 2; traces added: 0",
    ]
