"""A judge model: an OpenAI-compatible chat endpoint asked yes/no questions, with a cache."""

from __future__ import annotations

import json
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._errors import KnowledgePulseError
from ._chat_client import ChatAnswer, ChatClient, ChatError, ChatSettings
from ._judge_cache import AnswerCache, answer_key, default_cache_dir

__all__ = [
    "DEFAULT_BASE_URL",
    "Answer",
    "JudgeModel",
    "JudgeNotConfiguredError",
    "JudgeUsage",
    "default_judge",
    "parse_answer",
    "set_default_judge",
]

DEFAULT_BASE_URL = "https://api.openai.com/v1"

#: Structured output asked of servers that support it: the reasoning comes before the verdict,
#: so the model has reasoned by the time it commits to an answer.
VERDICT_FORMAT: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {
        "name": "verdict",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {
                "reasoning": {"type": "string"},
                "verdict": {"type": "string", "enum": ["yes", "no"]},
            },
            "required": ["reasoning", "verdict"],
            "additionalProperties": False,
        },
    },
}

_VERDICT_LINE = re.compile(r"^\W*verdict\W*:?\W*(yes|no)\b", re.IGNORECASE)
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)
# Statuses with which a server says it does not take response_format.
_NO_STRUCTURED_OUTPUT = frozenset({400, 422})


class JudgeNotConfiguredError(KnowledgePulseError, RuntimeError):
    """A judged criterion ran with no judge model given, set as default or in the environment."""


@dataclass(frozen=True)
class Answer:
    """One answer of the judge: a verdict (``None``: undetermined) and why."""

    verdict: bool | None
    reasoning: str = ""
    problem: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: bool = False


@dataclass(frozen=True)
class JudgeUsage:
    """What a judge model did so far: answers asked for, answers from the cache, tokens."""

    calls: int = 0
    cached: int = 0
    undetermined: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


class JudgeModel:
    """A language model behind an OpenAI-compatible chat-completions endpoint, used as a judge.

    Args:
        model: the model's name on that endpoint (``gpt-4o-mini``, ``llama3.1:8b``…).
        base_url: the endpoint up to ``/v1`` (default ``KP_JUDGE_URL``, else
            ``OPENAI_BASE_URL``, else OpenAI's). Local servers: vLLM ``http://localhost:8000/v1``,
            llama.cpp ``http://localhost:8080/v1``, Ollama ``http://localhost:11434/v1``.
        api_key: sent as a bearer token (default ``KP_JUDGE_API_KEY``, else ``OPENAI_API_KEY``;
            none for a local server that needs none).
        concurrency: the most requests in flight at once.
        max_retries: retries of a 429, 5xx, timeout or network failure, with exponential backoff
            and jitter (``backoff`` seconds first, doubling up to ``max_backoff``), honouring
            ``Retry-After``.
        timeout: seconds for one request.
        temperature: sent when given (else the server's default); part of the cache key.
        cache_dir: where answers are cached (default ``~/.cache/knowledgepulse/judge``).
        use_cache: ``False`` asks again even when an answer is cached (and stores the new one).
        structured: ask for structured output (``response_format`` json_schema); a server that
            refuses it is asked again without, and from then on the final ``VERDICT:`` line of
            a plain answer is read.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        concurrency: int = 4,
        max_retries: int = 4,
        timeout: float = 60.0,
        temperature: float | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        use_cache: bool = True,
        structured: bool = True,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ValueError(f"a judge model needs a name, got {model!r}")
        self.model = model
        self.temperature = temperature
        self.structured = structured
        self.client = ChatClient(
            ChatSettings(
                base_url=base_url or _env("KP_JUDGE_URL", "OPENAI_BASE_URL") or DEFAULT_BASE_URL,
                api_key=api_key
                if api_key is not None
                else _env("KP_JUDGE_API_KEY", "OPENAI_API_KEY"),
                concurrency=concurrency,
                max_retries=max_retries,
                timeout=timeout,
                backoff=backoff,
                max_backoff=max_backoff,
            )
        )
        directory = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.cache = AnswerCache(directory, read=use_cache)
        self._lock = threading.Lock()
        self._usage = JudgeUsage()

    def __repr__(self) -> str:
        return f"JudgeModel({self.model!r}, base_url={self.client.settings.base_url!r})"

    @classmethod
    def from_env(cls, **settings: Any) -> JudgeModel:
        """The judge named by ``KP_JUDGE_MODEL`` (with ``settings`` passed on).

        Raises :class:`JudgeNotConfiguredError` when it is not set.
        """
        name = os.environ.get("KP_JUDGE_MODEL", "").strip()
        if not name:
            raise JudgeNotConfiguredError(
                "judged criteria need a judge model: pass --judge-model to kp eval, set "
                "KP_JUDGE_MODEL, or give judge(..., model=JudgeModel(...))"
            )
        return cls(name, **settings)

    @property
    def usage(self) -> JudgeUsage:
        """What this judge did so far (answers, cache hits, undetermined answers, tokens)."""
        with self._lock:
            return self._usage

    async def answer(self, messages: list[dict[str, str]], sample: int) -> Answer:
        """Sample number ``sample`` of the answer to ``messages``: from the cache, else asked."""
        key = answer_key(self.model, messages, sample, {"temperature": self.temperature})
        stored = self.cache.get(key)
        if stored is not None:
            answer = Answer(stored["verdict"], stored["reasoning"], cached=True)
            self._count(answer)
            return answer
        try:
            reply = await self._ask(messages)
        except ChatError as exc:
            answer = Answer(None, problem=f"the judge could not be asked: {exc}")
        else:
            answer = parse_answer(reply)
            if answer.verdict is not None:
                self.cache.put(
                    key, self.model, {"verdict": answer.verdict, "reasoning": answer.reasoning}
                )
        self._count(answer)
        return answer

    async def _ask(self, messages: list[dict[str, str]]) -> ChatAnswer:
        if self.structured:
            try:
                return await self.client.complete(
                    self.model,
                    messages,
                    response_format=VERDICT_FORMAT,
                    temperature=self.temperature,
                )
            except ChatError as exc:
                if exc.status not in _NO_STRUCTURED_OUTPUT:
                    raise
                self.structured = False
        return await self.client.complete(self.model, messages, temperature=self.temperature)

    def _count(self, answer: Answer) -> None:
        with self._lock:
            usage = self._usage
            self._usage = JudgeUsage(
                calls=usage.calls + (not answer.cached),
                cached=usage.cached + answer.cached,
                undetermined=usage.undetermined + (answer.verdict is None),
                prompt_tokens=usage.prompt_tokens + answer.prompt_tokens,
                completion_tokens=usage.completion_tokens + answer.completion_tokens,
            )

    def close(self) -> None:
        """Close the connections and the cache (both reopen if the judge is used again)."""
        self.client.close()
        self.cache.close()


def parse_answer(reply: ChatAnswer) -> Answer:
    """The verdict in a reply: the JSON of structured output, else a final ``VERDICT:`` line.

    A refusal, a filtered or empty answer and an answer with neither are undetermined.
    """
    verdict, reasoning, problem = _read(reply)
    return Answer(
        verdict,
        reasoning,
        problem,
        prompt_tokens=reply.prompt_tokens,
        completion_tokens=reply.completion_tokens,
    )


def _read(reply: ChatAnswer) -> tuple[bool | None, str, str | None]:
    if reply.refusal:
        return None, "", f"the judge refused: {_short(reply.refusal)}"
    if reply.finish_reason == "content_filter":
        return None, "", "the judge's answer was withheld by a content filter"
    text = (reply.content or "").strip()
    if not text:
        return None, "", "the judge gave an empty answer"
    structured = _structured(text)
    if structured is not None:
        return structured[0], structured[1], None
    lines = text.splitlines()
    for index in range(len(lines) - 1, -1, -1):
        found = _VERDICT_LINE.match(lines[index])
        if found:
            return found.group(1).lower() == "yes", "\n".join(lines[:index]).strip(), None
    return None, "", f"no verdict in the judge's answer: {_short(text)}"


def _structured(text: str) -> tuple[bool, str] | None:
    fenced = _FENCE.match(text)
    try:
        data = json.loads(fenced.group(1) if fenced else text)
    except (ValueError, RecursionError):  # a model's answer is untrusted text
        return None
    if not isinstance(data, dict):
        return None
    verdict = str(data.get("verdict", "")).strip().lower()
    if verdict not in ("yes", "no"):
        return None
    reasoning = data.get("reasoning")
    return verdict == "yes", reasoning.strip() if isinstance(reasoning, str) else ""


_default: JudgeModel | None = None
_default_lock = threading.Lock()


def set_default_judge(model: JudgeModel | None) -> JudgeModel | None:
    """Make ``model`` the judge of criteria given none (``None``: back to the environment's).

    Returns the previous default, so that it can be put back. ``kp eval --judge-model`` sets it.
    """
    global _default
    with _default_lock:
        previous, _default = _default, model
    return previous


def default_judge() -> JudgeModel:
    """The default judge: the one set with :func:`set_default_judge`, else ``KP_JUDGE_MODEL``'s.

    Raises :class:`JudgeNotConfiguredError` when there is neither.
    """
    global _default
    with _default_lock:
        if _default is None:
            _default = JudgeModel.from_env()
        return _default


def _env(*names: str) -> str | None:
    for name in names:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return None


def _short(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
