"""Secrets planted at every path of a generated trace (issue 22 item 2).

:data:`TRACES` generates valid traces with content at every place the schema allows and
unknown fields at any depth: the tool object (``config``, ``description``, ``mcp_server``),
the metadata's free-text fields, dictionary keys, integers. :func:`plantable_paths` lists every
place a secret could sit that docs/redaction.md does not name as exempt, and :func:`plant`
puts one there: in a string, as a dictionary key, or (a card number) as an integer.
"""

from __future__ import annotations

import copy
import random
from typing import Any

from benchmarks._redaction import PLANTED_KINDS, secret_value
from hypothesis import strategies as st

Path = tuple[Any, ...]

#: What redaction leaves as it is (docs/redaction.md, "What is walked, and what is not").
EXEMPT: frozenset[Path] = frozenset(
    {
        ("@context",),
        ("@type",),
        ("id",),
        ("metadata", "created_at"),
        ("metadata", "success"),
        ("metadata", "quality_score"),
        ("metadata", "visibility"),
        ("metadata", "privacy_level"),
    }
)
_STEP_EXEMPT = frozenset({"step_id", "type"})


def secrets_of_every_kind(seed: int) -> list[tuple[str, str, str]]:
    """``(kind, value, text)``: one secret of each kind the detectors know, and the text it is
    planted as (the value in a sentence, or the context the kind needs)."""
    rng = random.Random(seed)
    out = [
        (kind, v := secret_value(rng, kind), f"Please use {v} for this.") for kind in PLANTED_KINDS
    ]
    key_id, aws_secret = secret_value(rng, "aws"), "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzq8ZLEKEY3"
    out += [
        (
            "aws_secret",
            aws_secret,
            f"aws_access_key_id={key_id} aws_secret_access_key={aws_secret}",
        ),
        ("url_password", "Tr0ub4dor&3x", "postgres://admin:Tr0ub4dor&3x@db.example.com:5432/app"),
        ("secret", "q8Zt3LmNw2Xv", "export AUTH_TOKEN=q8Zt3LmNw2Xv"),
        ("date_of_birth", "1984-07-21", "Passenger date of birth: 1984-07-21."),
    ]
    return out


_KEY = st.sampled_from(["a", "b", "note", "url", "items", "x-id", "value"])
_LEAF = st.one_of(
    st.text(alphabet="abcdefgh ", min_size=1, max_size=8),
    st.integers(0, 10**6),
    st.booleans(),
    st.none(),
)
_JSON = st.recursive(
    _LEAF,
    lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=3),
        st.dictionaries(_KEY, inner, min_size=1, max_size=3),
    ),
    max_leaves=8,
)
_OBJECT = st.dictionaries(_KEY, _JSON, min_size=1, max_size=3)
_WORDS = st.text(alphabet="abcdefgh ", min_size=1, max_size=10).filter(str.strip)


@st.composite
def _step(draw: st.DrawFn, index: int) -> dict[str, Any]:
    step: dict[str, Any] = {
        "step_id": index,
        "type": draw(st.sampled_from(["thought", "tool_call", "observation", "error_recovery"])),
        "content": draw(_WORDS),
        "output_summary": draw(_WORDS),
        "latency_ms": draw(st.integers(0, 5000)),
        "input": draw(_OBJECT),
        "tool": {
            "name": "search",
            "mcp_server": draw(_WORDS),
            "description": draw(_WORDS),
            "config": draw(_OBJECT),
        },
    }
    if draw(st.booleans()):
        step["extra"] = draw(_OBJECT)
    return step


@st.composite
def _trace(draw: st.DrawFn) -> dict[str, Any]:
    steps = [draw(_step(i)) for i in range(draw(st.integers(1, 3)))]
    return {
        "@context": "https://openknowledgepulse.org/schema/v1",
        "@type": "ReasoningTrace",
        "id": "kp:trace:planted",
        "source_skill": draw(_WORDS),
        "metadata": {
            "created_at": "2026-01-01T10:00:00Z",
            "agent_id": draw(_WORDS),
            "framework": draw(_WORDS),
            "task_domain": draw(_WORDS),
            "success": True,
            "quality_score": 0.5,
            "visibility": "network",
            "privacy_level": "private",
            "validated_by": [draw(_WORDS)],
            "ticket": draw(_OBJECT),
        },
        "task": {"objective": draw(_WORDS), "input_schema": draw(_OBJECT)},
        "steps": steps,
        "outcome": {"result_summary": draw(_WORDS), "confidence": 0.9},
        "knowledge_graph_delta": {
            "entities": [{"name": draw(_WORDS), "type": draw(_WORDS)}],
            "relationships": [{"fact": draw(_WORDS), "valid_from": draw(_WORDS)}],
        },
        "annotations": draw(_OBJECT),
    }


TRACES = _trace()


def _exempt(path: Path) -> bool:
    if path in EXEMPT:
        return True
    if len(path) == 3 and path[0] == "steps" and path[2] in _STEP_EXEMPT:
        return True
    return len(path) == 4 and path[0] == "steps" and path[2:] == ("tool", "name")


def plantable_paths(trace: dict[str, Any]) -> list[tuple[str, Path]]:
    """``(how, path)`` for every place a secret can sit: ``"string"`` (a string value),
    ``"key"`` (a dictionary key, the dictionary at ``path``), ``"number"`` (an integer)."""
    found: list[tuple[str, Path]] = []

    def walk(value: Any, path: Path) -> None:
        if _exempt(path):
            return
        if isinstance(value, str):
            found.append(("string", path))
        elif isinstance(value, int) and not isinstance(value, bool):
            found.append(("number", path))
        elif isinstance(value, list):
            for i, item in enumerate(value):
                walk(item, (*path, i))
        elif isinstance(value, dict):
            found.append(("key", path))
            for key, item in value.items():
                walk(item, (*path, key))

    walk(trace, ())
    return found


def plant(trace: dict[str, Any], how: str, path: Path, text: str, value: str) -> dict[str, Any]:
    """A copy of ``trace`` with ``text`` at ``path`` (``value`` as an integer for a number)."""
    out = copy.deepcopy(trace)
    parent = out
    for part in path[:-1] if how != "key" else path:
        parent = parent[part]
    if how == "key":
        parent[text] = "planted"
    elif how == "number":
        parent[path[-1]] = int(value.replace(" ", "").replace("-", ""))
    else:
        parent[path[-1]] = text
    return out
