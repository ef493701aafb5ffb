"""An agent that recalls before acting and contributes after, through the MCP server.

    python examples/mcp_agent_loop.py [KB]

Runs offline: the model is a scripted Chat Completions server on loopback (no network, no
API key), the knowledge base is a fresh SQLite file (or KB) served by ``kp mcp`` over stdio,
reached with the official ``mcp`` client. The steps:

1. the example traces (``examples/traces.jsonl``) are contributed, as earlier agents would
   have done: scored, deduplicated, stored when they pass the gate;
2. the agent gets a refund task, calls ``search_traces`` with it and puts the worked examples it
   gets back into its system message; the scripted model, seeing that an earlier run went
   straight from the order lookup to the refund, skips the policy check it would otherwise do;
3. the agent's run is recorded (``knowledgepulse.capture``) and contributed with
   ``contribute_trace``; a second, nearly identical run is then reported as a duplicate.

Needs the ``mcp``, ``capture`` and ``embed`` extras.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import openai
from mcp import ClientSession, StdioServerParameters, stdio_client

import knowledgepulse
from knowledgepulse import Scorer

EXAMPLES = Path(__file__).resolve().parent / "traces.jsonl"
INSTRUCTIONS = "You are a support agent. Use the tools to resolve the customer's request."
TOOLS = {
    "lookup_order": lambda args: {"order": args["order_id"], "total": "89.00", "delivered": True},
    "check_policy": lambda args: {"policy": "RP-4", "instant_refund_under": 150},
    "issue_refund": lambda args: {"refund": "created", "amount": args.get("amount", "89.00")},
}
TOOL_SCHEMAS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}},
        },
    }
    for name in TOOLS
]


# -- the scripted model ---------------------------------------------------------------------


def _plan(system: str) -> list[str]:
    """Which tools the scripted model calls: with a worked example that went from the lookup
    straight to the refund, it skips the policy check."""
    if "## Example 1 of" in system and "refund" in system:
        return ["lookup_order", "issue_refund"]
    return ["lookup_order", "check_policy", "issue_refund"]


def _reply(body: dict[str, Any], number: int) -> dict[str, Any]:
    messages = body["messages"]
    plan = _plan(messages[0]["content"] if messages[0]["role"] == "system" else "")
    done = sum(message["role"] == "tool" for message in messages)
    message: dict[str, Any] = {"role": "assistant", "content": None}
    if done == len(plan):
        message["content"] = "Refunded $89.00 for the damaged blender on order A-10733."
    else:
        message["tool_calls"] = [
            {
                "id": f"call_{number}",
                "type": "function",
                "function": {"name": plan[done], "arguments": '{"order_id": "A-10733"}'},
            }
        ]
    return {
        "id": f"chatcmpl-{number}",
        "object": "chat.completion",
        "created": 1760000000,
        "model": body["model"],
        "choices": [{"index": 0, "message": message, "finish_reason": "stop", "logprobs": None}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


@contextmanager
def scripted_model() -> Iterator[str]:
    """A Chat Completions server on a free loopback port; yields its base URL."""
    count = [0]

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            count[0] += 1
            data = json.dumps(_reply(body, count[0])).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()


# -- the agent --------------------------------------------------------------------------------


async def tool(session: ClientSession, name: str, **arguments: Any) -> Any:
    result = await session.call_tool(name, arguments)
    if result.is_error:
        raise RuntimeError(f"{name}: {result.content[0].text}")
    return json.loads(result.content[0].text)


def act(client: openai.OpenAI, system: str, task: str) -> tuple[str, int]:
    """The tool loop; returns the answer and how many model calls it took."""
    messages: list[Any] = [
        {"role": "system", "content": system},
        {"role": "user", "content": task},
    ]
    calls = 0
    while True:
        calls += 1
        reply = client.chat.completions.create(
            model="scripted", messages=messages, tools=TOOL_SCHEMAS
        )
        message = reply.choices[0].message
        messages.append(message)
        if not message.tool_calls:
            return message.content or "", calls
        for call in message.tool_calls:
            output = TOOLS[call.function.name](json.loads(call.function.arguments))
            messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": json.dumps(output)}
            )


async def run_agent(session: ClientSession, client: openai.OpenAI, task: str, label: str) -> None:
    # 1. Recall: the most similar successful runs, as worked examples for the instructions.
    found = await tool(session, "search_traces", query=task, limit=3)
    hits = ", ".join(f"{hit['id']} ({hit['similarity']:.2f})" for hit in found["hits"])
    print(f"{label}: recalled {len(found['hits'])} examples: {hits or '-'}")
    system = INSTRUCTIONS + (f"\n\n{found['examples']}" if found["examples"] else "")
    # 2. Act, recording the model calls as a ReasoningTrace (scored on the server, not here).
    with knowledgepulse.capture(
        objective=task, domain="customer_service", scorer=Scorer(embedder=None), threshold=0.0
    ) as run:
        answer, calls = act(client, system, task)
        run.finish(success=True, confidence=0.9, summary=answer)
    assert run.trace is not None, run.problem
    print(f"{label}: {calls} model calls, {len(run.trace.steps)} steps: {answer}")
    # 3. Contribute: the server redacts, scores and deduplicates it.
    result = await tool(session, "contribute_trace", trace=run.trace.to_dict(), visibility="org")
    duplicate = result["duplicate_of"]
    print(
        f"{label}: contributed {result['id']}: score {result['score']:.3f}, "
        f"passed {result['passed']}, stored {result['stored']}"
        + (f", duplicate of {duplicate['id']} ({duplicate['similarity']:.2f})" if duplicate else "")
    )


async def main(base: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key != "KNOWLEDGEPULSE_EMBEDDER"}
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "knowledgepulse", "mcp", "--kb", str(base)], env=env
    )
    with open(os.devnull, "w") as quiet, scripted_model() as model_url:
        client = openai.OpenAI(base_url=model_url, api_key="offline", max_retries=0)
        async with (
            stdio_client(server, errlog=quiet) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            stored = duplicates = 0
            lines = EXAMPLES.read_text(encoding="utf-8").splitlines()
            for line in lines:
                result = await tool(session, "contribute_trace", trace=json.loads(line))
                stored += result["status"] == "accepted"
                duplicates += result["duplicate_of"] is not None
            print(
                f"seeded: {len(lines)} traces contributed, {stored} stored, "
                f"{duplicates} near-duplicates of stored ones"
            )
            task = "Refund order A-10733: the blender arrived damaged"
            await run_agent(session, client, task, "run 1")
            await run_agent(session, client, task, "run 2")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as folder:
        location = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(folder) / "team.sqlite"
        anyio.run(main, location)
