"""Tool definitions given beside the logs (``kp eval --tools FILE``), for traces whose source
kept none: then ``known_tools`` and ``valid_arguments`` can decide.

A tools file is JSON: OpenAI's ``tools`` list (``[{"type": "function", "function": {"name",
"parameters"}}]``, which is also tau-bench's ``tools_info``), that list under ``"tools"`` (a
request body), or an MCP ``tools/list`` answer (``{"tools": [{"name", "inputSchema"}]}``,
bare or as the JSON-RPC ``result``). Each tool needs a name; its argument schema, when given,
must be a JSON Schema object whose keywords hold what they should (a ``type`` JSON Schema
knows, ``properties`` an object of schemas, ``required`` a list of names, ...). Anything else
is a :class:`ToolsFileError` naming the file and the field.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .._errors import KnowledgePulseError
from .._schema import ReasoningTrace
from ..io._reader import json_type_name
from ._facts import tool_definitions

__all__ = ["ToolsFileError", "read_tool_definitions", "tool_definitions_of", "with_tools"]

_TYPES = frozenset({"object", "array", "string", "number", "integer", "boolean", "null"})
_SCHEMA_KEYS = ("parameters", "input_schema", "inputSchema")
_DEPTH = 32


class ToolsFileError(KnowledgePulseError, ValueError):
    """A tools file that is not a list of tool definitions, or whose schema is not a JSON
    Schema; the message names the file and the field (``tools.json: [2].function.name``)."""


def read_tool_definitions(path: str | Path) -> list[dict[str, Any]]:
    """The tools a file defines, each as ``{"name", "parameters"?}``; raises
    :class:`ToolsFileError` naming the file and the field."""
    where = str(path)
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ToolsFileError(f"{where}: cannot read: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ToolsFileError(f"{where}: not JSON: {exc}") from None
    except RecursionError:
        raise ToolsFileError(
            f"{where}: not JSON: nested deeper than Python's parser reads"
        ) from None
    try:
        return tool_definitions_of(data)
    except ToolsFileError as exc:
        raise ToolsFileError(f"{where}: {exc}") from None


def tool_definitions_of(data: Any) -> list[dict[str, Any]]:
    """The tools of a loaded tools file (see the module); :class:`ToolsFileError` naming the
    field (``[2].function.parameters.type``)."""
    prefix = ""
    if isinstance(data, Mapping):
        if isinstance(data.get("result"), Mapping):  # an MCP JSON-RPC answer
            data, prefix = data["result"], "result."
        if "tools" not in data:
            raise ToolsFileError(
                "expected a list of tools (OpenAI's tools, tau-bench's tools_info) or an "
                f"object with 'tools' (an MCP tools/list answer); got an object with "
                f"{', '.join(sorted(map(str, data))[:5]) or 'no keys'}"
            )
        data, prefix = data["tools"], f"{prefix}tools"
    if isinstance(data, (str, bytes)) or not isinstance(data, Sequence):
        raise ToolsFileError(
            f"{prefix or 'the file'}: expected a list of tools, got {json_type_name(data)}"
        )
    if not data:
        raise ToolsFileError(f"{prefix or 'the file'}: the list of tools is empty")
    tools = [_tool(item, f"{prefix}[{index}]") for index, item in enumerate(data)]
    names = [tool["name"] for tool in tools]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ToolsFileError(f"{prefix or 'the file'}: tool {twice[0]!r} is defined twice")
    return tools


def _tool(item: Any, where: str) -> dict[str, Any]:
    if not isinstance(item, Mapping):
        raise ToolsFileError(f"{where}: expected a tool object, got {json_type_name(item)}")
    body, at = item, where
    if "function" in item:
        if not isinstance(item["function"], Mapping):
            raise ToolsFileError(
                f"{where}.function: expected an object, got {json_type_name(item['function'])}"
            )
        body, at = item["function"], f"{where}.function"
    name = body.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ToolsFileError(f"{at}.name: expected the tool's name, got {name!r:.40}")
    tool: dict[str, Any] = {"name": name}
    for key in _SCHEMA_KEYS:
        if key in body and body[key] is not None:
            problem = schema_problem(body[key], f"{at}.{key}")
            if problem:
                raise ToolsFileError(f"{problem} (not a valid JSON Schema)")
            tool["parameters"] = body[key]
            break
    return tool


def schema_problem(schema: Any, where: str, depth: int = 0) -> str | None:
    """The first thing that keeps ``schema`` from being a JSON Schema (``where.type: 'strin'
    is not a JSON Schema type``), or ``None``. The keywords the argument check reads are
    checked; others are left to the schema's author."""
    if isinstance(schema, bool):
        return None  # true and false are schemas
    if not isinstance(schema, Mapping):
        return f"{where}: expected a schema object, got {json_type_name(schema)}"
    if depth > _DEPTH:
        return f"{where}: nested more than {_DEPTH} levels"
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if kind is not None else []
    for each in kinds:
        if not isinstance(each, str) or each not in _TYPES:  # an object is unhashable
            return f"{where}.type: {each!r} is not a JSON Schema type"
    checks = (
        ("properties", Mapping, "an object of schemas"),
        ("required", list, "a list of property names"),
        ("enum", list, "a list of values"),
        ("anyOf", list, "a list of schemas"),
        ("oneOf", list, "a list of schemas"),
        ("allOf", list, "a list of schemas"),
    )
    for key, shape, what in checks:
        if key in schema and not isinstance(schema[key], shape):
            return f"{where}.{key}: expected {what}, got {json_type_name(schema[key])}"
    required = schema.get("required") or []
    if not all(isinstance(name, str) for name in required):
        return f"{where}.required: expected a list of property names"
    for sub, at in _subschemas(schema, where):
        problem = schema_problem(sub, at, depth + 1)
        if problem:
            return problem
    return None


def _subschemas(schema: Mapping[str, Any], where: str) -> list[tuple[Any, str]]:
    """The schemas inside ``schema`` the argument check reads, each with its place."""
    found = [
        (sub, f"{where}.properties.{key}") for key, sub in (schema.get("properties") or {}).items()
    ]
    for key in ("anyOf", "oneOf", "allOf"):
        found += [(sub, f"{where}.{key}[{i}]") for i, sub in enumerate(schema.get(key) or [])]
    found += [
        (schema[key], f"{where}.{key}")
        for key in ("items", "additionalProperties")
        if key in schema
    ]
    return found


def with_tools(trace: ReasoningTrace, tools: Sequence[Mapping[str, Any]]) -> ReasoningTrace:
    """``trace`` with ``tools`` as its declared tools (``metadata.tool_definitions``), unless
    it declares its own: what the run itself recorded is kept."""
    if tool_definitions(trace) is not None:
        return trace
    data = trace.to_dict()
    data["metadata"]["tool_definitions"] = [dict(tool) for tool in tools]
    return ReasoningTrace.model_validate(data)
