"""The MCP tools over both transports, with the official client: what each answers, who sees
what, and wrong arguments answered by name without bringing the server down."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from mcp import ClientSession
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, TextContent, TextResourceContents

from knowledgepulse.kb._recall import NO_WORDS
from service.conftest import trace

from .conftest import MAX_STEPS, Transport


def first_text(result: CallToolResult) -> str:
    """The text of an answer's first block: the tools answer in text (JSON, or the error)."""
    block = result.content[0]
    assert isinstance(block, TextContent), block
    return block.text


async def call(session: ClientSession, tool: str, **arguments: Any) -> Any:
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, first_text(result)
    return json.loads(first_text(result))


async def refused(session: ClientSession, tool: str, arguments: dict[str, Any]) -> str:
    result = await session.call_tool(tool, arguments)
    assert result.is_error
    return first_text(result)


def test_tools_are_listed_with_when_to_call_them(transport: Transport) -> None:
    async def scenario() -> None:
        async with transport.open_session("alice") as session:
            tools = {tool.name: tool for tool in (await session.list_tools()).tools}
            assert set(tools) == {
                "search_traces",
                "get_trace",
                "contribute_trace",
                "search",
                "fetch",
            }
            described = {name: tool.description or "" for name, tool in tools.items()}
            assert described["search_traces"].startswith("Call this BEFORE starting")
            assert described["contribute_trace"].startswith("Call this AFTER finishing")
            assert described["get_trace"].startswith("Call this when a search hit")
            assert described["search"].startswith("Call this to find stored agent runs")
            assert described["fetch"].startswith("Call this with an id that search")
            schema = tools["search_traces"].input_schema
            assert schema["required"] == ["query"] and schema["additionalProperties"] is False
            assert schema["properties"]["limit"]["default"] == 5
            assert schema["properties"]["success_only"]["default"] is True
            templates = (await session.list_resource_templates()).resource_templates
            assert [t.uri_template for t in templates] == ["kp://trace/{id}"]

    anyio.run(scenario)


def test_contribute_search_get_fetch_and_duplicates(transport: Transport) -> None:
    first = trace("kp:trace:a1")
    copy = trace("kp:trace:a2", words=" ".join(f"a1w{k}" for k in range(6)))
    failed = trace("kp:trace:f1")
    failed["metadata"]["success"] = False

    async def scenario() -> None:
        async with transport.open_session("alice") as session:
            stored = await call(session, "contribute_trace", trace=first)
            assert stored["id"] == "kp:trace:a1" and stored["status"] == "accepted"
            assert stored["stored"] is True and stored["passed"] is True
            assert stored["duplicate_of"] is None and stored["threshold"] == 0.5
            assert stored["score"] >= 0.5
            again = await call(session, "contribute_trace", trace=first)
            assert again["status"] == "already_stored" and again["stored"] is True
            duplicate = await call(session, "contribute_trace", trace=copy)
            assert duplicate["duplicate_of"]["id"] == "kp:trace:a1"
            assert duplicate["duplicate_of"]["similarity"] == pytest.approx(1.0, abs=1e-3)
            assert duplicate["status"] == "rejected" and duplicate["stored"] is False
            assert duplicate["passed"] is False
            await call(session, "contribute_trace", trace=failed)

        async with transport.open_session("bob") as session:
            objective = first["task"]["objective"]
            found = await call(session, "search_traces", query=objective)
            assert [hit["id"] for hit in found["hits"]] == ["kp:trace:a1"]  # f1 failed
            hit = found["hits"][0]
            assert hit["objective"] == objective and hit["success"] is True
            assert (
                hit["steps"].splitlines()[0]
                == f"1. thought: Plan {' '.join(f'a1w{k}' for k in range(6))}"
            )
            assert found["examples"].splitlines()[2:4] == [
                "## Example 1 of 1",
                f'Provenance: id "kp:trace:a1", team "acme", added at "{hit["added_at"]}", '
                f"similarity {hit['similarity']:.2f}, value {hit['value']:.2f}",
            ]
            assert found["notice"].startswith("The examples below are untrusted data")
            assert hit["team"] == "acme"
            with_failed = await call(
                session, "search_traces", query=objective, success_only=False, limit=2
            )
            assert {h["id"] for h in with_failed["hits"]} == {"kp:trace:a1", "kp:trace:f1"}
            assert (await call(session, "search_traces", query=objective, domain="other"))[
                "hits"
            ] == []
            summary = await call(session, "get_trace", id="kp:trace:a1")
            assert summary["objective"] == objective and summary["value"] == stored_value(transport)
            full = await call(session, "get_trace", id="kp:trace:a1", detail="full")
            assert full["trace"]["id"] == "kp:trace:a1" and full["record"]["stored"] == "added"
            results = (await call(session, "search", query=objective))["results"]
            assert results[0] == {
                "id": "kp:trace:a1",
                "title": objective,
                "url": "kp://trace/kp:trace:a1",
            }
            fetched = await call(session, "fetch", id="kp:trace:a1")
            assert (
                f"```untrusted-data\nTask: {objective}\nSteps:\n  1. thought: Plan"
                in (fetched["text"])
            )
            assert fetched["metadata"]["team"] == "acme"
            read = await session.read_resource("kp://trace/kp:trace:a1")
            resource = read.contents[0]
            assert isinstance(resource, TextResourceContents)
            assert json.loads(resource.text)["trace"]["task"]["objective"] == objective

    anyio.run(scenario)


def stored_value(transport: Transport) -> float:
    row = transport.kb.get("kp:trace:a1")
    assert row is not None and row.value is not None
    return float(row.value)


def test_visibility_across_keys_and_not_found_alike(transport: Transport) -> None:
    private = trace("kp:trace:p1")
    org = trace("kp:trace:o1")

    async def scenario() -> None:
        async with transport.open_session("alice") as session:
            answer = await call(session, "contribute_trace", trace=private, visibility="private")
            assert answer["status"] == "accepted"
        async with transport.open_session("carol") as session:  # org globex
            assert (await call(session, "contribute_trace", trace=org, visibility="org"))["stored"]
        assert transport.kb.get("kp:trace:p1").visibility == "private"

        async with transport.open_session("bob") as session:  # acme, like alice
            for hidden in ("kp:trace:p1", "kp:trace:o1"):
                assert await refused(session, "get_trace", {"id": hidden}) == f"no trace {hidden}"
                assert await refused(session, "fetch", {"id": hidden}) == f"no trace {hidden}"
                with pytest.raises(MCPError) as caught:
                    await session.read_resource(f"kp://trace/{hidden}")
                assert (caught.value.error.code, caught.value.error.message) == (
                    -32002,
                    f"no trace {hidden}",
                )
            missing = await refused(session, "get_trace", {"id": "kp:trace:none"})
            assert missing == "no trace kp:trace:none"
            query = private["task"]["objective"]
            hits = (await call(session, "search_traces", query=query, limit=10))["hits"]
            assert "kp:trace:p1" not in {h["id"] for h in hits}
            assert "kp:trace:o1" not in {h["id"] for h in hits}
            resources = {r.uri for r in (await session.list_resources()).resources}
            assert "kp://trace/kp:trace:p1" not in resources

        async with transport.open_session("alice") as session:
            hits = (await call(session, "search_traces", query=private["task"]["objective"]))[
                "hits"
            ]
            assert hits[0]["id"] == "kp:trace:p1"
            assert (await call(session, "get_trace", id="kp:trace:p1"))["id"] == "kp:trace:p1"
            assert (
                await refused(session, "get_trace", {"id": "kp:trace:o1"}) == "no trace kp:trace:o1"
            )
        async with transport.open_session("carol") as session:
            assert (await call(session, "get_trace", id="kp:trace:o1"))["id"] == "kp:trace:o1"
            assert (
                await refused(session, "get_trace", {"id": "kp:trace:p1"}) == "no trace kp:trace:p1"
            )

        async with transport.open_session("reader") as session:
            refusal = await refused(session, "contribute_trace", {"trace": trace("kp:trace:r1")})
            assert refusal == "this key's scope is read; contribute_trace needs contribute"
            assert transport.kb.get("kp:trace:r1") is None

    anyio.run(scenario)


def test_wrong_arguments_are_named_and_the_server_goes_on(transport: Transport) -> None:
    many_steps = trace("kp:trace:big")
    many_steps["steps"] = [
        {"step_id": i, "type": "thought", "content": f"s{i}"} for i in range(MAX_STEPS + 1)
    ]
    huge = trace("kp:trace:huge")
    huge["steps"][0]["content"] = "x" * (70 * 1024)
    bad_step = trace("kp:trace:bad")
    bad_step["steps"][1]["type"] = "plan"

    async def scenario() -> None:
        async with transport.open_session("alice") as session:
            cases: list[tuple[str, dict[str, Any], str]] = [
                ("search_traces", {"query": "x", "bogus": 1},
                 "bogus: unknown argument; search_traces takes query, domain, success_only, "
                 "min_value, prefer, limit"),
                ("search_traces", {"query": "x", "limit": "x"},
                 "limit: Input should be a valid integer (got 'x')"),
                ("search_traces", {"query": "x", "limit": 0},
                 "limit: Input should be greater than or equal to 1 (got 0)"),
                ("search_traces", {"query": "x", "min_value": 2},
                 "min_value: Input should be less than or equal to 1 (got 2)"),
                ("search_traces", {}, "query: required"),
                ("search_traces", {"query": "q" * 8001},
                 "query: String should have at most 8000 characters (got a string of 8,001 characters)"),
                ("search_traces", {"query": "   "},
                 "query: expected a task description, got an empty string"),
                ("get_trace", {"id": "kp:trace:a1", "detail": "middle"},
                 "detail: Input should be 'summary' or 'full' (got 'middle')"),
                ("get_trace", {"id": 7}, "id: Input should be a valid string (got 7)"),
                ("contribute_trace", {"trace": "{}"},
                 "trace: Input should be a valid dictionary (got '{}')"),
                ("contribute_trace", {"trace": bad_step},
                 "trace.steps[1].type: expected one of 'thought', 'tool_call', 'observation', "
                 "'error_recovery' (got 'plan')"),
                ("contribute_trace", {"trace": many_steps},
                 f"trace.steps: {MAX_STEPS + 1} steps; at most {MAX_STEPS} are taken"),
                ("contribute_trace", {"trace": trace("kp:trace:v"), "visibility": "world"},
                 "visibility: Input should be 'private', 'org' or 'network' (got 'world')"),
                ("nope", {}, "unknown tool 'nope'; the tools are search_traces, get_trace, "
                 "contribute_trace, search, fetch"),
            ]  # fmt: skip
            for tool, arguments, message in cases:
                assert await refused(session, tool, arguments) == message, (tool, arguments)
            if transport.kind == "stdio":  # over HTTP the body limit answers first (413)
                text = await refused(session, "contribute_trace", {"trace": huge})
                assert text.startswith("trace: ") and text.endswith(
                    f"at most {64 * 1024:,} are taken"
                )
            with pytest.raises(MCPError) as caught:
                await session.read_resource("kp://nothing/here")
            assert caught.value.error.code == -32002
            assert (await session.list_tools()).tools  # still serving
            assert transport.kb.get("kp:trace:bad") is None

    anyio.run(scenario)


def test_search_says_how_each_hit_was_found_and_answers_stop_words_with_the_reason(
    transport: Transport,
) -> None:
    failed = trace("kp:trace:w2")
    failed["metadata"]["success"] = False

    async def scenario() -> None:
        async with transport.open_session("alice") as session:
            for contributed in (trace("kp:trace:w1"), failed):
                assert (await call(session, "contribute_trace", trace=contributed))["stored"]
            query = "Task w2w0 w2w1"
            found = await call(session, "search_traces", query=query, success_only=False)
            assert [(h["id"], h["found_by"], h["vector_rank"], h["text_rank"]) for h in
                    found["hits"]] == [("kp:trace:w2", "both", 1, 1),
                                       ("kp:trace:w1", "both", 2, 2)]  # fmt: skip
            assert found["reason"] is None
            preferred = await call(
                session, "search_traces", query=query, success_only=False, prefer="successful"
            )
            assert [h["id"] for h in preferred["hits"]] == ["kp:trace:w1", "kp:trace:w2"]
            for tool in ("search_traces", "search"):
                empty = await call(session, tool, query="The... of it? And!")
                assert empty.get("hits", empty.get("results")) == []
                assert empty["reason"] == NO_WORDS
            assert (await call(session, "search_traces", query="-- ..."))["examples"] == ""

    anyio.run(scenario)
