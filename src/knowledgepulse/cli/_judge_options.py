"""The judge model's options of ``kp eval``, and the run of judged criteria they set up."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    pass

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")

_DEFAULT_CONCURRENCY = 4


def judge_options(command: F) -> F:
    """Add the judge options; while ``command`` runs, they make the default judge model.

    After the run the judge's figures (answers asked and cached, tokens) go to stderr unless
    ``--quiet``.
    """
    options = [
        click.option(
            "--judge-model",
            envvar="KP_JUDGE_MODEL",
            metavar="MODEL",
            help="The model that answers judged criteria (env KP_JUDGE_MODEL).",
        ),
        click.option(
            "--judge-url",
            envvar="KP_JUDGE_URL",
            metavar="URL",
            help="Its OpenAI-compatible endpoint, up to /v1 (env KP_JUDGE_URL; default "
            "OpenAI's). API key: env KP_JUDGE_API_KEY or OPENAI_API_KEY.",
        ),
        click.option(
            "--judge-cache",
            metavar="DIR",
            help="Where the judge's answers are cached (default ~/.cache/knowledgepulse/judge).",
        ),
        click.option(
            "--no-cache",
            is_flag=True,
            help="Ask the judge again even where an answer is cached (the new one replaces it).",
        ),
        click.option(
            "--judge-concurrency",
            type=click.IntRange(min=1),
            default=_DEFAULT_CONCURRENCY,
            show_default=True,
            metavar="N",
            help="The most requests to the judge at once.",
        ),
    ]

    @functools.wraps(command)
    def run(
        *args: Any,
        judge_model: str | None,
        judge_url: str | None,
        judge_cache: str | None,
        no_cache: bool,
        judge_concurrency: int,
        **kwargs: Any,
    ) -> Any:
        from ..rubrics import JudgeModel, set_default_judge

        if not judge_model:
            return command(*args, **kwargs)
        model = JudgeModel(
            judge_model,
            base_url=judge_url,
            cache_dir=judge_cache,
            use_cache=not no_cache,
            concurrency=judge_concurrency,
        )
        previous = set_default_judge(model)
        try:
            return command(*args, **kwargs)
        finally:
            set_default_judge(previous)
            model.close()
            usage = model.usage
            if usage.calls + usage.cached and not kwargs.get("quiet"):
                click.echo(
                    f"judge {model.model}: {usage.calls + usage.cached} answers ({usage.calls} "
                    f"asked, {usage.cached} from the cache, {usage.undetermined} undetermined); "
                    f"{usage.prompt_tokens:,} prompt + {usage.completion_tokens:,} completion tokens",
                    err=True,
                )

    wrapped: Any = run
    for option in reversed(options):
        wrapped = option(wrapped)
    return wrapped  # type: ignore[no-any-return]
