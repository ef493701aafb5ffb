"""The tools a logged request declared, kept as ``kp_import.tool_definitions`` so that the
``known_tools`` and ``valid_arguments`` checks can decide without a ``--tools`` file."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ._binary import scrub_value

__all__ = ["declared_tools", "first_of_each_name", "tools_of_span_attributes", "tools_of_spans"]

_SCHEMA_KEYS = ("parameters", "input_schema", "inputSchema", "parametersJsonSchema")


def declared_tools(value: Any) -> list[dict[str, Any]]:
    """Each tool a request's tool list declares, as ``{"name", "description"?,
    "parameters"?}``: OpenAI's ``{"type": "function", "function": {...}}`` and the Responses
    API's flat functions, Anthropic's ``{name, input_schema}``, Gemini's
    ``{"functionDeclarations": [...]}`` groups (its upper-case ``OBJECT``/``STRING`` types
    written as JSON Schema's) and Bedrock's ``{"toolSpec": {name, inputSchema: {json}}}``.
    A built-in tool that names no function (``{"type": "web_search"}``) is left out; so is
    anything that is not a list of objects."""
    if not isinstance(value, list):
        return []
    found: list[dict[str, Any]] = []
    for item in value:
        if not isinstance(item, Mapping):
            continue
        group = item.get("functionDeclarations", item.get("function_declarations"))
        if isinstance(group, list):
            found.extend(
                tool
                for tool in (_tool(d, lower_types=True) for d in group if isinstance(d, Mapping))
                if tool is not None
            )
            continue
        spec = item.get("toolSpec")
        if isinstance(spec, Mapping):
            schema = spec.get("inputSchema")
            body = (
                {**spec, "parameters": schema.get("json")} if isinstance(schema, Mapping) else spec
            )
            tool = _tool(body)
        else:
            inner = item.get("function")
            tool = _tool(inner if isinstance(inner, Mapping) else item)
        if tool is not None:
            found.append(tool)
    return found


def _tool(body: Mapping[str, Any], *, lower_types: bool = False) -> dict[str, Any] | None:
    name = body.get("name")
    if not isinstance(name, str) or not name.strip():
        return None
    tool: dict[str, Any] = {"name": name}
    if isinstance(body.get("description"), str) and body["description"]:
        tool["description"] = body["description"]
    schema = next((body[k] for k in _SCHEMA_KEYS if isinstance(body.get(k), Mapping)), None)
    if schema is not None:
        tool["parameters"] = scrub_value(_lowered(schema) if lower_types else schema)
    return tool


def _lowered(schema: Any, depth: int = 0) -> Any:
    """A Gemini schema's ``type`` values in lower case (``OBJECT`` → ``object``), at every
    level (to 64 levels: deeper ones are kept as they are)."""
    if depth > 64:
        return schema
    if isinstance(schema, Mapping):
        return {
            key: (
                value.lower()
                if key == "type" and isinstance(value, str)
                else _lowered(value, depth + 1)
            )
            for key, value in schema.items()
        }
    if isinstance(schema, list):
        return [_lowered(item, depth + 1) for item in schema]
    return schema


_OPENINFERENCE_TOOL = re.compile(r"llm\.tools\.(\d+)\.tool\.json_schema")


def tools_of_span_attributes(attributes: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The tools a model-call span says the model was given: the GenAI conventions'
    ``gen_ai.tool.definitions`` (a list, or its JSON text) and OpenInference's
    ``llm.tools.N.tool.json_schema`` (each the JSON text of one OpenAI tool)."""
    given = attributes.get("gen_ai.tool.definitions")
    if isinstance(given, str):
        given = _json(given)
    found = declared_tools(given)
    numbered = sorted(
        (int(match.group(1)), value)
        for key, value in attributes.items()
        if isinstance(key, str) and (match := _OPENINFERENCE_TOOL.fullmatch(key))
    )
    found += declared_tools(
        [_json(value) if isinstance(value, str) else value for _, value in numbered]
    )
    return found


def tools_of_spans(attribute_maps: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The tools the spans with these attributes declare (:func:`tools_of_span_attributes`),
    the first definition of each name."""
    return first_of_each_name(tools_of_span_attributes(a) for a in attribute_maps)


def first_of_each_name(groups: Iterable[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The tools of several declarations (each model call lists the tools again), the first
    definition of each name, in the order first seen."""
    found: dict[str, dict[str, Any]] = {}
    for tools in groups:
        for tool in tools:
            found.setdefault(tool["name"], tool)
    return list(found.values())


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None
