"""A small JSON Schema check for tool arguments, so ``valid_arguments`` needs no dependency.

Tool schemas are short: objects of typed properties, some required, enums, arrays of items.
These keywords are checked: ``type`` (one or a list; ``integer`` is a whole number, a boolean
is never a number), ``enum``, ``const``, ``required``, ``properties``,
``additionalProperties`` (``false`` or a schema), ``items`` (one schema), ``anyOf`` and
``oneOf`` (read as "at least one"), ``allOf``. Other keywords (formats, bounds, ``$ref``) are
not checked: a call is refused only for what is certainly wrong.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..io._reader import json_type_name

__all__ = ["schema_problems"]

_DEPTH = 32


def schema_problems(value: Any, schema: Any, path: str = "") -> list[str]:
    """What is wrong with ``value`` under ``schema``, each as ``path: message``; empty when
    nothing checked is wrong. A schema that is not an object checks nothing."""
    problems: list[str] = []
    _check(value, schema, path, problems, 0)
    return problems


def _failures(value: Any, schema: Any, path: str, depth: int) -> list[str]:
    problems: list[str] = []
    _check(value, schema, path, problems, depth)
    return problems


def _type_ok(value: Any, kind: Any) -> bool:
    if kind == "object":
        return isinstance(value, Mapping)
    if kind == "array":
        return isinstance(value, (list, tuple))
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "null":
        return value is None
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return True  # an unknown type name checks nothing


def _at(path: str, key: str | int) -> str:
    return f"{path}[{key}]" if isinstance(key, int) else (f"{path}.{key}" if path else str(key))


def _check(value: Any, schema: Any, path: str, problems: list[str], depth: int) -> None:
    if not isinstance(schema, Mapping) or depth > _DEPTH:
        return
    where = path or "arguments"
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if isinstance(kind, str) else []
    if kinds and not any(_type_ok(value, k) for k in kinds):
        problems.append(
            f"{where}: expected {' or '.join(map(str, kinds))}, got {json_type_name(value)}"
        )
        return
    enum = schema.get("enum")
    if isinstance(enum, list) and value not in enum:
        problems.append(f"{where}: {value!r:.40} is not one of {enum!r:.60}")
    if "const" in schema and value != schema["const"]:
        problems.append(f"{where}: expected {schema['const']!r:.40}")
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if (
            isinstance(options, list)
            and options
            and all(_failures(value, option, path, depth + 1) for option in options)
        ):
            problems.append(f"{where}: matches none of the {key} schemas")
    all_of = schema.get("allOf")
    if isinstance(all_of, list):
        for option in all_of:
            _check(value, option, path, problems, depth + 1)
    if isinstance(value, Mapping):
        _check_object(value, schema, path, problems, depth)
    elif isinstance(value, (list, tuple)):
        items = schema.get("items")
        for index, item in enumerate(value):
            _check(item, items, _at(path, index), problems, depth + 1)


def _check_object(
    value: Mapping[str, Any], schema: Mapping[str, Any], path: str, problems: list[str], depth: int
) -> None:
    required = schema.get("required")
    if isinstance(required, list):
        for key in required:
            if isinstance(key, str) and key not in value:
                problems.append(f"{_at(path, key)}: missing (required)")
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    additional = schema.get("additionalProperties", True)
    for key, item in value.items():
        if key in properties:
            _check(item, properties[key], _at(path, str(key)), problems, depth + 1)
        elif additional is False:
            problems.append(f"{_at(path, str(key))}: not a declared argument")
        elif isinstance(additional, Mapping):
            _check(item, additional, _at(path, str(key)), problems, depth + 1)
