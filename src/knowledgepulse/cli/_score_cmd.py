"""``kp score``: one score line per trace, a summary on stderr, the sharing gate.

The options are declared here; :mod:`._score_run` gathers them into typed groups, checks
them and writes the run; the scoring is the library's (:mod:`knowledgepulse.scoring._run`).
"""

from __future__ import annotations

import click

from ..distributed._cli import engine_options
from ._app import app
from ._integrations import integration_options
from ._options import (
    PATHS_HELP,
    batch_size_option,
    from_option,
    max_errors_option,
    option_groups,
    output_option,
    override_options,
    paths_argument,
    profiles_option,
    quiet_option,
    rejects_option,
)
from ._score_run import (
    EngineChoice,
    InputChoices,
    ScoreOutputs,
    ScoringChoices,
    SinkChoices,
    plan_score,
    run_score,
)


@app.command(
    "score",
    epilog=(
        PATHS_HELP + "\n\b\nExamples:\n"
        "  kp score examples/traces.jsonl\n"
        "  kp score logs/ --threshold 0.6 --accepted keep.jsonl --rejects bad.jsonl -o scores.jsonl\n"
        "  cat traces.jsonl | kp score - --no-embed\n"
        "  kp score --from openai conversations.json --profiles examples/profiles.toml\n"
        "  kp score examples/traces.jsonl -o scores.jsonl --table"
    ),
)
@paths_argument
@output_option("Write score lines here (default stdout; .gz compresses).")
@click.option(
    "--threshold",
    type=click.FloatRange(0.0, 1.0),
    metavar="T",
    help="Sharing gate: a trace passes when its score >= T.",
)
@click.option(
    "--accepted",
    metavar="FILE",
    help="Write the full traces that pass --threshold here, metadata.quality_score set to their score.",
)
@rejects_option
@click.option("--no-embed", is_flag=True, help="Do not embed: novelty is 0.5 for every trace.")
@click.option(
    "--embedder",
    "embedder_choice",
    type=click.Choice(["auto", "onnx", "openvino", "bf16", "static"]),
    default="auto",
    show_default=True,
    help="auto: on CPUs with native bf16, openvino (bf16), else bf16 (torch, the fast "
    "extra); elsewhere onnx (fp32). static: token vectors derived from MiniLM, far faster "
    "and less accurate, for a first pass over huge piles (a --kb made with it takes only "
    "its vectors).",
)
@click.option(
    "--novelty",
    type=click.Choice(["task", "seed"]),
    default="task",
    show_default=True,
    help="task: novelty by the task (its text's vector, the values its tools were given, "
    "copies; calibrated: a repeat of a task seen is near 0, a new task near 1). seed: the "
    "seed's one vector of the objective and every step, 1 - cosine. Each score line says "
    "which (novelty_by).",
)
@profiles_option
@click.option(
    "--kb",
    metavar="FILE|URL",
    help="Measure novelty against this knowledge base (an SQLite file, created if missing, or "
    "a postgresql:// URL) and store traces in it.",
)
@click.option(
    "--add",
    type=click.Choice(["all", "accepted", "none"]),
    help="Which scored traces go into --kb (default: accepted with --threshold, else all).",
)
@from_option()
@override_options
@batch_size_option
@max_errors_option
@engine_options
@click.option(
    "--table",
    is_flag=True,
    help="Also print a table of every trace's score and breakdown on stdout.",
)
@integration_options("score")
@quiet_option
@option_groups(
    inputs=InputChoices,
    outputs=ScoreOutputs,
    scoring=ScoringChoices,
    engine=EngineChoice,
    sinks=SinkChoices,
)
def score_command(
    inputs: InputChoices,
    outputs: ScoreOutputs,
    scoring: ScoringChoices,
    engine: EngineChoice,
    sinks: SinkChoices,
) -> None:
    """Score ReasoningTraces: one JSON line per trace with the score and its breakdown."""
    plan = plan_score(inputs, outputs, scoring, engine, sinks)
    run_score(plan, inputs, outputs, scoring, engine)
