"""Harbor job directories: one trace per trial, its success from the trial's reward.

A Harbor job writes a directory::

    <job>/config.json            the job's configuration        (not a record)
    <job>/result.json            the job's summary               (not a record)
    <job>/<trial>/config.json    the trial's configuration       (not a record)
    <job>/<trial>/result.json    the trial's result, with the verifier's reward
    <job>/<trial>/agent/trajectory.json   the agent's ATIF trajectory: the trial's record
    <job>/<trial>/...            logs, verifier output           (not records)

A trial is a directory holding ``agent/trajectory.json``, or ``result.json`` and
``config.json`` beside an ``agent`` directory (a trial whose agent left no trajectory, which
is rejected). Its trace is the trajectory's (see :mod:`.atif`), with:

- ``metadata.success``: the reward (``verifier_result.rewards.reward``, or the only reward,
  or ``verifier_result.reward``) ≥ :data:`SUCCESS_THRESHOLD`; a trial without a reward that
  raised an exception (``exception_info``) failed; otherwise success is defaulted;
- ``kp_import.reward`` (and ``kp_import.rewards`` when the verifier gave several),
  ``kp_import.trial`` and ``kp_import.task`` (``trial_name``, ``task_name``);
- ``created_at``: the earliest step timestamp, else the trial's ``started_at``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from knowledgepulse.io._reader import iter_records

from ._builder import TraceBuilder
from ._options import ImportOptions
from ._stream import Conversion
from ._values import ConversionError, parse_timestamp
from .atif import atif_trace

__all__ = ["SUCCESS_THRESHOLD", "HarborLayout", "convert_trial", "harbor_layout"]

# A trial succeeded when its reward reaches this: full marks, as for tau-bench (partial
# credit is kept in kp_import.reward, and is not success).
SUCCESS_THRESHOLD = 1.0
_TRAJECTORY = Path("agent", "trajectory.json")


@dataclass(frozen=True)
class HarborLayout:
    """The trials found among some files, and every file they (and their jobs) account for.

    ``trials``: trial directory → the file that is its record (its trajectory, else its
    ``result.json`` when the agent left no trajectory). ``consumed``: every file that belongs
    to a trial or is a job's own ``config.json``/``result.json``: not read as records.
    """

    trials: dict[Path, Path]
    consumed: frozenset[str]


def harbor_layout(files: Iterable[str]) -> HarborLayout:
    """The Harbor trials among ``files`` (as :func:`~knowledgepulse.io._reader.expand_paths` lists
    them): see the module's description of what a trial is."""
    names = [name for name in files if name != "-"]
    trials: dict[Path, Path] = {}
    for name in names:
        path = Path(name)
        if path.parts[-2:] == _TRAJECTORY.parts:
            trials.setdefault(path.parent.parent, path)
    for name in names:
        path = Path(name)
        folder = path.parent
        if (
            path.name == "result.json"
            and folder not in trials
            and (folder / "config.json").is_file()
            and (folder / "agent").is_dir()
        ):
            trials[folder] = path
    jobs = {trial.parent for trial in trials}
    consumed = {
        name
        for name in names
        if any(parent in trials for parent in Path(name).parents)
        or (Path(name).parent in jobs and Path(name).name in ("config.json", "result.json"))
    }
    return HarborLayout(trials, frozenset(consumed))


def convert_trial(trial: Path, record_file: Path, options: ImportOptions) -> Conversion:
    """The unit of one trial: its trajectory's record and trace (or why it is rejected)."""
    records = list(iter_records([str(record_file)]))
    if record_file.parts[-2:] != _TRAJECTORY.parts:
        problem = f"trial {trial.name}: the agent left no {_TRAJECTORY.as_posix()}"
        return Conversion(records, [], [problem], "atif")
    errors = [record.error for record in records if record.error is not None]
    if errors:
        return Conversion(records, [], errors, "atif")
    data = records[0].data if len(records) == 1 else None
    if not isinstance(data, Mapping):
        return Conversion(records, [], ["expected one ATIF trajectory object"], "atif")
    builder = TraceBuilder("atif")
    try:
        _read_result(builder, trial / "result.json")
        trace = atif_trace(dict(data), "", options, builder)
    except ConversionError as exc:
        return Conversion(records, [], [str(p) for p in exc.problems], "atif")
    return Conversion(records, [trace], [], "atif")


def _read_result(builder: TraceBuilder, path: Path) -> None:
    """The trial's facts from its ``result.json`` (a trial may not have one yet)."""
    if not path.is_file():
        return
    try:
        result = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConversionError("", f"{path.name}: cannot be read ({exc})") from None
    if not isinstance(result, Mapping):
        raise ConversionError("", f"{path.name}: expected a JSON object")
    for key, info in (("trial_name", "trial"), ("task_name", "task")):
        if isinstance(result.get(key), str):
            builder.info[info] = result[key]
    builder.note_time(parse_timestamp(result.get("started_at")))
    reward, rewards = _reward(result.get("verifier_result"))
    if rewards is not None:
        builder.info["rewards"] = rewards
    if reward is not None:
        builder.info["reward"] = reward
        builder.success = reward >= SUCCESS_THRESHOLD
    elif result.get("exception_info"):
        builder.success = False


def _reward(verifier: Any) -> tuple[float | None, dict[str, Any] | None]:
    """The trial's reward, and all of them when the verifier gave several."""
    if not isinstance(verifier, Mapping):
        return None, None
    rewards = verifier.get("rewards")
    if isinstance(rewards, Mapping) and rewards:
        several = dict(rewards) if len(rewards) > 1 else None
        value = rewards.get("reward") if len(rewards) > 1 else next(iter(rewards.values()))
        return _number(value), several
    return _number(verifier.get("reward")), None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)
