"""The facts issue 36 lists as lost on real trace files, each checked on the real file (or its
excerpt) under ``tests/data/importers/``: every one must survive ``kp import``.

Run as a script to count them against any checkout (``PYTHONPATH=<checkout>/src python
tests/importers/test_issue36_facts.py``): a check that fails or raises counts as lost.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).parents[1] / "data" / "importers"
HELLO = 'Create a file called hello.txt with "Hello, world!" as the content.'


def _traces(name: str, fmt: str = "auto") -> list[dict[str, Any]]:
    from knowledgepulse.importers import read_traces_from_paths

    return [
        t.to_dict() for unit in read_traces_from_paths([str(DATA / name)], fmt) for t in unit.traces
    ]


def _steps(name: str, fmt: str = "auto") -> list[dict[str, Any]]:
    return [step for trace in _traces(name, fmt) for step in trace["steps"]]


def _calls(name: str, fmt: str = "auto") -> list[tuple[str, Any]]:
    return [
        (s["tool"]["name"], s.get("input"))
        for s in _steps(name, fmt)
        if s["type"] in ("tool_call", "error_recovery") and "tool" in s
    ]


def _kp_import(name: str) -> dict[str, Any]:
    kp_import: dict[str, Any] = _traces(name)[0]["metadata"]["kp_import"]
    return kp_import


def _kp(*args: str) -> tuple[int, str]:
    """``kp`` run in-process: its exit code and what it wrote to stderr."""
    from knowledgepulse.cli import main

    err = io.StringIO()
    with tempfile.TemporaryDirectory() as folder, contextlib.redirect_stderr(err):
        code = main([*args, "-o", str(Path(folder) / "out.jsonl")])
    return code, err.getvalue()


KOOG = "langfuse/koog-2025-08-26.json"
AGNO = "langfuse/agno-2025-06-11.json"
BEEAI = "langfuse/beeai-2025-08-01_excerpt.json"
VERTEX = "langfuse/google-vertex-tools-langchain-2025-09-19.json"
GENAI = "langfuse/google-gemini-2025-08-01.json"
HARBOR_OPENHANDS = "harbor_traces/openhands_hello_world.traces.json"
ATIF_OPENHANDS = "atif/openhands_no_function_calling.trajectory.json"
ATIF_TERMINUS = "atif/terminus2_linear_history.trajectory.json"
OPENHANDS_OUTPUT = "openhands/multiswe_output_excerpt.jsonl"
OLD_SWE_AGENT = (
    "swe_agent/swe-agent__test-repo-i1.traj",
    "swe_agent/networking_1.traj",
    "swe_agent/humanevalfix-python-0.traj",
)


def _old_swe_agent_ids() -> bool:
    ids = [t["id"] for name in OLD_SWE_AGENT for t in _traces(name)]
    return len(set(ids)) == 3


def _pretty_list_element_line() -> bool:
    runs = json.loads((DATA / "langsmith_flat.json").read_text(encoding="utf-8"))
    runs[4]["run_type"] = None
    text = json.dumps(runs, indent=2)
    starts = [n + 1 for n, line in enumerate(text.splitlines()) if line == "  {"]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "runs.json"
        path.write_text(text, encoding="utf-8")
        _, err = _kp("import", str(path), "--from", "langsmith")
    return f"{path}:{starts[4]}: [4].run_type" in err


#: issue item → (fact, its check).
FACTS: list[tuple[str, str, Callable[[], bool]]] = [
    ("1", "Koog HelloTool call", lambda: ("HelloTool", {"name": "Bob"}) in _calls(KOOG)),
    ("1", "Koog ByeTool call", lambda: ("ByeTool", {"name": "Bob"}) in _calls(KOOG)),
    (
        "1",
        "Koog: no observation holds call JSON",
        lambda: not any('"function"' in (s.get("content") or "") for s in _steps(KOOG)),
    ),
    ("1", "Agno duckduckgo_search call", lambda: _calls(AGNO)[0][0] == "duckduckgo_search"),
    (
        "1",
        "BeeAI Wikipedia call",
        lambda: ("Wikipedia", {"query": "Tourism in Barcelona"}) in _calls(BEEAI),
    ),
    ("1", "BeeAI OpenMeteoTool call", lambda: "OpenMeteoTool" in dict(_calls(BEEAI))),
    (
        "1",
        "Harbor traces of OpenHands: <tool_call> read",
        lambda: "str_replace_editor" in dict(_calls(HARBOR_OPENHANDS)),
    ),
    (
        "1",
        "ATIF OpenHands <function=execute_bash> read by --from atif",
        lambda: "execute_bash" in dict(_calls(ATIF_OPENHANDS, "atif")),
    ),
    (
        "1",
        "ATIF Terminus-2 linear-history commands read by --from atif",
        lambda: [n for n, _ in _calls(ATIF_TERMINUS, "atif")] == ["terminal"] * 3,
    ),
    (
        "2",
        "ATIF OpenHands objective is the task, not the example",
        lambda: _traces(ATIF_OPENHANDS)[0]["task"]["objective"] == HELLO,
    ),
    (
        "2",
        "Harbor OpenHands objective is the task, not the system prompt",
        lambda: _traces(HARBOR_OPENHANDS)[0]["task"]["objective"].strip() == HELLO,
    ),
    (
        "2",
        "google-genai objective is the text, not the request JSON",
        lambda: _traces(GENAI)[0]["task"]["objective"] == "What is Langfuse?",
    ),
    (
        "2",
        "google-genai request not repeated as a user turn",
        lambda: not any(s.get("source") == "user" for s in _steps(GENAI)),
    ),
    (
        "3",
        "Agno: no spurious user turns",
        lambda: not any(s.get("source") == "user" for s in _steps(AGNO)),
    ),
    (
        "3",
        "Agno: no chat.completion object as a thought",
        lambda: (
            not any((s.get("content") or "").startswith('{"id": "chatcmpl') for s in _steps(AGNO))
        ),
    ),
    (
        "3",
        "LangChain AIMessageChunk not a thought of raw JSON",
        lambda: not any((s.get("content") or "").startswith('{"content"') for s in _steps(VERTEX)),
    ),
    (
        "3",
        "BeeAI summary is text, not a dict repr",
        lambda: not _traces(BEEAI)[0]["outcome"]["result_summary"].startswith("{'role'"),
    ),
    (
        "4",
        "OpenHands task_completed partial is a failure",
        lambda: _traces(OPENHANDS_OUTPUT)[0]["metadata"]["success"] is False,
    ),
    (
        "4",
        "Inspect status cancelled kept",
        lambda: (
            _kp_import("inspect/2025-05-12T20-28-13-04-00_popularity.json").get("log_status")
            == "cancelled"
        ),
    ),
    (
        "5",
        "mini-SWE-agent model",
        lambda: (
            _kp_import("mini_swe_agent/astropy__astropy-13033.traj.json").get("model")
            == "google/gemini-3-pro-preview"
        ),
    ),
    (
        "5",
        "OpenHands trajectory model",
        lambda: (
            _kp_import("openhands/wrong_initial_state.json").get("model")
            == "claude-3-5-sonnet-20241022"
        ),
    ),
    (
        "5",
        "OpenHands eval output model",
        lambda: _kp_import(OPENHANDS_OUTPUT).get("model") == "openai/openrouter-llama-4-maverick",
    ),
    (
        "5",
        "OpenHands eval output token usage",
        lambda: (
            (_kp_import(OPENHANDS_OUTPUT).get("token_usage") or {}).get("prompt_tokens") == 565158
        ),
    ),
    (
        "5",
        "tau2 agent model",
        lambda: (
            _kp_import("tau2/resultado_filtro_gastelo_1.json").get("model")
            == "gemini/gemma-3-27b-it"
        ),
    ),
    (
        "5",
        "Inspect multiple-choice options kept",
        lambda: (
            "C) 12.2 eV" in _traces("inspect/mmlu-summary-choices.eval")[0]["task"]["objective"]
        ),
    ),
    ("6", "old SWE-agent .traj ids distinct", _old_swe_agent_ids),
    (
        "7",
        "OpenHands resolver output: a run per line",
        lambda: len(_traces("openhands/resolver_output.jsonl", "openhands")) == 2,
    ),
    (
        "7",
        "SWE-agent demonstration file read",
        lambda: len(_calls("swe_agent/function_calling_simple.traj")) == 5,
    ),
    (
        "7",
        "detection refusal names the nearest formats",
        lambda: (
            "nearest formats:"
            in _kp(
                "import",
                str(DATA / "refused/anthropic_managed_agents_custom_tools.jsonl"),
                "--from",
                "auto",
            )[1]
        ),
    ),
    (
        "8",
        "span file with embedding traces exits 0",
        lambda: _kp("import", str(DATA / "otel/all-spans.json"), "--from", "auto")[0] == 0,
    ),
    (
        "9",
        "--from openai on Anthropic messages says use --from anthropic",
        lambda: (
            "use --from anthropic"
            in _kp("import", str(DATA / "anthropic_messages.json"), "--from", "openai")[1]
        ),
    ),
    (
        "10",
        "Codex rollout without agent turn: refusal names Codex",
        lambda: (
            "Codex"
            in _kp("import", str(DATA / "refused/codex_cli_rollout.jsonl"), "--from", "auto")[1]
        ),
    ),
    ("10", "list element located at its own line", _pretty_list_element_line),
]


def survives(check: Callable[[], bool]) -> bool:
    try:
        return bool(check())
    except Exception:  # a crash loses the fact too
        return False


@pytest.mark.parametrize(("item", "fact", "check"), FACTS, ids=[f"{i}: {f}" for i, f, _ in FACTS])
def test_the_fact_survives(item: str, fact: str, check: Callable[[], bool]) -> None:
    assert check(), f"item {item}: {fact}"


def test_every_listed_fact_survives() -> None:
    assert sum(survives(check) for _, _, check in FACTS) == len(FACTS) == 33


if __name__ == "__main__":
    lost = [f"item {item}: {fact}" for item, fact, check in FACTS if not survives(check)]
    print(f"{len(FACTS) - len(lost)} of {len(FACTS)} facts survive")
    for line in lost:
        print("  lost:", line)
    sys.exit(1 if lost else 0)
