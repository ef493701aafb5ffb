"""The objective rules, the failure markers and the messages of issue 23, one by one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from knowledgepulse.cli import main
from knowledgepulse.importers import ConversionError, convert, from_langfuse, from_openai
from knowledgepulse.importers._builder import TraceBuilder
from knowledgepulse.importers._failures import failed_exit_code, failure_marker
from knowledgepulse.importers._objective import preamble_kind, task_from_template
from knowledgepulse.importers._options import ImportOptions

from ._util import DATA


def _errors(trace: Any) -> list[tuple[str, bool | None]]:
    """Each step's type and its ``is_error`` flag."""
    return [(s["type"], s.get("is_error")) for s in trace.to_dict()["steps"]]


def _kp_import(trace: Any) -> dict[str, Any]:
    result: dict[str, Any] = trace.to_dict()["metadata"]["kp_import"]
    return result


# -- the objective ----------------------------------------------------------------------------


def test_terminus_2_template_gives_its_task() -> None:
    record = json.loads((DATA / "atif" / "terminus2_invalid_json.trajectory.json").read_text())
    template = record["steps"][0]["message"]
    assert task_from_template(template) == (
        'Create a file called hello.txt with "Hello, world!" as the content.',
        "terminus-2",
    )
    (trace,) = convert("atif", record)
    assert trace.task.objective == (
        'Create a file called hello.txt with "Hello, world!" as the content.'
    )
    kp_import = _kp_import(trace)
    assert kp_import["objective_from"] == "template:terminus-2"
    assert kp_import["objective_context"] == [template]  # kept, not lost


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("Be helpful!", "instruction"),
        ("You are a helpful assistant.", "instruction"),
        ("Act as a travel agent", "instruction"),
        ("# AGENTS.md instructions for /repo\n\n<INSTRUCTIONS>x</INSTRUCTIONS>", "codex"),
        ("<environment_context>\n  <cwd>/repo</cwd>\n</environment_context>", "codex"),
        ("Be concise and accurate.", "instruction"),
        ("You are an assistant for a bakery; list today's specials.", None),
        ("Be helpful: which flights leave Paris tomorrow?", None),
        ("You are an expert; what is 2 + 2?", None),
        ("Fix the failing test in utils.py.", None),
        ("Be helpful! " + "x" * 300, None),
    ],
)
def test_preamble_kind(text: str, kind: str | None) -> None:
    assert preamble_kind(text) == kind


def test_a_preamble_is_skipped_for_the_next_user_message_and_kept() -> None:
    (trace,) = from_openai(
        [
            {"role": "user", "content": "Be helpful!"},
            {"role": "user", "content": "Cancel my 9am meeting."},
            {"role": "assistant", "content": "Done."},
            {"role": "user", "content": "Thanks."},
        ]
    )
    assert trace.task.objective == "Cancel my 9am meeting."
    kp_import = _kp_import(trace)
    assert kp_import["objective_from"] == "user_message"
    assert kp_import["objective_context"] == ["Be helpful!"]
    assert [(s.type, s.content) for s in trace.steps] == [
        ("thought", "Done."),
        ("observation", "Thanks."),
    ]


def test_a_preamble_that_is_the_only_user_message_is_still_the_objective() -> None:
    (trace,) = from_openai(
        [{"role": "user", "content": "Be helpful!"}, {"role": "assistant", "content": "Sure."}]
    )
    assert trace.task.objective == "Be helpful!"
    kp_import = _kp_import(trace)
    assert kp_import["objective_from"] == "user_message"
    assert "objective_context" not in kp_import
    assert "objective" not in kp_import["defaulted"]


def test_without_a_user_message_the_objective_is_defaulted_in_order() -> None:
    def build(**facts: Any) -> dict[str, Any]:
        builder = TraceBuilder("test")
        builder.tool_call("search", {"q": "x"})
        builder.tool_call("fetch", {})
        for key, value in facts.items():
            if key == "fallback":
                builder.default_objective(*value)
            else:
                setattr(builder, key, value)
        data: dict[str, Any] = builder.build({"k": 1}, ImportOptions()).to_dict()
        return data

    data = build()
    assert data["task"]["objective"] == "tools: search, fetch"
    assert data["metadata"]["kp_import"]["objective_from"] == "tool_names"
    assert data["metadata"]["kp_import"]["defaulted"][0] == "objective"
    data = build(agent_id="planner")
    assert (data["task"]["objective"], data["metadata"]["kp_import"]["objective_from"]) == (
        "planner",
        "agent_name",
    )
    data = build(agent_id="planner", fallback=("Weekly report", "trace_name"))
    assert (data["task"]["objective"], data["metadata"]["kp_import"]["objective_from"]) == (
        "Weekly report",
        "trace_name",
    )
    # The caller's objective is no default.
    builder = TraceBuilder("test")
    builder.thought("hi")
    options = ImportOptions(objective="Say hi")
    kp_import = builder.build({}, options).to_dict()["metadata"]["kp_import"]
    assert kp_import["objective_from"] == "option"
    assert "objective" not in kp_import["defaulted"]


def test_a_trace_without_steps_is_still_refused() -> None:
    with pytest.raises(ConversionError, match="no agent steps"):
        from_openai([{"role": "user", "content": "hi"}])


def test_otel_without_content_is_built_from_its_tool_spans() -> None:
    path = DATA / "otel" / "python_console_no_content.jsonl"
    from knowledgepulse.importers import read_traces_from_paths

    [unit] = list(read_traces_from_paths([str(path)], "auto"))
    assert unit.problems == []
    assert unit.counted == 1  # seven spans, one run
    [trace] = unit.traces
    assert trace.task.objective == "trip_planner"
    kp_import = _kp_import(trace)
    assert kp_import["objective_from"] == "agent_name"
    assert "objective" in kp_import["defaulted"]
    assert [s.tool.name if s.tool else None for s in trace.steps] == [
        "search_flights",
        "search_flights",
        "book_hotel",
        "book_hotel",
        "book_hotel",
        "book_hotel",
    ]
    assert _errors(trace) == [
        ("tool_call", None),
        ("observation", None),
        ("tool_call", None),
        ("observation", True),
        ("error_recovery", None),
        ("observation", None),
    ]
    assert [s.latency_ms for s in trace.steps if s.type != "observation"] == pytest.approx(
        [800.0, 500.0, 1200.0], abs=0.01
    )
    assert trace.steps[3].content == "TimeoutError: hotel service did not answer in 0.5 s"


def test_sentry_tool_input_and_output_attributes_are_read() -> None:
    # Sentry's SDKs (a JS span, attributes as an object) name them gen_ai.tool.input/output.
    span = {
        "name": "execute_tool get_weather",
        "spanContext": {
            "traceId": "5b8efff798038103d269b633813fc60c",
            "spanId": "eee19b7ec3c1b174",
        },
        "startTime": [1730000000, 0],
        "endTime": [1730000000, 250000000],
        "attributes": {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "get_weather",
            "gen_ai.tool.input": '{"location": "Paris"}',
            "gen_ai.tool.output": '{"temp_c": 21}',
        },
        "status": {"code": 0},
    }
    (trace,) = convert("otel", [span])
    steps = trace.to_dict()["steps"]
    assert [(s["type"], s.get("input"), s.get("content")) for s in steps] == [
        ("tool_call", {"location": "Paris"}, None),
        ("observation", None, '{"temp_c": 21}'),
    ]
    assert steps[0]["latency_ms"] == pytest.approx(250.0)
    assert trace.task.objective == "execute_tool get_weather"  # defaulted: no message, no agent


def test_js_sdk_span_dump_is_one_run() -> None:
    from knowledgepulse.importers import read_traces_from_paths

    path = DATA / "otel" / "js_readable_spans_ai_sdk.json"
    [unit] = list(read_traces_from_paths([str(path)], "auto"))
    assert (len(unit.records), unit.counted, unit.problems) == (4, 1, [])
    [trace] = unit.traces
    assert trace.task.objective == "Do I need an umbrella in Amsterdam tomorrow?"
    assert [s.type for s in trace.steps] == ["tool_call", "observation", "thought"]
    assert trace.steps[0].latency_ms == pytest.approx(450.0)


# -- failures ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "marker"),
    [
        ("Previous response had parsing errors:\nERROR: No valid JSON found", "parse_error"),
        ("Previous response had warnings:\nWARNINGS: - Extra text", None),
        ("<returncode>1</returncode>\n<output>ls: cannot access</output>", "returncode"),
        ("<returncode>0</returncode>\n<output>ok</output>", None),
        ("Exit code: 2\nWall time: 0.1 seconds\nOutput:\n", "exit_code"),
        ('{"output": "1 failed", "metadata": {"exit_code": 1}}', "exit_code"),
        ('{"output": "1 passed", "metadata": {"exit_code": 0}}', None),
        ("New Terminal Output:\n\n$ ls", None),
        (None, None),
    ],
)
def test_failure_marker(text: str | None, marker: str | None) -> None:
    assert failure_marker(text) == marker


@pytest.mark.parametrize(
    ("value", "failed"),
    [(1, True), (-9, True), ("2", True), (0, False), ("0", False), (None, False), (True, False)],
)
def test_failed_exit_code(value: Any, failed: bool) -> None:
    assert failed_exit_code(value) is failed


def test_terminus_2_parse_error_is_a_failure_and_the_next_step_a_recovery() -> None:
    record = json.loads((DATA / "atif" / "terminus2_invalid_json.trajectory.json").read_text())
    (trace,) = convert("atif", record)
    assert _errors(trace)[:5] == [
        ("thought", None),
        ("thought", None),
        ("observation", True),
        ("error_recovery", None),
        ("thought", None),
    ]


def test_terminus_2_parse_error_as_a_user_turn_fails() -> None:
    # Terminus-2's chat history sends its parser's complaint as the next user message.
    (trace,) = from_openai(
        [
            {"role": "user", "content": "Create hello.txt."},
            {"role": "assistant", "content": "I will create it."},
            {
                "role": "user",
                "content": "Previous response had parsing errors:\nERROR: No valid JSON found",
            },
            {"role": "assistant", "content": '{"analysis": "a", "plan": "p", "commands": []}'},
            {"role": "user", "content": "Previous response had warnings:\nWARNINGS: - Extra"},
            {"role": "assistant", "content": "Done."},
        ]
    )
    assert _errors(trace) == [
        ("thought", None),
        ("observation", True),
        ("error_recovery", None),
        ("observation", None),
        ("thought", None),
    ]


def test_tau2_error_flag_on_a_tool_message_fails_it() -> None:
    (trace,) = from_openai(
        [
            {"role": "user", "content": "Book seat 12A."},
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "c1", "function": {"name": "book", "arguments": '{"seat": "12A"}'}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "Seat taken", "error": True},
            {"role": "assistant", "content": "That seat is taken; trying 12B."},
        ]
    )
    assert _errors(trace) == [
        ("tool_call", None),
        ("observation", True),
        ("error_recovery", None),
    ]


def test_codex_exit_code_fails_the_shell_result() -> None:
    items = json.loads((DATA / "openai-responses" / "codex_style_items.json").read_text())
    (trace,) = convert("openai-responses", items)
    assert trace.task.objective == "The slugify test fails on words with spaces. Fix it."
    assert len(_kp_import(trace)["objective_context"]) == 2
    assert _errors(trace)[1:4] == [
        ("tool_call", None),
        ("observation", True),
        ("error_recovery", None),
    ]


# -- Langfuse as people export it ------------------------------------------------------------


def test_langfuse_ui_download_reads_trace_and_observations() -> None:
    # A real UI download (langfuse/langfuse's framework traces): the trace's input and output
    # are the agent span's JSON text, stored once more as a JSON string.
    record = json.loads((DATA / "langfuse" / "microsoft-agent-2025-10-14.json").read_text())
    (trace,) = from_langfuse(record)
    assert trace.id == "kp:trace:langfuse:e3a407423619277a2dcef3c13dc89982"
    assert trace.task.objective == "What's the weather like in Portland?"
    assert _kp_import(trace)["objective_from"] == "trace_input"
    assert trace.outcome.result_summary == (
        "The weather in Portland is currently stormy with a high temperature of 19°C."
    )
    assert [(s.type, s.tool.name if s.tool else None, s.content) for s in trace.steps] == [
        ("tool_call", "get_weather", None),
        ("observation", "get_weather", "The weather in Portland is stormy with a high of 19°C."),
        (
            "thought",
            None,
            "The weather in Portland is currently stormy with a high temperature of 19°C.",
        ),
    ]
    assert trace.steps[0].input == {"location": "Portland"}


def test_langfuse_text_encoded_trace_input_is_decoded() -> None:
    plain: dict[str, Any] = {
        "trace": {"id": "t", "input": json.dumps(json.dumps("Plan a trip")), "output": None}
    }
    record: dict[str, Any] = {
        **plain,
        "observations": [{"id": "o", "type": "TOOL", "name": "search", "input": {}}],
    }
    (trace,) = from_langfuse(record)
    assert trace.task.objective == "Plan a trip"
    # Text that only looks like JSON stays as it is.
    record["trace"]["input"] = "[draft] plan a trip"
    (trace,) = from_langfuse(record)
    assert trace.task.objective == "[draft] plan a trip"


def test_langfuse_responses_objects_are_read_not_dumped() -> None:
    record = json.loads((DATA / "langfuse" / "openai-agents-2025-09-30.json").read_text())
    (trace,) = from_langfuse(record)
    answer = (
        "The weather in Tokyo is currently sunny. If you need more details like temperature or "
        "forecast for the upcoming days, just let me know!"
    )
    assert trace.task.objective == "What's the weather in Tokyo?"
    assert [(s.type, s.tool.name if s.tool else None, s.content) for s in trace.steps] == [
        ("tool_call", "get_weather", None),
        ("observation", "get_weather", "The weather in Tokyo is sunny."),
        ("thought", None, answer),
    ]
    assert trace.steps[0].input == {"city": "Tokyo"}
    # The same response objects held as JSON text read the same.
    for observation in record["observations"]:
        if observation["type"] == "GENERATION":
            observation["output"] = json.dumps(observation["output"])
    (again,) = from_langfuse(record)
    assert again.to_dict()["steps"] == trace.to_dict()["steps"]


def test_langfuse_choice_event_output_is_the_assistant_message() -> None:
    # Pydantic AI 0.2 logs a generation's output as a GenAI `gen_ai.choice` event:
    # {"index": 0, "message": {"role": "assistant", ...}, "event.name": "gen_ai.choice"}.
    record = json.loads((DATA / "langfuse" / "pydantic-ai-trace-2025-06-06.json").read_text())
    (trace,) = from_langfuse(record)
    assert trace.task.objective == "What is Langfuse?"
    assert _kp_import(trace)["objective_from"] == "trace_input"
    assert [s.type for s in trace.steps] == ["thought"]
    assert (trace.steps[0].content or "").startswith(
        "Langfuse is a tool designed for observability"
    )
    assert trace.steps[0].content == trace.outcome.result_summary


def test_langfuse_decorator_arguments_are_not_the_task() -> None:
    # A real Pydantic AI run under Langfuse's @observe: the trace input is the decorated
    # function's arguments, {"args": ["programming"], "kwargs": {}}, not a task; the tools ran
    # as TOOL observations named "running tool: <tool>" with the call id in their attributes.
    record = json.loads((DATA / "langfuse" / "pydantic-ai-tools-2025-12-04.json").read_text())
    (trace,) = from_langfuse(record)
    assert trace.task.objective == (
        "Select and call THREE of the available tools to get joke suggestions about 'programming'."
    )
    assert _kp_import(trace)["objective_from"] == "user_message"
    tools = ["get_pun_suggestion", "get_dad_joke_suggestion", "get_one_liner_suggestion"]
    assert [(s.type, s.tool.name if s.tool else None) for s in trace.steps] == [
        *[("tool_call", name) for name in tools],
        *[("observation", name) for name in tools],
        ("thought", None),
        ("observation", None),
        ("thought", None),
        ("observation", None),
        ("tool_call", "final_result"),
    ]
    # The program's later prompts (the joke agent's second one, the evaluator's) are user
    # turns, kept as user observations.
    steps_data = trace.to_dict()["steps"]
    assert [s["content"] for s in steps_data if s.get("source") == "user"] == [
        "Now write a funny joke about 'programming' based on the suggestions you received. "
        "Just output the joke, nothing else.",
        "Rate this joke:\n\nWhy do programmers hate nature?  \nIt has too many bugs!",
    ]
    assert trace.steps[3].content == (
        "Pun idea: Play on words related to 'programming' - think about homophones or double "
        "meanings"
    )
    assert trace.outcome.result_summary == (
        "Why do programmers hate nature?  \nIt has too many bugs!"
    )
    # Without any user message the arguments are the objective, marked defaulted.
    for observation in record["observations"]:
        observation["input"] = None
    (bare,) = from_langfuse(record)
    assert bare.task.objective == '{"args": ["programming"], "kwargs": {}}'
    assert _kp_import(bare)["objective_from"] == "trace_input"
    assert "objective" in _kp_import(bare)["defaulted"]


def test_langfuse_gemini_contents_of_google_adk() -> None:
    # A real Google ADK run via OpenInference: generations hold Gemini requests
    # ({model, config, contents}) and responses ({content: {parts, role: model}}), the trace
    # input is the runner's arguments with the user's `new_message`; the TOOL observation's
    # output is empty and its call id is not the one in the model's call.
    record = json.loads((DATA / "langfuse" / "google-adk-2025-08-28.json").read_text())
    (trace,) = from_langfuse(record)
    assert trace.task.objective == "hi"
    assert _kp_import(trace)["objective_from"] == "trace_input"
    assert [(s.type, s.tool.name if s.tool else None, s.content) for s in trace.steps] == [
        ("tool_call", "say_hello", None),
        ("observation", "say_hello", '{"greeting": "Hello Langfuse 👋"}'),
        ("thought", None, "Hello Langfuse 👋!\n"),
    ]
    assert trace.outcome.result_summary == "Hello Langfuse 👋!\n"


def test_langfuse_langchain_tool_definitions_and_list_results() -> None:
    record = json.loads((DATA / "langfuse" / "langgraph-2025-08-22.json").read_text())
    (trace,) = from_langfuse(record)
    assert trace.task.objective == "Search the web for 'example' and summarize."
    assert _kp_import(trace)["objective_from"] == "trace_input"
    assert _kp_import(trace)["objective_context"] == ["Be helpful!"]
    assert [s.type for s in trace.steps] == ["tool_call", "observation", "thought"]
    assert json.loads(trace.steps[1].content or "") == [
        {"url": "https://example.com", "title": "Example Result", "q": "example"}
    ]
    assert (trace.outcome.result_summary or "").startswith('The search for "example" primarily')


def test_a_list_valued_tool_message_is_not_empty() -> None:
    from knowledgepulse.importers._messages import message_from_chat

    message = message_from_chat(
        {"role": "tool", "tool_call_id": "c", "content": [{"page_content": "A"}]}
    )
    assert message is not None
    assert message.parts[0].text == '[{"page_content": "A"}]'


# -- messages a user can act on ---------------------------------------------------------------


def kp(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_tau_bench_crash_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    path = DATA / "openai" / "tau_bench_with_crash.json"
    code, _out, err = kp(capsys, "import", str(path), "--from", "openai")
    assert code == 1
    assert (
        "traj: empty: the run crashed before its first step: litellm.RateLimitError: "
        "RateLimitError: OpenAIException - Rate limit reached for gpt-4o" in err
    )
    assert "objective=" not in err
    assert "records in: 2 = processed 1 + rejected 1" in err


def test_from_atif_on_another_format_says_it_is_not_atif(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}))
    code, _out, err = kp(capsys, "import", str(path), "--from", "atif")
    assert code == 1
    assert (
        "chat.json:1: not an ATIF trajectory (expected an object with 'schema_version' "
        "\"ATIF-v1.x\", 'agent' and 'steps'); it looks like openai: use --from openai"
    ) in err


def test_from_openai_responses_answers_with_its_own_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}))
    code, _out, err = kp(capsys, "import", str(path), "--from", "openai-responses")
    assert code == 1
    assert "chat.json:1: not OpenAI Responses API output" in err
    assert "it looks like openai: use --from openai" in err


def test_a_directory_scan_says_which_extensions_it_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "trajectories").mkdir()
    for name in ("a.log", "b.log", "notes.txt", ".hidden.log"):
        (tmp_path / "trajectories" / name).write_text("{}")
    code, _out, err = kp(capsys, "import", str(tmp_path), "--from", "auto")
    assert code == 0
    assert (
        "skipped 3 files in the directories given, not read as records: .log (2), .txt (1)"
    ) in err
    assert "records in: 0" in err


# -- one run is one record --------------------------------------------------------------------


def test_a_runs_elements_count_once_and_a_broken_one_is_still_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "conversation.json"
    messages = [
        {"role": "user", "content": "Add 2 and 3."},
        {"role": "assistant", "content": "5"},
        {"role": "wizard", "content": "?"},
    ]
    path.write_text(json.dumps(messages, indent=2))
    rejects = tmp_path / "rejects.jsonl"
    code, _out, err = kp(capsys, "import", str(path), "--from", "openai", "--rejects", str(rejects))
    assert code == 1
    assert "[2].role: expected one of 'system', 'developer', 'user'" in err
    assert "records in: 1 = processed 0 + rejected 1" in err
    # --rejects still holds each element, with its place.
    assert [json.loads(line)["index"] for line in rejects.read_text().splitlines()] == [0, 1, 2]
    path.write_text(json.dumps(messages[:2], indent=2))
    code, _out, err = kp(capsys, "import", str(path), "--from", "openai")
    assert code == 0
    assert "records in: 1 = processed 1 + rejected 0" in err
