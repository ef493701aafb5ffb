"""Facts of real trace files that ``kp import`` lost (issue 36), each on the real file or an
excerpt of it under ``tests/data/importers/<format>/`` (origin and licence in its
``SOURCE.md``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from knowledgepulse import ReasoningTrace
from knowledgepulse.cli import main
from knowledgepulse.importers import read_traces_from_paths

from ._util import DATA

OLD_SWE_AGENT = [
    DATA / "swe_agent" / "swe-agent__test-repo-i1.traj",
    DATA / "swe_agent" / "networking_1.traj",
    DATA / "swe_agent" / "humanevalfix-python-0.traj",
]


def _traces(path: Path, fmt: str = "auto") -> list[ReasoningTrace]:
    return [t for unit in read_traces_from_paths([str(path)], fmt) for t in unit.traces]


# -- identity ----------------------------------------------------------------------------------


def test_old_swe_agent_trajectories_keep_distinct_ids() -> None:
    """SWE-agent 0.x writes ``environment: "swe_main"`` (the Docker image) in every .traj: it
    names no run, so three runs must not share the id it gave."""
    ids = [t.id for path in OLD_SWE_AGENT for t in _traces(path)]
    assert len(ids) == 3
    assert len(set(ids)) == 3
    assert "kp:trace:swe-agent:swe_main" not in ids
    for path in OLD_SWE_AGENT:
        (trace,) = _traces(path)
        assert trace.to_dict()["metadata"]["kp_import"]["environment"] == "swe_main"


# -- wrong format, silent loss ------------------------------------------------------------------


@pytest.mark.parametrize("name", ["anthropic_messages.json", "anthropic_payloads.json"])
def test_an_anthropic_messages_file_named_openai_is_refused_saying_use_anthropic(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--from openai`` read only the text parts of Anthropic messages: the tool_use and
    tool_result blocks (and the recovery after a failed result) were dropped, exit 0."""
    out = tmp_path / "o.jsonl"
    code = main(["import", str(DATA / name), "--from", "openai", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 1
    assert out.read_text() == ""
    assert "is an Anthropic content block" in err
    assert "it looks like anthropic: use --from anthropic" in err
    assert err.count("use --from") == 1


# -- non-run traces in a span file ---------------------------------------------------------------

VERCEL_ALL_SPANS = DATA / "otel" / "all-spans.json"
EMBED_TRACES = ("045d21a7f69972edf509fe0ff911f3f5", "91621bbaaf1920e94ae594e91b3a99fd")


def test_embedding_traces_in_a_span_file_are_counted_and_named_not_rejected(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The Vercel AI SDK dump holds 8 runs and 2 ``ai.embed`` traces: a trace with no model,
    agent or tool span is not a run; it is named in the summary, and the import exits 0."""
    out = tmp_path / "o.jsonl"
    code = main(["import", str(VERCEL_ALL_SPANS), "--from", "auto", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert len(out.read_text().splitlines()) == 8
    assert "records in: 10 = processed 10 + rejected 0; traces written: 8" in err
    for otel_id in EMBED_TRACES:
        assert f"trace {otel_id}: not a run" in err
    assert "ai.embed" in err
    assert "no agent steps" not in err


def test_the_units_of_non_run_traces_name_them() -> None:
    units = list(read_traces_from_paths([str(VERCEL_ALL_SPANS)], "otel"))
    assert [u.problems for u in units] == [[]] * 10
    named = [note for u in units for note in u.not_runs]
    assert named == [
        "trace 045d21a7f69972edf509fe0ff911f3f5: not a run (spans: ai.embed.doEmbed; "
        "no model, agent or tool span)",
        "trace 91621bbaaf1920e94ae594e91b3a99fd: not a run (spans: ai.embed; "
        "no model, agent or tool span)",
    ]
    assert sum(len(u.traces) for u in units) == 8


# -- failures softened ---------------------------------------------------------------------------

OPENHANDS_OUTPUT = DATA / "openhands" / "multiswe_output_excerpt.jsonl"
INSPECT_CANCELLED = DATA / "inspect" / "2025-05-12T20-28-13-04-00_popularity.json"


def test_openhands_task_completed_partial_is_not_a_success() -> None:
    (trace,) = _traces(OPENHANDS_OUTPUT)
    data = trace.to_dict()
    assert data["metadata"]["success"] is False
    kp_import = data["metadata"]["kp_import"]
    assert kp_import["task_completed"] == "partial"
    assert "success" not in kp_import["defaulted"]


def test_a_sample_of_a_cancelled_inspect_log_says_the_log_was_cancelled() -> None:
    traces = _traces(INSPECT_CANCELLED)
    assert len(traces) == 3
    for trace in traces:
        assert trace.to_dict()["metadata"]["kp_import"]["log_status"] == "cancelled"
    # The samples that finished were scored: their own scores still decide.
    assert [t.metadata.success for t in traces] == [True, True, False]


def test_a_cancelled_inspect_log_without_samples_says_it_was_cancelled(tmp_path: Path) -> None:
    log = tmp_path / "no-samples.json"
    log.write_bytes(INSPECT_CANCELLED.read_bytes().replace(b'"samples": [', b'"unused": ['))
    (unit,) = read_traces_from_paths([str(log)], "inspect")
    assert unit.problems == [
        "samples: the log holds no samples (the eval was cancelled: status 'cancelled')"
    ]


# -- metadata ------------------------------------------------------------------------------------


def _kp_import(path: Path) -> dict[str, Any]:
    (trace,) = _traces(path)
    kp_import: dict[str, Any] = trace.to_dict()["metadata"]["kp_import"]
    return kp_import


def test_openhands_evaluation_output_keeps_its_model_and_token_usage() -> None:
    kp_import = _kp_import(OPENHANDS_OUTPUT)
    assert kp_import["model"] == "openai/openrouter-llama-4-maverick"
    assert kp_import["token_usage"] == {
        "prompt_tokens": 565158,
        "completion_tokens": 2558,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
    }
    assert kp_import["cost"] == 0.0


def test_openhands_trajectory_keeps_the_model_of_its_responses() -> None:
    kp_import = _kp_import(DATA / "openhands" / "wrong_initial_state.json")
    assert kp_import["model"] == "claude-3-5-sonnet-20241022"


def test_mini_swe_agent_keeps_its_model() -> None:
    kp_import = _kp_import(DATA / "mini_swe_agent" / "astropy__astropy-13033.traj.json")
    assert kp_import["model"] == "google/gemini-3-pro-preview"


def test_tau2_keeps_the_agents_model() -> None:
    kp_import = _kp_import(DATA / "tau2" / "resultado_filtro_gastelo_1.json")
    assert kp_import["model"] == "gemini/gemma-3-27b-it"
    assert kp_import["user_model"] == "gemini/gemma-3-27b-it"


def test_inspect_multiple_choice_options_are_kept_so_the_answer_can_be_read() -> None:
    (trace,) = _traces(DATA / "inspect" / "mmlu-summary-choices.eval")
    data = trace.to_dict()
    assert data["metadata"]["ground_truth"]["choices"] == ["6.0 e", "6.8 eV", "12.2 eV", "13.6 eV"]
    assert data["metadata"]["ground_truth"]["target"] == "A"
    objective = data["task"]["objective"]
    assert objective.endswith("\n\nA) 6.0 e\nB) 6.8 eV\nC) 12.2 eV\nD) 13.6 eV")
    assert [s["content"] for s in data["steps"]] == ["ANSWER: C"]
    assert data["metadata"]["success"] is False


# -- tool calls ----------------------------------------------------------------------------------


def _calls(path: Path, fmt: str = "auto") -> list[tuple[str, dict[str, Any]]]:
    return [
        (step["tool"]["name"], step.get("input", {}))
        for trace in _traces(path, fmt)
        for step in trace.to_dict()["steps"]
        if step["type"] in ("tool_call", "error_recovery") and "tool" in step
    ]


def _results(path: Path) -> list[tuple[str | None, str]]:
    return [
        ((step.get("tool") or {}).get("name"), step["content"])
        for trace in _traces(path)
        for step in trace.to_dict()["steps"]
        if step["type"] == "observation" and step.get("source") is None
    ]


def test_koog_calls_written_as_content_and_run_as_tool_spans_are_tool_calls() -> None:
    path = DATA / "langfuse" / "koog-2025-08-26.json"
    assert _calls(path) == [("HelloTool", {"name": "Bob"}), ("ByeTool", {"name": "Bob"})]
    # The two tools ran at once (spans with one start time): each result with its call.
    assert sorted(_results(path)) == [
        ("ByeTool", "Bye my dear Bob!"),
        ("HelloTool", "Hello my darling Bob!"),
    ]


def test_agno_tool_span_is_a_tool_call_with_its_result() -> None:
    path = DATA / "langfuse" / "agno-2025-06-11.json"
    assert _calls(path) == [("duckduckgo_search", {"query": "currently trending on Twitter"})]
    ((tool, text),) = _results(path)
    assert tool == "duckduckgo_search"
    assert text.startswith('[{"title": "Twitter. It\'s what\'s happening / Twitter", "href": ')


def test_beeai_react_steps_written_as_text_are_tool_calls_with_their_output() -> None:
    path = DATA / "langfuse" / "beeai-2025-08-01_excerpt.json"
    assert _calls(path) == [
        ("Wikipedia", {"query": "Tourism in Barcelona"}),
        ("OpenMeteoTool", {"country": "Spain", "location_name": "Barcelona"}),
    ]
    results = _results(path)
    assert [tool for tool, _ in results] == ["Wikipedia", "OpenMeteoTool"]
    assert results[0][1].startswith('[{"description": "Barcelona (  BAR-sə-LOH-nə;')
    assert '"temperature_2m": 29.0' in results[1][1]


def test_harbor_traces_of_openhands_read_its_tool_call_blocks() -> None:
    path = DATA / "harbor_traces" / "openhands_hello_world.traces.json"
    edit = (
        "str_replace_editor",
        {
            "command": "create",
            "path": "/app/hello.txt",
            "file_text": "Hello, world!",
            "security_risk": "LOW",
        },
    )
    finish = ("finish", {"message": "Task complete. Created /app/hello.txt with 'Hello, world!'"})
    # Two episodes, the second holding the first again (export with --episodes last).
    assert _calls(path) == [edit, edit, finish]


def test_atif_reads_calls_written_in_message_text_as_harbor_traces_does() -> None:
    path = DATA / "atif" / "openhands_no_function_calling.trajectory.json"
    assert _calls(path, "atif") == [
        (
            "execute_bash",
            {
                "command": "cat > /app/hello.txt << 'EOF'\nHello, world!\nEOF",
                "security_risk": "LOW",
            },
        ),
        ("finish", {"message": "Task complete. Created /app/hello.txt with 'Hello, world!'"}),
    ]
    ((tool, _),) = _results(path)
    assert tool == "execute_bash"
    terminus = DATA / "atif" / "terminus2_linear_history.trajectory.json"
    assert _calls(terminus, "atif") == [
        ("terminal", {"keystrokes": "mkdir test_dir\n", "duration": 0.1}),
        ("terminal", {"keystrokes": "echo 'test1' > test_dir/file1.txt\n", "duration": 0.1}),
        ("terminal", {"keystrokes": "echo 'test2' > test_dir/file2.txt\n", "duration": 0.1}),
    ]


# -- objectives ----------------------------------------------------------------------------------


def _objective(path: Path, fmt: str = "auto") -> tuple[str, str]:
    trace = _traces(path, fmt)[-1]
    data = trace.to_dict()
    return data["task"]["objective"], data["metadata"]["kp_import"]["objective_from"]


HELLO_TASK = 'Create a file called hello.txt with "Hello, world!" as the content.'


def test_openhands_in_context_example_gives_way_to_the_task_between_its_markers() -> None:
    path = DATA / "atif" / "openhands_no_function_calling.trajectory.json"
    assert _objective(path) == (HELLO_TASK, "template:openhands")
    (trace,) = _traces(path)
    context = trace.to_dict()["metadata"]["kp_import"]["objective_context"]
    assert len(context) == 1 and len(context[0]) == 5981


def test_harbor_traces_of_openhands_skip_the_system_prompt_sent_as_a_user_message() -> None:
    path = DATA / "harbor_traces" / "openhands_hello_world.traces.json"
    objective, origin = _objective(path)
    assert (objective.strip(), origin) == (HELLO_TASK, "user_message")
    for trace in _traces(path):
        data = trace.to_dict()
        context = data["metadata"]["kp_import"]["objective_context"]
        assert context[0].startswith("You are OpenHands agent, a helpful AI assistant")
        assert not any(HELLO_TASK in (s.get("content") or "") for s in data["steps"])


def test_google_genai_request_with_text_contents_gives_its_text_once() -> None:
    path = DATA / "langfuse" / "google-gemini-2025-08-01.json"
    assert _objective(path) == ("What is Langfuse?", "trace_input")
    (trace,) = _traces(path)
    steps = trace.to_dict()["steps"]
    assert [s["type"] for s in steps] == ["thought"]
    assert steps[0]["content"].startswith("**Langfuse** is an **open-source observability")


# -- spurious turns and raw payloads -------------------------------------------------------------


def _steps(path: Path) -> list[dict[str, Any]]:
    (trace,) = _traces(path)
    steps: list[dict[str, Any]] = trace.to_dict()["steps"]
    return steps


def test_agno_run_is_its_one_user_message_one_call_and_the_answer() -> None:
    """Agno logs each model call twice (its own OpenInference span, and OpenAI's inside it),
    its inputs as Python reprs of its messages, its outputs as chat.completion objects."""
    steps = _steps(DATA / "langfuse" / "agno-2025-06-11.json")
    assert [(s["type"], s.get("source")) for s in steps] == [
        ("tool_call", None),
        ("observation", None),
        ("thought", None),
    ]
    assert steps[0]["tool"]["name"] == "duckduckgo_search"
    assert steps[2]["content"].startswith(
        "To find out what's currently trending on Twitter, you can visit the following resources:"
    )


def test_a_langchain_message_chunk_output_is_its_text() -> None:
    path = DATA / "langfuse" / "google-vertex-tools-langchain-2025-09-19.json"
    steps = _steps(path)
    assert steps[-1] == {
        "step_id": len(steps) - 1,
        "type": "thought",
        "content": "Thank you, John Smith. Which of our services are you interested in?",
        "latency_ms": 1874.0,
        "origin": {"span_id": "vertex-gemini-obs-001"},
    }
    (trace,) = _traces(path)
    assert trace.outcome.result_summary == (
        "Thank you, John Smith. Which of our services are you interested in?"
    )


def test_a_python_dict_repr_summary_is_its_text() -> None:
    (trace,) = _traces(DATA / "langfuse" / "beeai-2025-08-01_excerpt.json")
    assert trace.outcome.result_summary.startswith(
        "Barcelona is a vibrant city known for its rich cultural heritage"
    )


# -- shapes --------------------------------------------------------------------------------------

RESOLVER = DATA / "openhands" / "resolver_output.jsonl"


@pytest.mark.parametrize("fmt", ["auto", "openhands"])
def test_openhands_resolver_output_is_a_run_per_line(fmt: str) -> None:
    units = list(read_traces_from_paths([str(RESOLVER)], fmt))
    assert [u.problems for u in units] == [[], []]
    assert sum(u.counted for u in units) == 2
    first, second = (t.to_dict() for u in units for t in u.traces)
    assert first["id"] == "kp:trace:openhands:neubig/pr-viewer#5"
    assert second["id"] == "kp:trace:openhands:neubig/pr-viewer#1"
    assert first["task"]["objective"] == (
        "Add MIT license\n\nWe can license this repo under the MIT license."
    )
    assert first["metadata"]["kp_import"]["objective_from"] == "task_field"
    assert first["metadata"]["success"] is True
    assert "success" not in first["metadata"]["kp_import"]["defaulted"]
    calls = [(s["tool"]["name"], s["input"]) for s in first["steps"] if s["type"] == "tool_call"]
    assert calls[0] == ("run", {"command": "touch LICENSE"})
    assert [name for name, _ in calls] == ["run", "run_ipython", "run"]
    assert [s.get("source") for s in first["steps"]].count("user") == 0
    assert first["outcome"]["result_summary"].startswith(
        "The MIT License has been successfully added to the repository."
    )


def test_a_swe_agent_demonstration_file_is_read_as_swe_agent() -> None:
    path = DATA / "swe_agent" / "function_calling_simple.traj"
    (unit,) = read_traces_from_paths([str(path)], "auto")
    assert (unit.format, unit.problems) == ("swe-agent", [])
    (trace,) = unit.traces
    data = trace.to_dict()
    assert data["task"]["objective"].startswith("SyntaxError: invalid syntax\nI'm running")
    assert data["metadata"]["kp_import"]["objective_from"] == "template:swe-agent"
    assert [s["tool"]["name"] for s in data["steps"] if s["type"] == "tool_call"] == [
        "find_file",
        "open",
        "edit",
        "bash",
        "submit",
    ]
    results = [s for s in data["steps"] if s["type"] == "observation"]
    assert [s["tool"]["name"] for s in results] == ["find_file", "open", "edit", "bash", "submit"]
    assert results[3]["content"].startswith("8.2\n")


def test_auto_detection_refusal_says_what_it_saw_and_the_nearest_formats(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = DATA / "refused" / "anthropic_managed_agents_custom_tools.jsonl"
    code = main(["import", str(path), "--from", "auto", "-o", str(tmp_path / "o.jsonl")])
    err = capsys.readouterr().err
    assert code == 1
    first = err.splitlines()[0]
    assert first.startswith(f"{path}:1: could not detect the format; name it with --from")
    assert (
        "saw an array of 2: a string 'client.beta.sessions.create', an object with keys " in first
    )
    assert "nearest formats:" in first
    # [method, payload] pairs are a test's recording of SDK calls, not a session's events
    # (anthropic-managed-agents reads those): every line is refused, none half read.
    assert err.count("could not detect the format") == 19
    assert "records in: 19 = processed 0 + rejected 19" in err


# -- refusals that say what to do -----------------------------------------------------------------


def test_a_codex_rollout_without_an_agent_turn_is_refused_naming_codex() -> None:
    path = DATA / "refused" / "codex_cli_rollout.jsonl"
    (unit,) = read_traces_from_paths([str(path)], "auto")
    assert unit.format == "codex"
    assert unit.problems == [
        "a Codex rollout (session 019b64e5-57fa-7463-b644-fba7e456f905) with no agent turn: "
        "its session header, 1 user message and 6 turn contexts only (the session ended, or "
        "the file was cut, before the model answered)"
    ]


def test_a_broken_element_of_a_pretty_printed_list_is_located_at_its_own_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = json.loads((DATA / "langsmith_flat.json").read_text(encoding="utf-8"))
    runs[4]["run_type"] = None  # a child of the second run tree, whose root is [3]
    path = tmp_path / "runs.json"
    text = json.dumps(runs, indent=2)
    path.write_text(text, encoding="utf-8")
    starts = [n + 1 for n, line in enumerate(text.splitlines()) if line == "  {"]
    main(["import", str(path), "--from", "langsmith", "-o", str(tmp_path / "o.jsonl")])
    err = capsys.readouterr().err
    assert f"{path}:{starts[4]}: [4].run_type: " in err


def test_a_terminus_reply_the_harness_could_not_parse_ran_nothing() -> None:
    """Terminus-2 runs no command of a reply it answers with "Previous response had parsing
    errors": the reply's commands are not calls, in harbor-traces as in atif."""
    path = DATA / "harbor_traces" / "terminus2_invalid_json.traces.json"
    last = _traces(path)[-1].to_dict()["steps"]
    error = next(n for n, s in enumerate(last) if s["type"] == "observation")
    assert last[error]["content"].startswith("Previous response had parsing errors:")
    assert [s["type"] for s in last[:error]] == ["thought", "thought", "thought"]
    assert last[error - 2]["content"].startswith("I need to create a file called hello.txt")
    atif = DATA / "atif" / "terminus2_invalid_json.trajectory.json"
    steps = _traces(atif, "atif")[0].to_dict()["steps"]
    error = next(n for n, s in enumerate(steps) if s["type"] == "observation")
    assert {s["type"] for s in steps[:error]} == {"thought"}


@pytest.mark.parametrize(
    "name", ["mini_swe_agent/local.traj.json", "mini_swe_agent/astropy__astropy-13033.traj.json"]
)
def test_a_mini_swe_agent_trajectory_named_openai_says_use_mini_swe_agent(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Read as OpenAI chat, its fenced commands would be thoughts: no call, exit 0."""
    out = tmp_path / "o.jsonl"
    code = main(["import", str(DATA / name), "--from", "openai", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 1
    assert out.read_text() == ""
    assert "it looks like mini-swe-agent: use --from mini-swe-agent" in err
    assert err.count("use --from") == 1
