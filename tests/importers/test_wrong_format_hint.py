"""Naming the wrong format: the message names the format the file looks like, for every format.

A new user who picks ``--from`` by guess gets told what to type instead, whichever format they
named (the ATIF, Responses and LangSmith-batch importers said so already; the others only said
what they expected).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from knowledgepulse.cli import main
from knowledgepulse.importers import FORMATS

from ._util import DATA

CHAT = DATA / "openai_chat.json"
LANGFUSE = DATA / "langfuse" / "langgraph-2025-08-22.json"


def _err(path: Path, name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    code = main(["import", str(path), "--from", name, "-o", str(tmp_path / "o.jsonl")])
    assert code == 1
    return capsys.readouterr().err


@pytest.mark.parametrize("name", sorted(n for n in FORMATS if n != "openai"))
def test_a_chat_file_under_another_format_name_says_use_openai(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _err(CHAT, name, tmp_path, capsys)
    assert "it looks like openai: use --from openai" in err
    assert err.count("use --from") == 1


def test_a_langfuse_download_named_openai_says_use_langfuse(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _err(LANGFUSE, "openai", tmp_path, capsys)
    assert "it looks like langfuse: use --from langfuse" in err
