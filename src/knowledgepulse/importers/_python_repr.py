"""Values some frameworks log as Python text rather than JSON, read back as data.

Python instrumentations sometimes ``str()`` a value before logging it: BeeAI's trace output is
a dict's repr (``{'role': 'assistant', 'text': "..."}``), Agno logs each message of a model
call as its pydantic repr (``role='user' content='...' name=None tool_calls=None ...``). Read as
text, they end up as raw payloads in thoughts, summaries and user turns. Only literals are
read (:func:`ast.literal_eval`): nothing is executed.
"""

from __future__ import annotations

import ast
import io
import itertools
import re
import tokenize
from typing import Any

__all__ = ["is_message_repr", "python_literal", "repr_fields"]

# A pydantic repr of a chat message, as Agno logs them: ``role='user' content=...``.
_MESSAGE_REPR = re.compile(r"^role='(?:system|developer|user|assistant|tool)' content=")


def python_literal(text: str) -> Any:
    """The dict or list a Python literal's text holds, else ``None``."""
    stripped = text.strip()
    if stripped[:1] not in ("{", "[") or stripped[-1:] not in ("}", "]"):
        return None
    try:
        value = ast.literal_eval(stripped)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, (dict, list)) else None


def is_message_repr(text: str) -> bool:
    """Whether ``text`` is a chat message's pydantic repr (``role='user' content=...``)."""
    return bool(_MESSAGE_REPR.match(text))


def repr_fields(text: str) -> dict[str, Any]:
    """The fields of a pydantic repr (``key=value key=value``) whose values are literals;
    fields whose value is not a literal (a nested object's repr) are left out."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return {}
    starts: list[tuple[str, int, int]] = []  # (name, where the name starts, where its value does)
    depth = 0
    for token, after in itertools.pairwise(tokens):
        if token.type == tokenize.OP and token.string in ("(", "[", "{"):
            depth += 1
        elif token.type == tokenize.OP and token.string in (")", "]", "}"):
            depth -= 1
        elif (
            depth == 0
            and token.type == tokenize.NAME
            and after.type == tokenize.OP
            and after.string == "="
            and token.start[0] == 1
        ):
            starts.append((token.string, token.start[1], after.end[1]))
    fields: dict[str, Any] = {}
    for index, (name, _, value_start) in enumerate(starts):
        end = starts[index + 1][1] if index + 1 < len(starts) else len(text)
        try:
            fields[name] = ast.literal_eval(text[value_start:end].strip())
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
    return fields
