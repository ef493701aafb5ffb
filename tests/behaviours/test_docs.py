"""The agent rubric's section of docs/rubrics.md: its examples run as written, its table is the
rubric's."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from knowledgepulse.behaviours import AGENT_RUBRIC, BEHAVIOURS, load_agent_rubric

DOC = Path(__file__).resolve().parents[2] / "docs" / "rubrics.md"
SECTION = DOC.read_text(encoding="utf-8").split("## The agent rubric", 1)[1].split("\n## ", 1)[0]


def test_the_python_example_runs() -> None:
    blocks = re.findall(r"^```python\n(.*?)^```", SECTION, re.M | re.S)
    assert len(blocks) == 1
    namespace: dict[str, object] = {}
    exec(compile(blocks[0], "docs/rubrics.md", "exec"), namespace)
    assert list(namespace["rubric"].weights) == ["no_loops", "errors_recovered", "answered"]  # type: ignore[attr-defined]


@pytest.mark.skipif(sys.version_info < (3, 11), reason="tomllib")
def test_the_settings_example_loads(tmp_path: Path) -> None:
    text = re.findall(r"^```toml\n(.*?)^```", SECTION, re.M | re.S)[0]
    # As written, no_loops' 0.15 makes the weights sum to 1.05: the comment says to normalise.
    path = tmp_path / "agent.toml"
    path.write_text(text.replace("# normalise = true", "normalise = true"), encoding="utf-8")
    rubric = load_agent_rubric(path)
    assert rubric.name == "airline-agent" and rubric.thresholds.success == 0.8
    budget = next(c for c in rubric.criteria if c.name == "within_budget")
    assert budget.check.parameters == {"max_steps": 40}  # type: ignore[attr-defined]


def test_the_table_gives_each_criterion_its_weight() -> None:
    table = SECTION.split("| criterion | weight | passes when", 1)[1].split("\n\n", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \| (\d\.\d\d) \|", table, re.M)
    assert [(name, float(weight)) for name, weight in rows] == [
        (name, behaviour.weight) for name, behaviour in BEHAVIOURS.items()
    ]
    assert AGENT_RUBRIC.weights == dict((name, float(weight)) for name, weight in rows)
