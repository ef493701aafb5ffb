"""``kp eval --tools FILE``: tool definitions given beside logs that kept none, so known_tools
and valid_arguments decide; a file that is not a tool list is refused naming file and field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from knowledgepulse.behaviours import (
    ToolsFileError,
    known_tools,
    read_tool_definitions,
    tool_definitions_of,
    valid_arguments,
    with_tools,
)
from knowledgepulse.cli import main
from knowledgepulse.importers import convert

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "tau_bench_sample.json"

# The airline tools the sample calls, in OpenAI's form (tau-bench's tools_info); book_reservation
# with its schema as tau-bench declares it (abridged to the keywords checked).
READS = [
    "get_user_details",
    "get_reservation_details",
    "search_direct_flight",
    "search_onestop_flight",
    "update_reservation_flights",
    "cancel_reservation",
    "calculate",
    "think",
]
BOOK: dict[str, Any] = {
    "type": "object",
    "properties": {
        "user_id": {"type": "string"},
        "flight_type": {"type": "string", "enum": ["one_way", "round_trip"]},
        "cabin": {"type": "string", "enum": ["basic_economy", "economy", "business"]},
        "total_baggages": {"type": "integer"},
        "nonfree_baggages": {"type": "integer"},
        "insurance": {"type": "string", "enum": ["yes", "no"]},
    },
    "required": ["user_id", "flight_type", "cabin", "insurance"],
}
OPENAI_TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in READS
] + [{"type": "function", "function": {"name": "book_reservation", "parameters": BOOK}}]


def traces() -> list:  # type: ignore[type-arg]
    records = json.loads(SAMPLE.read_text(encoding="utf-8"))
    return [trace for record in records for trace in convert("openai", record)]


def test_the_three_shapes_of_a_tools_file_read_alike(tmp_path: Path) -> None:
    mcp = [
        {"name": t["function"]["name"], "inputSchema": t["function"]["parameters"]}
        for t in OPENAI_TOOLS
    ]
    shapes = {
        "openai.json": OPENAI_TOOLS,
        "body.json": {"tools": OPENAI_TOOLS},
        "mcp.json": {"jsonrpc": "2.0", "id": 1, "result": {"tools": mcp}},
    }
    read = []
    for name, data in shapes.items():
        (tmp_path / name).write_text(json.dumps(data))
        read.append(read_tool_definitions(tmp_path / name))
    assert read[0] == read[1] == read[2]
    assert read[0][-1] == {"name": "book_reservation", "parameters": BOOK}


def test_given_tools_let_known_tools_and_valid_arguments_decide() -> None:
    wrong = next(t for t in traces() if t.id.endswith("task-0:trial-0"))
    assert known_tools(wrong).passed is None  # tau-bench keeps no tool definitions
    tools = tool_definitions_of(OPENAI_TOOLS)
    given = with_tools(wrong, tools)
    assert known_tools(given).reason == "all 8 tool calls use one of the 9 declared tools"
    assert valid_arguments(given).passed is True
    partial = with_tools(wrong, tools[-1:])
    assert known_tools(partial).reason.startswith(
        "undeclared tool calculate, get_user_details, search_direct_flight, "
        "search_onestop_flight, think called at steps"
    )
    bad = json.loads(json.dumps(OPENAI_TOOLS))
    bad[-1]["function"]["parameters"]["properties"]["total_baggages"]["type"] = "string"
    assert valid_arguments(with_tools(wrong, tool_definitions_of(bad))).reason == (
        "step 18 book_reservation: total_baggages: expected string, got a number; "
        "step 26 book_reservation: total_baggages: expected string, got a number"
    )
    # A trace that declares its own tools keeps them.
    assert with_tools(given, tools[:1]) is given


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"name": "x"},
            "expected a list of tools (OpenAI's tools, tau-bench's tools_info) or an object with 'tools'",
        ),
        ("tools", "the file: expected a list of tools, got a string"),
        ([], "the file: the list of tools is empty"),
        (
            [{"type": "function", "function": {"parameters": {}}}],
            "[0].function.name: expected the tool's name, got None",
        ),
        (
            [{"name": "a", "parameters": {"type": "strin"}}],
            "[0].parameters.type: 'strin' is not a JSON Schema type (not a valid JSON Schema)",
        ),
        (
            [
                {
                    "name": "a",
                    "inputSchema": {"type": "object", "properties": {"q": {"type": "text"}}},
                }
            ],
            "[0].inputSchema.properties.q.type: 'text' is not a JSON Schema type",
        ),
        (
            # A type that is an object or a list crashed the check (unhashable), found by
            # hypothesis once tools came from the logs themselves.
            [{"name": "a", "parameters": {"type": {"kind": "object"}}}],
            "[0].parameters.type: {'kind': 'object'} is not a JSON Schema type",
        ),
        (
            [{"name": "a", "parameters": {"type": ["string", ["null"]]}}],
            "[0].parameters.type: ['null'] is not a JSON Schema type",
        ),
        (
            [{"name": "a", "parameters": {"required": "q"}}],
            "[0].parameters.required: expected a list of property names, got a string",
        ),
        ([{"name": "a"}, {"name": "a"}], "the file: tool 'a' is defined twice"),
        ({"result": {"tools": [3]}}, "result.tools[0]: expected a tool object, got a number"),
    ],
)
def test_a_file_that_is_not_a_tool_list_is_refused_naming_the_field(
    tmp_path: Path, data: object, message: str
) -> None:
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ToolsFileError) as caught:
        read_tool_definitions(path)
    assert str(caught.value).startswith(f"{path}: ")
    assert message in str(caught.value)


def test_kp_eval_tools(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(OPENAI_TOOLS))
    code = main(
        ["eval", str(SAMPLE), "--from", "openai", "--rubric", "agent", "--tools", str(tools)]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    # The first conversation calls no tool: nothing to decide there.
    assert [line["details"]["known_tools"] for line in lines] == [None, True, True, True]
    assert [line["details"]["valid_arguments"] for line in lines] == [None, True, True, True]
    (tmp_path / "broken.json").write_text('[{"name": 3}]')
    code = main(
        [
            "eval",
            str(SAMPLE),
            "--from",
            "openai",
            "--rubric",
            "agent",
            "--tools",
            str(tmp_path / "broken.json"),
        ]
    )
    _, err = capsys.readouterr()
    assert code == 2
    assert (
        f"Invalid value for --tools: {tmp_path / 'broken.json'}: [0].name: expected the tool's name, got 3"
        in err
    )


def test_a_file_nested_past_what_python_reads_is_refused(tmp_path: Path) -> None:
    # It was kp's internal error (RecursionError out of json.loads).
    path = tmp_path / "tools.json"
    path.write_text('[{"name": "a", "parameters": ' + '{"items": ' * 5000 + "{}" + "}" * 5001 + "]")
    with pytest.raises(ToolsFileError) as caught:
        read_tool_definitions(path)
    assert str(caught.value) == f"{path}: not JSON: nested deeper than Python's parser reads"
