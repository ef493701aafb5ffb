"""Capture agent runs made through the official ``openai`` and ``anthropic`` clients.

Public as ``knowledgepulse.capture``, ``knowledgepulse.captured`` and
``knowledgepulse.CapturedRun``.

::

    import knowledgepulse

    with knowledgepulse.capture(objective="Book a flight", domain="travel") as run:
        agent.run()              # calls client.chat.completions.create(...) as it likes
        run.finish(success=True)
    print(run.score.value, run.passed)

:func:`capture` records the model calls made in its block (requests, replies with their tool
calls, errors; sync and async), builds the ReasoningTrace with the importers, scores it and,
when it reaches ``threshold`` (:data:`DEFAULT_THRESHOLD`), stores it in a knowledge base
(``kb=``) or sends it to a ``kp serve`` URL (``contribute_to=``). :func:`captured` is the
decorator form. The ``capture`` extra installs the clients.
"""

from ._contribute import API_KEY_VARIABLE, contribute
from ._run import DEFAULT_THRESHOLD, CapturedRun, capture, captured, current_run

__all__ = [
    "API_KEY_VARIABLE",
    "DEFAULT_THRESHOLD",
    "CapturedRun",
    "capture",
    "captured",
    "contribute",
    "current_run",
]
