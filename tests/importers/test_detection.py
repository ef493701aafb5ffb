"""Every fixture of every format is detected as its own format, and no other."""

from __future__ import annotations

from pathlib import Path

import pytest

from knowledgepulse.importers import FORMATS, detect_format
from knowledgepulse.io._reader import iter_records

from ._util import DATA

# Fixture name prefixes, longest first: "openai_agents_x" is not an "openai" fixture.
_PREFIXES = sorted(((name.replace("-", "_"), name) for name in FORMATS), key=lambda p: -len(p[0]))
FIXTURES = sorted(
    p for p in [*DATA.glob("*.json"), *(DATA / "units").glob("*.json*")] if p.is_file()
)


def _format_of(path: Path) -> str:
    return next(
        name
        for prefix, name in _PREFIXES
        if path.name.startswith(prefix) and path.name[len(prefix)] in "_."
    )


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.name)
def test_fixture_is_detected_as_its_format(fixture: Path) -> None:
    expected = _format_of(fixture)
    records = [r for r in iter_records([str(fixture)]) if r.error is None]
    assert records
    for record in records:
        assert detect_format(record.data) == expected, f"{fixture.name}:{record.line}"


def test_every_new_format_has_a_fixture() -> None:
    covered = {_format_of(p) for p in FIXTURES}
    assert {"otel", "openai-agents", "langfuse"} <= covered


def test_a_field_of_another_type_tells_no_format_and_never_raises() -> None:
    # A list where OpenAI Agents' "object" or a content block's "type" goes raised TypeError
    # (unhashable) out of detection, stopping a --from auto run.
    chat = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}]
    assert detect_format({"object": ["trace"], "messages": chat}) == "openai"
    blocks = [{"role": "user", "content": [{"type": ["text"], "text": "hi"}]}]
    assert detect_format({"messages": blocks}) == "openai"  # no Anthropic block among them
    assert detect_format({"data": {"object": {"a": 1}}}) is None
