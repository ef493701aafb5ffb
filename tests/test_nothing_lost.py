"""Nothing lost, end to end: every record in is processed, rejected or said not processed.

``kp`` is driven through ``main([...])`` and, where signals or pipes are involved, as a real
process. Every run's accounting line ``records in: N = processed P + rejected R [+ not
processed K (why)]`` is parsed and checked against the files written.
"""

from __future__ import annotations

import functools
import gzip
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from _helpers import make_trace
from knowledgepulse.cli import main
from knowledgepulse.scoring._parallel import WORKERS_ENV

DEEP = "nested deeper than 200 levels (the limit)"
LONE_SURROGATE = "a string holds a lone surrogate escape (e.g. \\ud800): not writable as UTF-8"
ACCOUNTING = re.compile(
    r"^records in: (\d+) = processed (\d+) \+ rejected (\d+)"
    r"(?: \+ not processed (\d+) \((interrupted|stopped by --max-errors)\))?",
    re.MULTILINE,
)


@dataclass(frozen=True)
class Accounting:
    records_in: int
    processed: int
    rejected: int
    not_processed: int
    why: str | None


def accounting(stderr: str) -> Accounting:
    """The run's one accounting line, parsed; it must add up."""
    found = ACCOUNTING.findall(stderr)
    assert len(found) == 1, stderr
    n, p, r, k, why = found[0]
    result = Accounting(int(n), int(p), int(r), int(k or 0), why or None)
    assert result.records_in == result.processed + result.rejected + result.not_processed
    return result


def kp(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def json_lines(path: Path) -> list[dict[str, Any]]:
    data = path.read_bytes()
    if path.name.endswith(".gz"):
        data = gzip.decompress(data)
    text = data.decode("utf-8")
    assert text == "" or text.endswith("\n"), "the last line was cut"
    return [json.loads(line) for line in text.splitlines()]


def trace_line(number: int, **changes: Any) -> str:
    return json.dumps(make_trace(trace_id=f"kp:trace:{number}", **changes))


def kp_command() -> list[str]:
    return [sys.executable, "-m", "knowledgepulse"]


@pytest.fixture(params=["0", "2"], ids=["in-process", "2-workers"])
def score_workers(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run ``kp score`` in process, then on two worker processes (child processes too)."""
    monkeypatch.setenv(WORKERS_ENV, request.param)
    return str(request.param)


def kp_env() -> dict[str, str]:
    return {**os.environ, "KNOWLEDGEPULSE_EMBEDDER": "none"}


# -- outputs never overwrite inputs ---------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        ["score", "--no-embed", "-o", "{target}"],
        ["score", "--no-embed", "--threshold", "0.1", "--accepted", "{target}"],
        ["score", "--no-embed", "--rejects", "{target}"],
        ["import", "--from", "trace", "-o", "{target}"],
        ["import", "--from", "trace", "--rejects", "{target}"],
        ["eval", "--rubric", "scheduling", "-o", "{target}"],
        ["eval", "--rubric", "scheduling", "--rejects", "{target}"],
        ["eval", "--rubric", "scheduling", "--report-json", "{target}"],
        ["report", "-o", "{target}"],
    ],
)
@pytest.mark.parametrize("named", ["the file", "its directory"])
def test_an_output_naming_an_input_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], options: list[str], named: str
) -> None:
    folder = tmp_path / "in" / "sub"
    folder.mkdir(parents=True)
    target = folder / "traces.jsonl"
    original = (trace_line(1) + "\n{broken\n").encode()
    target.write_bytes(original)
    given = str(target) if named == "the file" else str(tmp_path / "in")
    command, *rest = options
    args = [command, given, *(a.replace("{target}", str(target)) for a in rest)]
    code, out, err = kp(capsys, *args)
    assert code == 2
    flag = rest[rest.index("{target}") - 1]
    assert err == (
        f"kp: error: {flag} {target} is also an input file: refusing to overwrite it "
        f"(see 'kp {command} --help')\n"
    )
    assert out == ""
    assert target.read_bytes() == original


def test_an_output_reaching_an_input_by_another_path_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "traces.jsonl"
    original = (trace_line(1) + "\n").encode()
    target.write_bytes(original)
    (tmp_path / "link.jsonl").symlink_to(target)
    (tmp_path / "sub").mkdir()
    for alias in (tmp_path / "link.jsonl", tmp_path / "." / "sub" / ".." / "traces.jsonl"):
        code, _, err = kp(capsys, "score", "--no-embed", str(target), "-o", str(alias))
        assert code == 2, alias
        assert "is also an input file: refusing to overwrite it" in err
    assert target.read_bytes() == original


def test_two_outputs_naming_one_file_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "t.jsonl"
    source.write_text(trace_line(1) + "\n")
    same = str(tmp_path / "out.jsonl")
    code, _, err = kp(capsys, "score", "--no-embed", str(source), "-o", same, "--rejects", same)
    assert code == 2
    assert err.startswith("kp: error: -o and --rejects name the same file")
    assert not Path(same).exists()


# -- stops: Ctrl-C, SIGTERM, --max-errors ---------------------------------------------------

BIG_RECORDS = 20_000


def is_broken_line(line: int) -> bool:
    return line % 100 == 50


@pytest.fixture(scope="module")
def big_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """20,000 traces, every hundredth one (lines 50, 150, …) not JSON."""
    path = tmp_path_factory.mktemp("big") / "big.jsonl"
    template = trace_line(0)
    path.write_text(
        "".join(
            ("{broken" if is_broken_line(n) else template.replace("kp:trace:0", f"kp:trace:{n}"))
            + "\n"
            for n in range(1, BIG_RECORDS + 1)
        )
    )
    return path


@dataclass
class Finished:
    code: int
    stdout: str
    stderr: str


def run_until(args: list[str], ready: Callable[[], bool], sig: int, folder: Path) -> Finished:
    """Start ``kp args``, wait until ``ready()``, send ``sig`` and collect what it printed."""
    stdout_path, stderr_path = folder / "stdout.txt", folder / "stderr.txt"
    with open(stdout_path, "wb") as stdout, open(stderr_path, "wb") as stderr:
        process = subprocess.Popen(
            [*kp_command(), *args], stdout=stdout, stderr=stderr, env=kp_env()
        )
        try:
            deadline = time.monotonic() + 60
            while not ready() and process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
            assert process.poll() is None, "the run ended before it could be interrupted"
            process.send_signal(sig)
            code = process.wait(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    return Finished(code, stdout_path.read_text(), stderr_path.read_text())


def size_over(path: Path, size: int) -> Callable[[], bool]:
    return lambda: path.exists() and path.stat().st_size > size


def check_interrupted_score(
    finished: Finished, out_path: Path, rejects_path: Path, sig: int = signal.SIGINT
) -> Accounting:
    assert finished.code == 128 + sig, finished.stderr
    assert "Traceback" not in finished.stderr and "internal error" not in finished.stderr
    assert "interrupted: the output holds every line written so far" in finished.stderr
    counts = accounting(finished.stderr)
    broken, valid = lines_read(counts)
    scores = json_lines(out_path)
    assert len(scores) == counts.processed
    assert [s["line"] for s in scores] == valid[: counts.processed]
    assert [s["id"] for s in scores] == [f"kp:trace:{n}" for n in valid[: counts.processed]]
    rejected = json_lines(rejects_path)
    assert [r["line"] for r in rejected] == broken[: counts.rejected]
    return counts


def lines_read(counts: Accounting) -> tuple[list[int], list[int]]:
    """The broken and the valid lines among those an interrupted run read, checked.

    A broken line is rejected as soon as it is read, so only the last line read can be broken
    and not yet rejected; valid lines wait for their batch (not processed when interrupted).
    """
    assert 0 < counts.records_in < BIG_RECORDS
    assert counts.why == ("interrupted" if counts.not_processed else None)
    read = range(1, counts.records_in + 1)
    broken = [n for n in read if is_broken_line(n)]
    valid = [n for n in read if not is_broken_line(n)]
    unrejected = len(broken) - counts.rejected
    assert unrejected == 0 or (unrejected == 1 and broken[-1] == counts.records_in)
    assert counts.processed + counts.not_processed == len(valid) + unrejected
    return broken, valid


@pytest.mark.usefixtures("score_workers")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_score_stopped_by_a_signal_accounts_for_every_record(
    big_file: Path, tmp_path: Path, sig: int
) -> None:
    out_path, rejects_path = tmp_path / "out.jsonl", tmp_path / "rejects.jsonl"
    args = ["score", str(big_file), "-o", str(out_path), "--rejects", str(rejects_path)]
    finished = run_until(args, size_over(out_path, 100_000), sig, tmp_path)
    check_interrupted_score(finished, out_path, rejects_path, sig)


@pytest.mark.usefixtures("score_workers")
def test_gzip_output_killed_by_sigterm_decompresses_to_whole_lines(
    big_file: Path, tmp_path: Path
) -> None:
    out_path, rejects_path = tmp_path / "out.jsonl.gz", tmp_path / "rejects.jsonl.gz"
    args = ["score", str(big_file), "-o", str(out_path), "--rejects", str(rejects_path), "-q"]
    finished = run_until(args, size_over(out_path, 0), signal.SIGTERM, tmp_path)
    counts = check_interrupted_score(finished, out_path, rejects_path, signal.SIGTERM)
    assert counts.processed > 0


def test_validate_interrupted_prints_its_accounting_line(big_file: Path, tmp_path: Path) -> None:
    stdout_path = tmp_path / "stdout.txt"
    finished = run_until(
        ["validate", str(big_file), "-q"], size_over(stdout_path, 0), signal.SIGINT, tmp_path
    )
    assert finished.code == 130, finished.stderr
    assert "Traceback" not in finished.stderr
    counts = accounting(finished.stderr)
    lines_read(counts)
    assert counts.not_processed <= 1  # validate checks each record as soon as it is read
    assert f": {counts.processed} valid, {counts.rejected} invalid" in finished.stderr
    problem = "invalid JSON: Expecting property name enclosed in double quotes (column 2)"
    for line in finished.stdout.splitlines():
        assert re.fullmatch(rf"{re.escape(str(big_file))}:\d+: {re.escape(problem)}", line) or (
            line.startswith("… and ")
        ), line


# -- exit statuses scripts rely on: 128 + the signal, after the same clean stop --------------

#: Every batch command that reads through the tally, with its output: (args, output file).
BATCH_COMMANDS = {
    "validate": ["validate", "{source}"],
    "score": ["score", "{source}", "-o", "{out}", "--rejects", "{rejects}"],
    "import": ["import", "--from", "trace", "{source}", "-o", "{out}", "--rejects", "{rejects}"],
    "redact": ["redact", "{source}", "-o", "{out}", "--rejects", "{rejects}"],
    "eval": ["eval", "--rubric", "scheduling", "{source}", "-o", "{out}", "--rejects", "{rejects}"],
}


def stop_with_signals(
    command: str, source: Path, folder: Path, sig: int, count: int
) -> tuple[Finished, Accounting]:
    """Run ``command`` until it has written results, then send ``sig`` ``count`` times, 20 ms
    apart (a user pressing Ctrl-C again, a supervisor repeating SIGTERM)."""
    out_path, rejects_path = folder / "out.jsonl", folder / "rejects.jsonl"
    args = [
        a.format(source=source, out=out_path, rejects=rejects_path) for a in BATCH_COMMANDS[command]
    ]
    stdout_path, stderr_path = folder / "stdout.txt", folder / "stderr.txt"
    ready = size_over(
        stdout_path if command == "validate" else out_path, 100_000 if command != "validate" else 0
    )
    with open(stdout_path, "wb") as stdout, open(stderr_path, "wb") as stderr:
        process = subprocess.Popen(
            [*kp_command(), *args], stdout=stdout, stderr=stderr, env=kp_env()
        )
        try:
            deadline = time.monotonic() + 60
            while not ready() and process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
            assert process.poll() is None, "the run ended before it could be stopped"
            for _ in range(count):
                if process.poll() is not None:
                    break
                process.send_signal(sig)
                time.sleep(0.02)
            code = process.wait(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    finished = Finished(code, stdout_path.read_text(), stderr_path.read_text())
    assert "Traceback" not in finished.stderr and "internal error" not in finished.stderr
    return finished, accounting(finished.stderr)


@pytest.mark.parametrize("command", list(BATCH_COMMANDS))
@pytest.mark.parametrize(
    ("sig", "count"),
    [(signal.SIGINT, 1), (signal.SIGINT, 2), (signal.SIGTERM, 1), (signal.SIGTERM, 3)],
    ids=["SIGINT", "SIGINT-twice", "SIGTERM", "SIGTERM-thrice"],
)
def test_a_stopped_batch_command_exits_128_plus_the_signal_after_its_accounting(
    big_file: Path, tmp_path: Path, command: str, sig: int, count: int
) -> None:
    finished, counts = stop_with_signals(command, big_file, tmp_path, sig, count)
    assert counts.rejected > 0  # records were rejected before the stop: still not 1
    assert finished.code == 128 + sig, finished.stderr
    assert counts.records_in < BIG_RECORDS
    assert "interrupted" in finished.stderr


@pytest.mark.usefixtures("score_workers")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_score_on_workers_stopped_exits_128_plus_the_signal(
    big_file: Path, tmp_path: Path, sig: int
) -> None:
    finished, counts = stop_with_signals("score", big_file, tmp_path, sig, 2)
    assert finished.code == 128 + sig, finished.stderr
    assert counts.rejected > 0


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_curate_stopped_while_embedding_accounts_and_keeps_the_vectors(
    tmp_path: Path, sig: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from knowledgepulse.embedding import choose_embedder

    monkeypatch.delenv("KNOWLEDGEPULSE_EMBEDDER")  # kp curate uses the default embedder
    if choose_embedder("auto", bulk=True).embedder is None:
        pytest.skip("kp curate needs an embedder")
    rng = random.Random(7)
    words = ["alpha", "beta", "gamma", "delta", "kappa", "lambda", "sigma", "omega"]
    source = tmp_path / "pile.jsonl"
    source.write_text(
        "".join(
            (
                "{broken"
                if is_broken_line(n)
                else trace_line(n, objective=" ".join(rng.choice(words) for _ in range(12)))
            )
            + "\n"
            for n in range(1, 3001)
        )
    )
    kept, stderr_path = tmp_path / "kept.jsonl", tmp_path / "stderr.txt"
    env = {k: v for k, v in os.environ.items() if k != "KNOWLEDGEPULSE_EMBEDDER"}
    with open(stderr_path, "wb") as stderr:
        process = subprocess.Popen(
            [
                *kp_command(),
                "curate",
                "--by",
                "embedding",
                str(source),
                "-o",
                str(kept),
                "--groups",
                str(tmp_path / "g"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env=env,
        )
        try:
            deadline = time.monotonic() + 120
            # Traces are embedded as they are read, into the work directory's vector spool.
            vectors = tmp_path / ".kept.jsonl.kp-curate" / "vectors.f32"
            while (
                not vectors.exists() or not vectors.stat().st_size
            ) and time.monotonic() < deadline:
                assert process.poll() is None, stderr_path.read_text()
                time.sleep(0.01)
            assert process.poll() is None, "curating ended before it could be stopped"
            process.send_signal(sig)
            code = process.wait(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    err = stderr_path.read_text()
    assert code == 128 + sig, err
    counts = accounting(err)
    # Nothing is written, so nothing read counts as processed.
    assert counts.processed == 0 and counts.records_in > 0
    assert counts.records_in == counts.rejected + counts.not_processed
    assert "interrupted before curating: nothing was written; " in err
    assert err.rstrip().endswith("for the next run")
    assert not kept.exists()
    assert vectors.stat().st_size > 0  # what was embedded stays for the next run


@pytest.mark.parametrize("command", ["score", "validate"])
def test_output_and_messages_into_a_closed_pipe_exit_0(big_file: Path, command: str) -> None:
    # kp score FILE 2>&1 | head -1: the pipe closes while kp still writes on both streams.
    process = subprocess.Popen(
        [*kp_command(), command, str(big_file)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=kp_env(),
    )
    assert process.stdout is not None
    process.stdout.readline()
    process.stdout.close()
    assert process.wait(timeout=60) == 0


class InterruptedStdin:
    """Standard input that delivers ``lines`` and then Ctrl-C, at a known point of a run."""

    def __init__(self, lines: list[bytes]) -> None:
        self._lines = lines

    def __iter__(self) -> Iterator[bytes]:
        yield from self._lines
        raise KeyboardInterrupt

    def read(self) -> bytes:
        raise KeyboardInterrupt


def interrupted_stdin_lines() -> list[bytes]:
    """Five traces, then a broken record, then four more traces."""
    return [(b"{broken" if n == 6 else trace_line(n).encode()) + b"\n" for n in range(1, 11)]


def test_ctrl_c_at_a_known_point_of_validate(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", InterruptedStdin(interrupted_stdin_lines()))
    code, out, err = kp(capsys, "validate", "-", "-q")
    assert code == 130
    assert out == (
        "<stdin>:6: invalid JSON: Expecting property name enclosed in double quotes (column 2)\n"
    )
    assert err.startswith(
        "records in: 10 = processed 9 + rejected 1 (interrupted: the rest of the input was not read)"
    )


def test_ctrl_c_at_a_known_point_of_score(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr(sys, "stdin", InterruptedStdin(interrupted_stdin_lines()))
    out_path = tmp_path / "out.jsonl"
    code, _, err = kp(capsys, "score", "--no-embed", "-", "-o", str(out_path), "--batch-size", "4")
    assert code == 130
    counts = accounting(err)
    # Traces are scored four at a time: 1-4 and 5, 7, 8, 9 were; 10 was read, then Ctrl-C.
    assert counts == Accounting(10, 8, 1, 1, "interrupted")
    assert [s["line"] for s in json_lines(out_path)] == [1, 2, 3, 4, 5, 7, 8, 9]


def test_validate_interrupted_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", InterruptedStdin(interrupted_stdin_lines()))
    code, _, err = kp(capsys, "validate", "-")
    assert code == 130
    assert "interrupted" in err


def first_line_then_close(args: list[str], source: Path) -> tuple[int, str, str]:
    """``kp args | head -1``: read one line of stdout, close it, let kp finish."""
    process = subprocess.Popen(
        [*kp_command(), *args, str(source)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=kp_env(),
    )
    assert process.stdout is not None and process.stderr is not None
    first = process.stdout.readline().decode()
    process.stdout.close()
    stderr = process.stderr.read().decode()
    return process.wait(timeout=60), first, stderr


@pytest.fixture(scope="module")
def three_thousand_traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("pipe") / "traces.jsonl"
    path.write_text("".join(trace_line(n) + "\n" for n in range(1, 3001)))
    return path


@pytest.mark.usefixtures("score_workers")
def test_score_into_a_closed_pipe_ends_quietly(three_thousand_traces: Path) -> None:
    _, first, stderr = first_line_then_close(["score", "-q"], three_thousand_traces)
    assert json.loads(first)["id"] == "kp:trace:1"
    assert stderr == ""


@pytest.mark.usefixtures("score_workers")
def test_score_into_a_closed_pipe_exits_0(three_thousand_traces: Path) -> None:
    code, _, _ = first_line_then_close(["score", "-q"], three_thousand_traces)
    assert code == 0


def blocked_writing(pid: int) -> bool:
    """Whether process ``pid`` waits for room in a pipe (its reader does not read)."""
    try:
        return "pipe_write" in Path(f"/proc/{pid}/wchan").read_text()
    except OSError:
        return False


@pytest.mark.usefixtures("score_workers")
def test_summary_agrees_with_the_accounting_line_after_an_interrupt(
    three_thousand_traces: Path,
) -> None:
    # kp score writes to a pipe nobody reads until it blocks in the middle of writing a
    # record; Ctrl-C then arrives while the record is being written, and takes effect once
    # it is written: that record must be in the summary as in the accounting line.
    process = subprocess.Popen(
        [*kp_command(), "score", str(three_thousand_traces)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=kp_env(),
    )
    try:
        deadline = time.monotonic() + 60
        while not blocked_writing(process.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert process.poll() is None
        process.send_signal(signal.SIGINT)
        time.sleep(0.2)  # the signal is taken while the write waits
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    stderr = err.decode()
    assert process.returncode == 130, stderr
    counts = accounting(stderr)
    written = [json.loads(line) for line in out.decode().splitlines()]
    assert counts.processed == len(written) > 0
    assert f"traces scored: {counts.processed} " in stderr
    assert re.search(rf"^code-review +{counts.processed} ", stderr, re.MULTILINE)  # per domain


def max_errors_file(tmp_path: Path) -> Path:
    path = tmp_path / "t.jsonl"
    path.write_text(
        "".join(("{broken" if n % 10 == 6 else trace_line(n)) + "\n" for n in range(1, 101))
    )
    return path


@pytest.mark.usefixtures("score_workers")
def test_max_errors_stops_score_and_the_accounting_adds_up(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = max_errors_file(tmp_path)
    out_path, rejects_path = tmp_path / "out.jsonl", tmp_path / "rejects.jsonl"
    code, _, err = kp(
        capsys,
        "score",
        str(source),
        "-o",
        str(out_path),
        "--rejects",
        str(rejects_path),
        "--max-errors",
        "3",
    )
    assert code == 1
    counts = accounting(err)
    assert (counts.records_in, counts.rejected) == (26, 3)  # the third bad line is line 26
    assert counts.processed + counts.not_processed == 23
    assert counts.why == ("stopped by --max-errors" if counts.not_processed else None)
    assert len(json_lines(out_path)) == counts.processed
    assert [r["line"] for r in json_lines(rejects_path)] == [6, 16, 26]


@pytest.mark.usefixtures("score_workers")
@pytest.mark.parametrize(
    "args",
    [
        ["validate", "--max-errors", "3"],
        ["import", "--from", "trace", "--max-errors", "3", "-o", "{out}"],
        ["score", "--max-errors", "3", "--batch-size", "1", "-o", "{out}"],
    ],
    ids=["validate", "import", "score-batch-1"],
)
def test_max_errors_stops_every_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    source = max_errors_file(tmp_path)
    out_path = tmp_path / "out.jsonl"
    command, *rest = args
    code, _, err = kp(
        capsys, command, str(source), *(a.replace("{out}", str(out_path)) for a in rest)
    )
    assert code == 1
    assert "records in: 26 = processed 23 + rejected 3" in err
    if out_path.exists():
        assert len(json_lines(out_path)) == 23


def test_max_errors_stop_is_said_even_when_nothing_read_is_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = kp(capsys, "validate", str(max_errors_file(tmp_path)), "--max-errors", "3")
    assert code == 1
    assert "stopped by --max-errors" in err


@pytest.mark.usefixtures("score_workers")
def test_rejection_lines_are_printed_as_they_are(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    smiling = make_trace(trace_id="kp:trace:smile")
    smiling["metadata"]["success"] = ":smile:"
    source = tmp_path / "t.jsonl"
    source.write_text(
        json.dumps(smiling)
        + "\n"
        + "".join(trace_line(n) + "\n" for n in range(2, 100))
        + "{broken\n"
    )
    code, _, err = kp(capsys, "score", "--no-embed", str(source), "-o", str(tmp_path / "o.jsonl"))
    assert code == 1
    assert f"{source}:1: metadata.success: input should be a valid boolean (got ':smile:')" in err
    assert f"{source}:100: invalid JSON" in err


# -- no coercion: the type is checked, not guessed -----------------------------------------


def set_path(trace: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.replace("[", ".").replace("]", "").split(".")
    target: Any = trace
    for key in parents:
        target = target[int(key)] if key.isdigit() else target[key]
    target[last] = value


COERCIONS = [
    ("outcome.confidence", "0.95", "input should be a valid number (got '0.95')"),
    ("outcome.confidence", True, "input should be a valid number (got True)"),
    ("metadata.created_at", 12, "input should be an ISO 8601 date-time string (got 12)"),
    ("metadata.quality_score", "0.3", "input should be a valid number (got '0.3')"),
    ("steps[1].latency_ms", "12", "input should be a valid number (got '12')"),
    ("metadata.success", "true", "input should be a valid boolean (got 'true')"),
    ("metadata.success", 1, "input should be a valid boolean (got 1)"),
]


@pytest.mark.parametrize(("field", "value", "problem"), COERCIONS)
def test_values_of_the_wrong_type_are_rejected_not_coerced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, value: Any, problem: str
) -> None:
    bad = make_trace(trace_id="kp:trace:bad")
    set_path(bad, field, value)
    source = tmp_path / "t.jsonl"
    source.write_text(json.dumps(bad) + "\n" + trace_line(2) + "\n")
    out_path = tmp_path / "out.jsonl"
    code, _, err = kp(capsys, "score", "--no-embed", str(source), "-o", str(out_path))
    assert code == 1
    assert f"{source}:1: {field}: {problem}\n" in err
    assert accounting(err) == Accounting(2, 1, 1, 0, None)
    assert [s["id"] for s in json_lines(out_path)] == ["kp:trace:2"]
    code, out, _ = kp(capsys, "validate", str(source))
    assert code == 1
    assert out == f"{source}:1: {field}: {problem}\n"


# -- what cannot be written back is refused at read time ------------------------------------


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


@pytest.fixture
def unwritable_and_deepest(tmp_path: Path) -> Path:
    """Line 1: a 300-deep input; 2: a lone surrogate; 3: as deep as allowed; 4: plain."""
    deep = make_trace(trace_id="kp:trace:deep")
    deep["steps"][1]["input"] = {"x": nested(300)}
    surrogate = make_trace(trace_id="kp:trace:surrogate")
    surrogate["steps"][1]["input"] = {"x": "\ud800"}
    deepest = make_trace(trace_id="kp:trace:deepest")
    # trace, steps, step, input, then 196 arrays around the value: 200 levels.
    deepest["steps"][1]["input"] = {"x": nested(196)}
    source = tmp_path / "t.jsonl"
    source.write_text(
        "".join(json.dumps(t) + "\n" for t in (deep, surrogate, deepest, make_trace()))
    )
    return source


def test_unwritable_records_rejected_with_the_limit_named(
    unwritable_and_deepest: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = unwritable_and_deepest
    out_path, kept, rejects_path = tmp_path / "o.jsonl", tmp_path / "a.jsonl", tmp_path / "r.jsonl"
    code, _, err = kp(
        capsys,
        "score",
        "--no-embed",
        str(source),
        "-o",
        str(out_path),
        "--threshold",
        "0",
        "--accepted",
        str(kept),
        "--rejects",
        str(rejects_path),
    )
    assert code == 1, err
    assert f"{source}:1: {DEEP}\n" in err and f"{source}:2: {LONE_SURROGATE}\n" in err
    assert accounting(err) == Accounting(4, 2, 2, 0, None)
    assert [s["id"] for s in json_lines(out_path)] == ["kp:trace:deepest", "kp:trace:test"]
    accepted = json_lines(kept)
    assert [t["id"] for t in accepted] == ["kp:trace:deepest", "kp:trace:test"]
    assert accepted[0]["steps"][1]["input"] == {"x": nested(196)}  # written back whole
    rejected = json_lines(rejects_path)
    assert [(r["line"], r["errors"]) for r in rejected] == [(1, [DEEP]), (2, [LONE_SURROGATE])]
    assert all(isinstance(r["record"], str) for r in rejected)  # the raw text, kept


@pytest.mark.parametrize("source_format", ["trace", "auto"])
def test_import_of_unwritable_records_does_not_crash(
    unwritable_and_deepest: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    source_format: str,
) -> None:
    out_path = tmp_path / "o.jsonl"
    code, _, err = kp(
        capsys, "import", "--from", source_format, str(unwritable_and_deepest), "-o", str(out_path)
    )
    assert code == 1, err
    assert "internal error" not in err
    assert "records in: 4 = processed 2 + rejected 2; traces written: 2" in err
    written = json_lines(out_path)
    assert [t["id"] for t in written] == ["kp:trace:deepest", "kp:trace:test"]
    assert written[0]["steps"][1]["input"] == {"x": nested(196)}


# -- the fuzz: every corruption at once, in any order ---------------------------------------

FUZZ_LINES = 10_000


def changed(number: int, dotted: str, value: Any) -> bytes:
    trace = make_trace(trace_id=f"kp:trace:{number}")
    set_path(trace, dotted, value)
    return json.dumps(trace).encode()


def without(number: int, parent: str, key: str) -> bytes:
    trace = make_trace(trace_id=f"kp:trace:{number}")
    del (trace[parent] if parent else trace)[key]
    return json.dumps(trace).encode()


def half(number: int, first: bool) -> bytes:
    text = trace_line(number)
    return (text[: len(text) // 2] if first else text[len(text) // 2 :]).encode()


def deep_input(number: int) -> bytes:
    trace = make_trace(trace_id=f"kp:trace:{number}")
    trace["steps"][1]["input"] = nested(300)
    return json.dumps(trace).encode()


#: Every kind of line a real file can hold: (make the line for trace N, accepted as a trace).
LINE_KINDS: list[tuple[Callable[[int], bytes], bool]] = [
    (lambda n: trace_line(n).replace(', "', ',\r"').encode(), True),  # bare CR between tokens
    (
        lambda n: json.dumps(
            make_trace(trace_id=f"kp:trace:{n}", objective="a\u2028b"), ensure_ascii=False
        ).encode(),
        True,
    ),
    (lambda n: trace_line(n, objective="ok \U0001f600").encode(), True),  # a surrogate pair
    (lambda n: trace_line(n).encode() + b"\r", True),  # a CRLF line ending
    (lambda n: trace_line(n).encode().replace(b"Review", b"Re\xffview"), False),  # not UTF-8
    (lambda n: trace_line(n).encode().replace(b"Review", b"Re\xc3"), False),  # a cut character
    (deep_input, False),
    (lambda n: b"[" * 10_000 + b"]" * 10_000, False),
    (lambda n: trace_line(n, objective="\ud800").encode(), False),  # a lone surrogate
    (lambda n: half(n, first=True), False),
    (lambda n: half(n, first=False), False),
    (lambda n: b"[1, 2]", False),
    (lambda n: b'"a string"', False),
    (lambda n: b"42", False),
    (lambda n: b"null", False),
    (lambda n: b"true", False),
    (lambda n: trace_line(n).replace("Review", "Re\rview").encode(), False),  # CR in a string
    (lambda n: trace_line(n, confidence=float("nan")).encode(), False),
    (lambda n: changed(n, "outcome.confidence", "0.95"), False),
    (lambda n: changed(n, "outcome.confidence", True), False),
    (lambda n: changed(n, "metadata.created_at", 12), False),
    (lambda n: changed(n, "metadata.quality_score", "0.3"), False),
    (lambda n: changed(n, "steps[1].latency_ms", "12"), False),
    (lambda n: changed(n, "metadata.success", "yes"), False),
    (lambda n: without(n, "", "task"), False),
    (lambda n: without(n, "", "id"), False),
    (lambda n: without(n, "metadata", "success"), False),
    (lambda n: without(n, "", "steps"), False),
]


@dataclass(frozen=True)
class FuzzFile:
    data: bytes
    accepted: list[int]  # lines holding a trace that scores
    rejected: list[int]  # lines holding a record that is refused


@functools.cache
def fuzz_file(seed: int) -> FuzzFile:
    rng = random.Random(seed)
    lines: list[bytes] = []
    accepted: list[int] = []
    rejected: list[int] = []
    for number in range(1, FUZZ_LINES + 1):
        if number == 1:  # a byte order mark, and a trace after it
            lines.append(b"\xef\xbb\xbf" + trace_line(number).encode())
            accepted.append(number)
            continue
        roll = rng.random()
        if roll < 0.08:
            lines.append(rng.choice([b"", b"   ", b"\t", b"\r"]))
        elif roll < 0.55:
            lines.append(trace_line(number).encode())
            accepted.append(number)
        else:
            make_line, ok = rng.choice(LINE_KINDS)
            lines.append(make_line(number))
            (accepted if ok else rejected).append(number)
    return FuzzFile(b"\n".join(lines) + b"\n", accepted, rejected)


@pytest.mark.usefixtures("score_workers")
@pytest.mark.parametrize(
    ("seed", "suffix"),
    [(1, ".jsonl"), (2, ".jsonl"), (3, ".jsonl"), (1, ".jsonl.gz"), (2, ".json")],
)
def test_fuzz_every_record_is_accounted_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], seed: int, suffix: str
) -> None:
    fuzz = fuzz_file(seed)
    source = tmp_path / f"fuzz{suffix}"
    source.write_bytes(gzip.compress(fuzz.data) if suffix.endswith(".gz") else fuzz.data)
    out_path, rejects_path = tmp_path / "out.jsonl", tmp_path / "rejects.jsonl"
    code, out, err = kp(
        capsys,
        "score",
        "--no-embed",
        str(source),
        "-o",
        str(out_path),
        "--rejects",
        str(rejects_path),
    )
    assert code == 1
    assert out == ""
    expected = Accounting(
        len(fuzz.accepted) + len(fuzz.rejected), len(fuzz.accepted), len(fuzz.rejected), 0, None
    )
    assert accounting(err) == expected
    scores = json_lines(out_path)
    assert [s["line"] for s in scores] == fuzz.accepted
    assert [s["id"] for s in scores] == [f"kp:trace:{n}" for n in fuzz.accepted]
    rejected = json_lines(rejects_path)
    assert [r["line"] for r in rejected] == fuzz.rejected
    for entry in rejected:
        assert entry["source"] == str(source)
        assert entry["errors"] and all(isinstance(e, str) and e for e in entry["errors"])
        assert "record" in entry
    location = re.compile(rf"{re.escape(str(source))}:(\d+): \S")
    shown = err.split("records in:")[0].splitlines()
    for line in shown:
        assert location.match(line) or line.startswith("… "), line
    shown_lines = [int(m.group(1)) for m in map(location.match, shown) if m]
    assert shown_lines and set(shown_lines) <= set(fuzz.rejected)
    assert "internal error" not in err and "Traceback" not in err

    code, out, err = kp(capsys, "validate", str(source))
    assert code == 1
    assert accounting(err) == expected
    assert f": {expected.processed} valid, {expected.rejected} invalid" in err
    listed = out.splitlines()
    for line in listed:
        assert location.match(line) or line.startswith("… and "), line
    listed_lines = {int(m.group(1)) for m in map(location.match, listed) if m}
    assert listed_lines <= set(fuzz.rejected)
    assert "internal error" not in out + err and "Traceback" not in out + err


# -- values of another type inside a record --------------------------------------------------

IMPORTERS = Path(__file__).resolve().parent / "data" / "importers"


def test_a_value_of_another_type_refuses_its_record_and_the_run_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by fuzzing the fixtures with other types: a list where a call id or a span's
    # operation name goes stopped the whole run with an internal TypeError (unhashable type),
    # and the records after it were never read. Those readers take such values now; whatever
    # a reader still raises on a record refuses that record, and the run goes on.
    from knowledgepulse.importers import _registry

    chat = json.loads((IMPORTERS / "openai_chat.json").read_text(encoding="utf-8"))
    reader = _registry.FORMATS["openai"]

    def breaks_on_a_list_id(record: Any, options: Any) -> Any:
        if record.get("id") == ["odd"]:
            raise KeyError("a reader's bug")
        return reader.convert(record, options)

    monkeypatch.setitem(
        _registry.FORMATS, "openai", _registry.Importer("openai", "", breaks_on_a_list_id)
    )
    source = tmp_path / "mixed.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in (chat, dict(chat, id=["odd"]), chat)))
    code, out, err = kp(capsys, "eval", str(source), "--from", "openai", "--rubric", "agent")
    assert code == 1, err
    assert "internal error" not in err
    assert f"{source}:2: a value of an unexpected type or form (KeyError: " in err
    assert accounting(err) == Accounting(3, 2, 1, 0, None)
    assert len(out.splitlines()) == 2


def test_the_values_of_another_type_found_by_fuzzing_are_read() -> None:
    from knowledgepulse.importers import convert

    langfuse = json.loads((IMPORTERS / "langfuse_trace.json").read_text(encoding="utf-8"))
    langfuse["observations"][1]["output"]["tool_calls"][0]["id"] = [1, 2]  # no id, then
    assert len(convert("auto", langfuse)) == 1
    otel = json.loads((IMPORTERS / "otel_azure_events.json").read_text(encoding="utf-8"))
    otel["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"][0]["value"] = {
        "arrayValue": {"values": []}
    }  # gen_ai.operation.name as a list: no operation named
    assert len(convert("auto", otel)) == 1
    lines = (IMPORTERS / "units" / "otel_span_logs.jsonl").read_text(encoding="utf-8")
    spans = json.loads(lines.splitlines()[0])
    spans["resourceSpans"][0]["scopeSpans"][0]["spans"][2]["status"]["message"] = 10**19
    (trace,) = convert("otel", spans)
    assert "10000000000000000000" in trace.model_dump_json()  # the status message, as text
