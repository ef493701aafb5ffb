"""``curate_files``: keep the most valuable trace of each group of copies (or attempts at one
task, or near-duplicates by embedding) in files of traces, and return the run's report with
the curation's summary.

``kp curate`` is this verb with options, the embedder's choice and printing. The traces are
read through :func:`~._run.read_conversions` (the one read -> tally loop) into a curation that
streams through a work directory (:class:`~knowledgepulse.scoring._copy_curation.CopyCuration`,
:class:`~knowledgepulse.scoring._stream_curation.StreamingCuration`) or into memory (``--by
task``, and Ray through a :class:`RayCurator`). Until the outputs are written every record read
counts as not processed: a stop at any point writes nothing and says so.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ._progress import phase_progress, silent_console
from ._report import CurateBy, CurateFirstPass, CurateStop, CurateSummary, RunReport
from ._run import Run, open_writer, read_conversions
from ._signals import signals_held, signals_restored
from ._verbs import checked_inputs

if TYPE_CHECKING:
    from .._schema import ReasoningTrace
    from ..embedding import Embedder
    from ..importers import ImportOptions
    from ..kb import KnowledgeBase
    from ..scoring._curation import CurationOutcome, CurationResult
    from ..scoring._profiles import ProfileRegistry

#: From this much input, one process hashes while this one reads (when there are 2+ CPUs).
HASHER_FROM_BYTES = 8 << 20


class RayCurator(Protocol):
    """Curation of a pile read into memory, on Ray (``distributed``'s ``RayCuration``); what
    it starts is stopped with ``stack``."""

    def copies(
        self,
        stack: ExitStack,
        pile: list[ReasoningTrace],
        *,
        similarity: float,
        kb: KnowledgeBase | None,
        profiles: ProfileRegistry | None,
    ) -> CurationResult: ...

    def embedding(
        self,
        stack: ExitStack,
        pile: list[ReasoningTrace],
        embedder: Embedder,
        *,
        similarity: float,
        kb: KnowledgeBase | None,
        profiles: ProfileRegistry | None,
        first_pass: Embedder | None,
        candidate_similarity: float | None,
    ) -> CurationResult: ...


def static_model_note() -> str | None:
    """That the static model is about to be built, and why (it names the path), when it is:
    the library's own warning goes to a logger ``kp`` does not print."""
    from ..embedding import static_model_problem

    problem = static_model_problem()
    if problem is None:
        return None
    return f"static model: {problem}; building it now (minutes on a slow machine, once)"


def default_work_dir(output: str) -> Path:
    """``.NAME.kp-curate`` beside the output ``NAME`` (``.kp-curate`` here for ``-``)."""
    if output == "-":
        return Path(".kp-curate")
    target = Path(output)
    return target.with_name(f".{target.name}.kp-curate")


def hashers_for(workers: int | None, files: Sequence[str]) -> int:
    """Processes that hash beside this one, which reads: ``workers`` counts this one (0 or 1:
    it hashes too; N: N - 1 beside it); by default one beside it for inputs of 8 MiB or more
    on a machine with two CPUs or more. Never changes the output."""
    if workers is not None:
        return max(0, workers - 1) if workers > 1 else 0
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    size = 0
    for name in files:
        try:
            size += os.path.getsize(name) if name != "-" else HASHER_FROM_BYTES
        except OSError:
            continue
    return 1 if (cpus or 1) >= 2 and size >= HASHER_FROM_BYTES else 0


@dataclass
class _Curate:
    """One ``curate_files`` call: its settings and where it says what it does."""

    files: list[str]
    by: CurateBy
    output: str
    groups: str
    similarity: float
    embedder: Embedder | None
    embedder_reason: str | None
    keep_per_task: int
    kb: str | Path | KnowledgeBase | None
    profiles: ProfileRegistry | None
    batch_size: int
    work_dir: Path
    first_pass: Embedder | None
    candidate_similarity: float | None
    source_format: str
    options: ImportOptions | None
    rejects: str | None
    max_errors: int | None
    workers: int | None
    ray: RayCurator | None
    console: Any
    progress: bool

    def summary(self) -> CurateSummary:
        return CurateSummary(
            by=self.by,
            engine="local" if self.ray is None else "ray",
            similarity=self.similarity,
            embedder=None if self.embedder is None else self.embedder.name,
            work_dir=str(self.work_dir) if self.ray is None and self.by != "task" else None,
        )

    def say(self, line: str) -> None:
        """What the run does now (its embedders), unless it shows no progress."""
        if self.progress:
            self.console.print(line, markup=False, highlight=False)

    def say_embedders(self) -> None:
        """``embedder: NAME — why`` and, with a first pass, ``first pass: NAME`` (and that
        the static model is built first, when it is)."""
        assert self.embedder is not None
        reason = f" — {self.embedder_reason}" if self.embedder_reason else ""
        self.say(f"embedder: {self.embedder.name}{reason}")
        if self.first_pass is None:
            return
        self.say(f"first pass: {self.first_pass.name}")
        note = static_model_note()
        if note is not None:
            self.say(note)

    def open_base(self, stack: ExitStack) -> KnowledgeBase | None:
        """The knowledge base whose traces count as seen, closed with ``stack`` when opened
        here. Copies need no embedder: the base is opened as it is (its identity unchanged);
        embedding curation compares whole-trace vectors (a base of task vectors is refused)."""
        if self.kb is None or not isinstance(self.kb, str | Path):
            return self.kb
        from ..kb import EmbeddingIdentity, open_knowledge_base

        identity = None
        if self.by != "copies":
            identity = EmbeddingIdentity.of(self.embedder, "seed")
        base = open_knowledge_base(self.kb, identity)
        stack.callback(base.close)
        return base

    def read_into(
        self,
        stack: ExitStack,
        add: Callable[[ReasoningTrace], None],
        finish: Callable[[], None] | None = None,
        *,
        phase: str = "reading",
    ) -> Run:
        """Read every input record, handing each trace to ``add`` (and ``finish()`` at the
        end, still under the run's signal handling); a record counts as processed once its
        unit converted whole. ``phase`` is what the progress bar says: what ``add`` does to
        each trace while it is read."""
        run = Run(
            stack,
            label=phase,
            quiet=not self.progress,
            rejects=self.rejects,
            max_errors=self.max_errors,
            console=self.console,
        )
        with run:
            for conversion in read_conversions(self.files, self.source_format, self.options, run):
                for trace in conversion.traces:
                    add(trace)
                if not conversion.problems:
                    run.tally.processed += conversion.counted
                run.step()
            if finish is not None:
                finish()
        return run


def curate_files(
    paths: Sequence[str],
    *,
    output: str,
    groups: str,
    by: CurateBy = "copies",
    similarity: float | None = None,
    embedder: Embedder | None = None,
    embedder_reason: str | None = None,
    keep_per_task: int = 1,
    kb: str | Path | KnowledgeBase | None = None,
    profiles: ProfileRegistry | None = None,
    batch_size: int = 64,
    work_dir: str | Path | None = None,
    first_pass: Embedder | None = None,
    candidate_similarity: float | None = None,
    source_format: str = "trace",
    options: ImportOptions | None = None,
    rejects: str | None = None,
    max_errors: int | None = None,
    workers: int | None = None,
    ray: RayCurator | None = None,
    console: Any = None,
    progress: bool = False,
) -> RunReport:
    """Keep the most valuable trace of each group of copies of ``paths``, whatever the order:
    the kept traces (in input order) to ``output``, one line per group to ``groups``.

    Args:
        paths: files, directories and ``-`` for standard input.
        output: a file for the kept traces (``.gz``: compressed), or ``-``.
        groups: a file for the groups (``knowledgepulse.groups/1`` lines).
        by: ``copies`` (exact copies by digest, near copies by MinHash; no embedder),
            ``task`` (attempts at one task, by the cosine of their task texts; in memory,
            without ``kb`` or ``ray``) or ``embedding`` (whole-trace cosine).
        similarity: from which similarity two traces are grouped (default: the copy
            threshold, the task threshold, or the near-duplicate cosine).
        embedder: the embedder of ``task`` and ``embedding`` (required there, unused by
            copies).
        embedder_reason: why that embedder was chosen, said as ``embedder: NAME — why``.
        keep_per_task: with ``task``: the best K attempts of each task are kept.
        kb: a knowledge base (its location, or one open) whose traces count as seen.
        profiles: domain weights (default: the registered profiles).
        batch_size: texts embedded per call.
        work_dir: where vectors and lists are kept while curating (default ``.NAME.kp-curate``
            beside ``output``). A stopped run leaves its embeddings there for the next run; a
            finished run removes what it wrote there.
        first_pass: with ``embedding``: a cheap embedder (the static one) whose vectors
            propose candidate pairs; ``embedder`` decides them. Not with ``kb``.
        candidate_similarity: the first pass's cosine from which a pair is a candidate.
        source_format: ``trace``, ``auto`` or a log format.
        options: values set on every trace (domain, success, confidence).
        rejects: a file for the refused records (source, line, index, errors, record).
        max_errors: stop reading after this many refused records (what was read is curated).
        workers: processes that hash copies beside this one (None: one from 8 MiB of input).
        ray: curate on Ray (the pile is read into memory first).
        console: a rich Console for rejections, hints, progress and the embedders used (None:
            nothing is shown).
        progress: draw progress bars on ``console`` when it is a terminal, and say which
            embedders the run uses.

    The summary is a :class:`~._report.CurateSummary`. Raises FileNotFoundError,
    ConversionError (unknown format), :class:`~._paths.OutputOverwritesInput` and ValueError
    (settings that do not combine) before anything is read.
    """
    files = checked_inputs(paths, source_format, output=output, groups=groups, rejects=rejects)
    _check_settings(by, embedder, keep_per_task, kb, ray, first_pass, candidate_similarity)
    job = _Curate(
        files=files,
        by=by,
        output=output,
        groups=groups,
        similarity=similarity if similarity is not None else _default_similarity(by),
        embedder=embedder,
        embedder_reason=embedder_reason,
        keep_per_task=keep_per_task,
        kb=kb,
        profiles=profiles,
        batch_size=batch_size,
        work_dir=Path(work_dir) if work_dir is not None else default_work_dir(output),
        first_pass=first_pass,
        candidate_similarity=candidate_similarity,
        source_format=source_format,
        options=options,
        rejects=rejects,
        max_errors=max_errors,
        workers=workers,
        ray=ray,
        console=console if console is not None else silent_console(),
        progress=progress,
    )
    with ExitStack() as stack:
        stack.enter_context(signals_restored())
        if by == "task" or ray is not None:
            return _in_memory(job, stack)
        if by == "copies":
            return _copies_streaming(job, stack)
        return _embedding_streaming(job, stack)


def _default_similarity(by: CurateBy) -> float:
    if by == "copies":
        from ..copies import COPY_SIMILARITY

        return COPY_SIMILARITY
    if by == "task":
        from ..scoring._task_curation import TASK_SIMILARITY

        return TASK_SIMILARITY
    from ..scoring._curation import DEFAULT_SIMILARITY

    return DEFAULT_SIMILARITY


def _check_settings(
    by: CurateBy,
    embedder: Embedder | None,
    keep_per_task: int,
    kb: object,
    ray: RayCurator | None,
    first_pass: Embedder | None,
    candidate_similarity: float | None,
) -> None:
    """Refuse settings that do not combine (ValueError), before anything is read."""
    if by != "copies" and embedder is None:
        raise ValueError(f"curation by {by} compares embeddings: it needs an embedder")
    if by != "embedding" and (first_pass is not None or candidate_similarity is not None):
        raise ValueError("a first pass and its candidate similarity go with by='embedding'")
    if keep_per_task != 1 and by != "task":
        raise ValueError("keep_per_task goes with by='task'")
    if by == "task" and (kb is not None or ray is not None):
        raise ValueError("curation by task runs locally and without a knowledge base")


def _report(
    job: _Curate, run: Run, summary: CurateSummary, seconds: dict[str, float] | None = None
) -> RunReport:
    """The run's report, with the seconds of each phase of a streaming curation."""
    return RunReport.of_tally("curate", job.files, run.tally, summary, timings=seconds)


def _counted(summary: CurateSummary, outcome: CurationOutcome) -> CurateSummary:
    """``summary`` with the counts of a curation's outcome, whichever engine made it."""
    return summary.model_copy(
        update={
            "traces": outcome.distinct,
            "kept": outcome.kept_count,
            "dropped": outcome.dropped,
            "groups": outcome.group_count,
            "by_relation": outcome.by_relation if summary.by != "embedding" else {},
        }
    )


def _stopped(job: _Curate, run: Run, summary: CurateSummary, when: CurateStop) -> RunReport:
    return _report(job, run, summary.model_copy(update={"stopped_while": when}))


def _copies_streaming(job: _Curate, stack: ExitStack) -> RunReport:
    """Read once; a few numbers and a signature per trace in memory, the lines on disk."""
    from ..scoring._copy_curation import CopyCuration

    curation = CopyCuration(
        job.work_dir,
        similarity=job.similarity,
        kb=job.open_base(stack),
        profiles=job.profiles,
        hashers=hashers_for(job.workers, job.files),
    )
    stack.callback(curation.remove_files)  # runs after close: the work directory goes
    stack.callback(curation.close)
    run = job.read_into(stack, curation.add, curation.finish_reading, phase="hashing")
    tally = run.tally
    # Until the outputs are written, every record read counts as not processed.
    read, tally.processed = tally.processed, 0
    summary = job.summary()
    if tally.interrupted:
        return _stopped(job, run, summary, "reading")
    run.stop_display()
    labels = {"group": "grouping copies"}
    with run, phase_progress(run.console, job.progress, labels) as shown:
        curation.decide(progress=shown)
    if tally.interrupted:
        return _stopped(job, run, summary, "curating")
    _write_streamed(job, stack, run, read, curation.write)
    summary = _counted(summary, curation).model_copy(
        update={"repeated": curation.repeated, "wordless": curation.wordless}
    )
    timings = curation.timings
    seconds = {"read": timings.read, "hash": timings.hash, "group": timings.search}
    return _report(job, run, summary, {**seconds, "write": timings.write})


def _embedding_streaming(job: _Curate, stack: ExitStack) -> RunReport:
    """Read once, keep a few numbers per trace in memory and the rest in the work directory;
    a stopped run leaves its embeddings there for the next."""
    from ..scoring._spool import remove_work_dir
    from ..scoring._stream_curation import StreamingCuration

    job.say_embedders()  # embedding goes on while reading
    curation = StreamingCuration(
        job.work_dir,
        embedder=job.embedder,
        similarity=job.similarity,
        kb=job.open_base(stack),
        profiles=job.profiles,
        batch_size=job.batch_size,
        first_pass=job.first_pass,
        candidate_similarity=job.candidate_similarity,
    )
    stack.callback(curation.close)
    run = job.read_into(stack, curation.add, curation.finish_reading, phase="embedding")
    tally = run.tally
    read, tally.processed = tally.processed, 0
    summary = job.summary()

    def stopped(when: CurateStop) -> RunReport:
        curation.close()
        curation.discard_scratch()  # what a re-run makes again anyway: only the vectors stay
        kept = summary.model_copy(update={"stored_vectors": curation.stored_vectors})
        return _stopped(job, run, kept, when)

    if tally.interrupted:
        return stopped("reading")
    run.stop_display()
    phases = {"search": "finding near-duplicates", "decide": "deciding candidates"}
    with run, phase_progress(run.console, job.progress, phases) as shown:
        curation.decide(progress=shown)
    if tally.interrupted:
        return stopped("curating")
    _write_streamed(job, stack, run, read, curation.write)
    curation.close()
    remove_work_dir(job.work_dir)
    first = None
    if curation.candidate_similarity is not None:
        first = CurateFirstPass(
            candidate_pairs=curation.candidate_pairs,
            candidate_similarity=curation.candidate_similarity,
            decided=curation.decided_embedded + curation.decided_reused,
            reused=curation.decided_reused,
        )
    summary = _counted(summary, curation).model_copy(
        update={
            "repeated": curation.repeated,
            "embedded": curation.embedded,
            "reused": curation.reused,
            "first_pass": first,
        }
    )
    timings = curation.timings
    seconds = {"read": timings.read, "embed": timings.embed, "search": timings.search}
    return _report(job, run, summary, {**seconds, "write": timings.write})


def _write_streamed(
    job: _Curate,
    stack: ExitStack,
    run: Run,
    read: int,
    write: Callable[[Callable[[str], None], Callable[[str], None]], None],
) -> None:
    """Write the kept traces and the groups, the records read counted processed with them."""
    kept_out = open_writer(stack, job.output)
    groups_out = open_writer(stack, job.groups)
    with signals_held():
        write(kept_out.write_line, groups_out.write_line)
        run.tally.processed = read


def _in_memory(job: _Curate, stack: ExitStack) -> RunReport:
    """``by='task'`` and Ray: every trace is read into memory, then curated."""
    pile: list[ReasoningTrace] = []
    base = job.open_base(stack)
    run = job.read_into(stack, pile.append)
    tally = run.tally
    summary = job.summary()
    if tally.interrupted:
        return _stopped(job, run, summary, "reading")
    read, tally.processed = tally.processed, 0
    with run:
        result = _decide_in_memory(job, stack, pile, base)
        tally.processed = read
    if tally.interrupted:
        return _stopped(job, run, summary, "curating")
    kept_out = open_writer(stack, job.output)
    groups_out = open_writer(stack, job.groups)
    with signals_held():
        for trace in result.kept:
            kept_out.write_line(trace.to_json())
        for group in result.groups:
            groups_out.write_json(group.to_dict())
    first = None
    if result.embedded is not None:
        first = CurateFirstPass(
            candidate_pairs=result.candidate_pairs or 0, decided=result.embedded
        )
    summary = _counted(summary, result).model_copy(
        update={"repeated": len(pile) - result.distinct, "first_pass": first}
    )
    return _report(job, run, summary)


def _decide_in_memory(
    job: _Curate, stack: ExitStack, pile: list[ReasoningTrace], base: KnowledgeBase | None
) -> CurationResult:
    if job.by == "task":
        from ..scoring._task_curation import curate_tasks

        job.say_embedders()
        return curate_tasks(
            pile,
            embedder=job.embedder,
            similarity=job.similarity,
            keep_per_task=job.keep_per_task,
            profiles=job.profiles,
            batch_size=job.batch_size,
        )
    assert job.ray is not None
    if job.by == "copies":
        return job.ray.copies(
            stack, pile, similarity=job.similarity, kb=base, profiles=job.profiles
        )
    assert job.embedder is not None
    job.say_embedders()
    return job.ray.embedding(
        stack,
        pile,
        job.embedder,
        similarity=job.similarity,
        kb=base,
        profiles=job.profiles,
        first_pass=job.first_pass,
        candidate_similarity=job.candidate_similarity,
    )
