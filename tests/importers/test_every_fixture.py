"""Every fixture under ``tests/data/importers`` is covered: reproducible import, ``kp score``.

The format folders are checked by ``test_fixture_folders.py`` (JSON/JSONL API and span
formats) and ``test_harness_formats.py`` (agent harnesses); this module makes sure no folder
falls between them, and runs the same two checks on the fixtures outside the format folders
(the top-level ``<format>_*.json`` files, ``units/`` and the Harbor job directory).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from knowledgepulse.cli import main

from ._util import DATA, import_twice
from .test_fixture_folders import FOLDERS
from .test_harness_formats import FORMAT_DIRS

# Folders that are not one format's fixtures: golden files, grouped-unit fixtures, a Harbor
# job (a directory read as a whole) and real files that are refused (what the refusal
# says of them: tests/importers/test_real_trace_losses.py).
OTHER_FOLDERS = {"expected", "units", "harbor_job", "refused"}
LOOSE = sorted(
    [
        *(p for p in DATA.glob("*.json") if p.is_file()),
        *(p for p in (DATA / "units").iterdir() if p.is_file()),
        DATA / "harbor_job",
    ]
)


def _id(path: Path) -> str:
    return str(path.relative_to(DATA))


def test_every_fixture_folder_is_checked() -> None:
    folders = {p.name for p in DATA.iterdir() if p.is_dir()}
    checked = {p.name for p in FOLDERS} | set(FORMAT_DIRS)
    assert folders == checked | OTHER_FOLDERS
    assert not checked & OTHER_FOLDERS


@pytest.mark.parametrize("fixture", LOOSE, ids=_id)
def test_importing_twice_gives_identical_bytes(
    fixture: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outputs = import_twice(fixture, tmp_path)
    _out, err = capsys.readouterr()
    assert "Traceback" not in err
    assert outputs[0] == outputs[1]


@pytest.mark.parametrize("fixture", LOOSE, ids=_id)
def test_kp_score_exits_0_or_1(fixture: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["score", str(fixture), "--from", "auto"])
    _out, err = capsys.readouterr()
    assert code in (0, 1), err
    assert "Traceback" not in err and "internal error" not in err.lower()
