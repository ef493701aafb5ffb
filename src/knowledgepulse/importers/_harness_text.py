"""Text rules shared by the agent-harness importers (Claude Code, Codex, SWE-agent, ...).

Harnesses wrap the task in their own text: a prompt template around the issue, context blocks
(``<environment_context>``, ``<system-reminder>``) injected as user messages, command output
tagged with its exit code. These helpers read those conventions, so each importer can choose
the objective by a documented rule (named with ``._objective``'s names) and mark failed
commands.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "exit_code_of",
    "list_of",
    "mapping",
    "mcp_tool",
    "starts_with_any",
    "strip_blocks",
    "task_from_template",
    "text_of",
]

# Where a template's next field starts: Jinja ``{{``/``{%`` or a format field ``{name}``.
_FIELD = re.compile(r"\{\{|\{%|\{[A-Za-z_]")
_RETURNCODE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
_EXITED = re.compile(r"(?:Process exited with code|[Ee]xit code:?)\s*(-?\d+)")


def strip_blocks(text: str, tags: Iterable[str]) -> str:
    """``text`` without the ``<tag>...</tag>`` blocks of ``tags`` (harness context), trimmed."""
    for tag in tags:
        text = re.sub(rf"<{re.escape(tag)}>.*?</{re.escape(tag)}>", "", text, flags=re.DOTALL)
    return text.strip()


def starts_with_any(text: str, prefixes: Iterable[str]) -> bool:
    stripped = text.lstrip()
    return any(stripped.startswith(prefix) for prefix in prefixes)


def exit_code_of(text: str) -> int | None:
    """The exit code a command's output reports: ``<returncode>1</returncode>`` (mini-SWE-agent),
    ``Process exited with code 1`` (Codex ``exec_command``); ``None`` when it names none."""
    match = _RETURNCODE.search(text) or _EXITED.search(text[:400])
    return int(match.group(1)) if match else None


def task_from_template(text: str, template: Any, placeholder: str = "{{task}}") -> str | None:
    """The task inside ``text`` rendered from a prompt ``template`` (Jinja-style), or ``None``.

    The text before the placeholder must open ``text``; the task ends where the template's
    next literal text (up to its next field: ``{{``, ``{%`` or ``{name}``; at least 8
    characters) begins. Only the
    first placeholder counts: what follows it in the template may be anything.
    """
    if not isinstance(template, str) or placeholder not in template:
        return None
    head, _, tail = template.partition(placeholder)
    if _FIELD.search(head) or not text.startswith(head):
        return None
    rest = text[len(head) :]
    literal = _FIELD.split(tail, maxsplit=1)[0]
    if len(literal.strip()) < 8:
        task = rest
    else:
        end = rest.find(literal)
        if end == -1:
            return None
        task = rest[:end]
    return task.strip() or None


_MCP_NAME = re.compile(r"^mcp__(?P<server>[^_].*?)__(?P<tool>.+)$")


def mcp_tool(name: str) -> tuple[str, str | None]:
    """A tool name as Claude Code and Codex name MCP tools, ``mcp__<server>__<tool>``, split
    into the tool and its server; any other name is itself, with no server."""
    match = _MCP_NAME.match(name)
    if match is None:
        return name, None
    return match.group("tool"), match.group("server")


def text_of(value: Any) -> str:
    """A value's text when it is text, else the empty string."""
    return value if isinstance(value, str) else ""


def list_of(value: Any) -> list[Any]:
    """``value`` when it is an array, else an empty one (for optional lists read leniently)."""
    return list(value) if isinstance(value, list) else []


def mapping(value: Any) -> Mapping[str, Any]:
    """``value`` when it is an object, else an empty one."""
    return value if isinstance(value, Mapping) else {}
