"""``capture()`` and ``@captured``: an agent run recorded, turned into a trace, scored, shared."""

from __future__ import annotations

import functools
import inspect
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from ..._schema import ReasoningTrace
from ...importers import ImportOptions
from ...records import ScoreRecord
from ...scoring._scorer import Scorer, ValueScore, default_scorer
from ._contribute import contribute
from ._instructions import first_user_text, with_instructions
from ._recording import ACTIVE, Call, Provider, patched_clients, plain
from ._transcript import build_trace

if TYPE_CHECKING:
    from ...kb import KnowledgeBase
    from ...kb._recall import Recall

__all__ = ["DEFAULT_THRESHOLD", "CapturedRun", "capture", "captured", "current_run"]

logger = logging.getLogger("knowledgepulse.capture")

#: The value a captured run must reach to be contributed. With novelty at 0.5 (no embedder, or
#: the first trace seen) a trace scores at most 0.825 before rule bonuses; 0.6 keeps 80% of the
#: successful tau-bench airline runs (67 of 84) and 1% of the failed ones (1 of 116), where
#: 0.75 would keep 5% of the successful ones (docs/integrations.md has the table).
DEFAULT_THRESHOLD = 0.6

F = TypeVar("F", bound=Callable[..., Any])


class CapturedRun:
    """One recorded agent run; ``capture()`` yields it.

    Inside the block, :attr:`calls` fills up; :meth:`finish` may state the outcome. When the
    block ends, :attr:`trace` holds the ReasoningTrace (``None`` when no model call was
    recorded: :attr:`problem` says why), :attr:`score` its value, :attr:`record` its score
    line, :attr:`passed` whether it reached the threshold and :attr:`contributed` whether it
    was stored or sent. Capturing never raises into the agent's code: what went wrong is in :attr:`problem` and
    :attr:`contribution_error`, and logged.
    """

    def __init__(
        self,
        *,
        objective: str | None,
        domain: str | None,
        threshold: float,
        agent_id: str | None = None,
    ) -> None:
        self.objective = objective
        self.domain = domain
        self.threshold = threshold
        self.agent_id = agent_id
        self.calls: list[Call] = []
        self.success: bool | None = None
        self.confidence: float | None = None
        self.summary: str | None = None
        self.trace: ReasoningTrace | None = None
        self.score: ValueScore | None = None
        #: The run's score line: the record ``kp score`` writes for a trace (``source`` and
        #: ``line`` None; ``passed`` against the threshold). None when no trace was made.
        self.record: ScoreRecord | None = None
        self.contributed = False
        self.problem: str | None = None
        self.contribution_error: str | None = None
        #: With ``recall=``: what was recalled for the task (None until the first call).
        self.recalled: Recall | None = None
        self.recall_error: str | None = None
        self._recall: Callable[[str], Recall] | None = None
        self._lock = threading.Lock()

    # -- recording (called by the client wrappers) --------------------------------------------

    def started(self, provider: Provider, request: Mapping[str, Any]) -> Call:
        # Copied now: agents append to the same messages list after the call returns.
        call = Call(provider, plain(dict(request)))
        with self._lock:
            self.calls.append(call)
        return call

    def instruct(self, provider: Provider, request: dict[str, Any]) -> dict[str, Any]:
        """The request as sent: with ``recall=``, the worked examples recalled for the task
        added to its instructions (the recorded request stays the agent's own)."""
        if self._recall is None:
            return request
        with self._lock:
            if self.recalled is None and self.recall_error is None:
                query = self.objective or first_user_text(request)
                try:
                    if not query:
                        raise ValueError("no objective and no user message to recall by")
                    self.recalled = self._recall(query)
                except Exception as exc:  # recalling never breaks the agent's call
                    self.recall_error = str(exc)
                    logger.warning("knowledgepulse.capture: nothing recalled: %s", exc)
            block = self.recalled.prompt if self.recalled is not None else ""
        return with_instructions(provider, request, block) if block else request

    # -- the outcome ----------------------------------------------------------------------------

    def finish(
        self,
        *,
        success: bool | None = None,
        confidence: float | None = None,
        summary: str | None = None,
    ) -> None:
        """State how the run went: ``success``, the agent's ``confidence`` in [0, 1], and a
        ``summary`` of the result (default: the agent's last message)."""
        if confidence is not None and not 0.0 <= confidence <= 1.0:
            raise ValueError(f"confidence must be in [0, 1], got {confidence!r}")
        self.success, self.confidence, self.summary = success, confidence, summary

    @property
    def passed(self) -> bool:
        """Whether the run's value reached the threshold."""
        return self.score is not None and self.score.value >= self.threshold

    def _close(
        self,
        raised: BaseException | None,
        scorer: Scorer | None,
        contribute_to: str | None,
        api_key: str | None,
    ) -> None:
        if raised is not None and self.success is None:
            self.success = False
        try:
            stated = ImportOptions(
                objective=self.objective,
                task_domain=self.domain,
                success=self.success,
                confidence=self.confidence,
            )
            self.trace = build_trace(
                self.calls, stated, agent_id=self.agent_id, summary=self.summary
            )
        except ValueError as exc:
            self.problem = str(exc)
            logger.warning("knowledgepulse.capture: no trace: %s", exc)
            return
        self.score = (scorer or default_scorer()).score(self.trace)
        self.record = ScoreRecord.of(self.score, self.trace, threshold=self.threshold)
        self.contributed = self.score.stored == "added"
        if contribute_to is not None and self.passed:
            try:
                contribute(self.trace, self.score, contribute_to, api_key)
                self.contributed = True
            except OSError as exc:
                self.contribution_error = str(exc)
                logger.warning("knowledgepulse.capture: not contributed: %s", exc)


def _kb_scorer(
    kb: KnowledgeBase | str | Path, scorer: Scorer | None, threshold: float, stack: ExitStack
) -> Scorer:
    """A scorer whose memory is the knowledge base, storing the runs that pass."""
    embedder = scorer.embedder if scorer is not None else default_scorer().embedder
    if isinstance(kb, (str, Path)):
        from ...kb import EmbeddingIdentity, open_knowledge_base

        if embedder is None:
            raise ValueError("kb= stores embeddings: it needs an embedder (none is available)")
        kb = open_knowledge_base(kb, EmbeddingIdentity.of(embedder))
        stack.callback(kb.close)
    return Scorer(
        embedder=embedder,
        memory=kb,
        remember="accepted",
        threshold=threshold,
        profiles=scorer.profiles if scorer is not None else None,
    )


def _recaller(scorer: Scorer, k: int) -> Callable[[str], Recall]:
    from ...kb._recall import recall as recall_similar

    def search(query: str) -> Recall:
        kb = cast("KnowledgeBase", scorer.cache)  # a scorer from _kb_scorer: its memory is a base
        return recall_similar(query, kb, k, embedder=scorer.embedder)

    return search


@contextmanager
def capture(
    objective: str | None = None,
    domain: str | None = None,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    scorer: Scorer | None = None,
    kb: KnowledgeBase | str | Path | None = None,
    contribute_to: str | None = None,
    api_key: str | None = None,
    agent_id: str | None = None,
    recall: bool | int = False,
) -> Iterator[CapturedRun]:
    """Record the model calls made inside the block and score the run when it ends.

    Args:
        objective: the task (default: the first user message sent).
        domain: ``metadata.task_domain`` (picks the scoring profile).
        threshold: the value a run must reach to be stored or sent (:data:`DEFAULT_THRESHOLD`).
        scorer: scores the trace (default: the process-wide scorer).
        kb: a knowledge base (an open one, or its location) that stores the runs that pass;
            novelty is then measured against it.
        contribute_to: a ``kp serve`` URL; a run that passes is POSTed to ``/v1/traces``.
        api_key: the Bearer key for ``contribute_to`` (default: ``KNOWLEDGEPULSE_API_KEY``).
        agent_id: ``metadata.agent_id``.
        recall: before the first model call, recall the successful traces of ``kb`` most
            similar to the task (``objective``, else the first user message) and add them as
            worked examples to the instructions of every call (the system message; Anthropic's
            ``system``). ``True``: 5 examples; an int: that many. Needs ``kb``. The recorded
            requests stay the agent's own; :attr:`CapturedRun.recalled` holds what was found.

    Calls through ``openai`` (``chat.completions.create``) and ``anthropic``
    (``messages.create``), sync or async, in this context are recorded: the requests, the
    replies (tool calls included) and the errors; the tool results come with the next request.
    Streams (``stream=True``) are passed on but not read. Raises
    :class:`~knowledgepulse.MissingDependencyError` when neither client is installed, and
    ``ValueError`` for a ``threshold`` outside [0, 1].
    """
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must be in [0, 1], got {threshold!r}")
    if recall is not False and kb is None:
        raise ValueError("recall= searches a knowledge base: give kb= too")
    run = CapturedRun(objective=objective, domain=domain, threshold=threshold, agent_id=agent_id)
    with ExitStack() as stack:
        if kb is not None:
            scorer = _kb_scorer(kb, scorer, threshold, stack)
            if recall is not False:
                run._recall = _recaller(scorer, 5 if recall is True else int(recall))
        stack.enter_context(patched_clients())
        token = ACTIVE.set(run)
        raised: BaseException | None = None
        try:
            yield run
        except BaseException as exc:
            raised = exc
            raise
        finally:
            ACTIVE.reset(token)
            run._close(raised, scorer, contribute_to, api_key)


def current_run() -> CapturedRun | None:
    """The run the current context records into, if any."""
    recorder = ACTIVE.get()
    return recorder if isinstance(recorder, CapturedRun) else None


def captured(
    objective: str | None = None, domain: str | None = None, **options: Any
) -> Callable[[F], F]:
    """Decorator: each call of the function (sync or async) is one :func:`capture`.

    Takes :func:`capture`'s arguments. Inside, :func:`current_run` is the run; after a call,
    the function's ``last_run`` attribute holds it (the latest call's, in any thread).
    """

    def decorate(function: F) -> F:
        if inspect.iscoroutinefunction(function):

            @functools.wraps(function)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                with capture(objective, domain, **options) as run:
                    run_async.last_run = run  # type: ignore[attr-defined]
                    return await function(*args, **kwargs)

            return run_async  # type: ignore[return-value]

        @functools.wraps(function)
        def run_sync(*args: Any, **kwargs: Any) -> Any:
            with capture(objective, domain, **options) as run:
                run_sync.last_run = run  # type: ignore[attr-defined]
                return function(*args, **kwargs)

        return run_sync  # type: ignore[return-value]

    return decorate
