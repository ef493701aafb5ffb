"""Every fixture is detected as its own format only; binary payloads never reach the text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from knowledgepulse.importers import convert, detect_format, read_traces
from knowledgepulse.importers._binary import (
    binary_placeholder,
    looks_like_base64,
    scrub_text,
    scrub_value,
)
from knowledgepulse.importers._values import content_text
from knowledgepulse.io._reader import iter_records

from ._util import DATA, TAU_SAMPLE, load

# The format each fixture is in, by the start of its name.
_PREFIXES = {
    "openai_responses": "openai-responses",
    "openai_agents": "openai-agents",
    "openai": "openai",
    "langfuse": "langfuse",
    "anthropic": "anthropic",
    "gemini": "gemini",
    "bedrock": "bedrock",
    "otel": "otel",
    "langsmith": "langsmith",
    "atif": "atif",
}
FIXTURES = sorted(
    p
    for p in [*DATA.glob("*.json"), *(DATA / "units").glob("*.json*")]
    if "malformed" not in p.name
)


def _expected(path: Path) -> str:
    return next(fmt for prefix, fmt in _PREFIXES.items() if path.name.startswith(prefix))


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.name)
def test_every_fixture_is_detected_as_its_own_format(fixture: Path) -> None:
    expected = _expected(fixture)
    units = list(read_traces(iter_records([str(fixture)]), "auto"))
    assert {unit.format for unit in units} == {expected}
    others = [name for name in _PREFIXES.values() if name != expected]
    for record in iter_records([str(fixture)]):
        assert detect_format(record.data) not in others


def test_tau_bench_is_openai() -> None:
    assert detect_format(json.loads(TAU_SAMPLE.read_text())) == "openai"


def test_bedrock_is_not_taken_for_openai() -> None:
    record = load("bedrock_converse.json")
    del record["modelId"], record["output"], record["ResponseMetadata"]
    assert detect_format(record) == "bedrock"
    assert detect_format(record["messages"]) == "bedrock"
    assert len(convert("auto", record)) == 1


@pytest.mark.parametrize(
    ("mime", "size", "text"),
    [
        ("image/png", 24 * 1024, "[image/png, 24 KB]"),
        ("encrypted content", 3000, "[encrypted content, 3 KB]"),
        (None, 512, "[binary, 512 bytes]"),
        ("audio/wav", 3 * 1024 * 1024, "[audio/wav, 3.0 MB]"),
        ("image/jpeg", None, "[image/jpeg]"),
    ],
)
def test_binary_placeholder(mime: str | None, size: int | None, text: str) -> None:
    assert binary_placeholder(mime, size) == text


def test_base64_detection_leaves_ordinary_text_alone() -> None:
    blob = "iVBORw0KGgoAAAANSUhEUgAA" + "Ab3x" * 100
    assert looks_like_base64(blob)
    assert looks_like_base64("data:image/png;base64," + blob)
    assert not looks_like_base64("a" * 400)  # no digits or capitals: not a payload
    assert not looks_like_base64("0123456789abcdef" * 30)  # a long hex digest
    assert not looks_like_base64("The quick brown fox. " * 30)
    assert scrub_text(f"before {blob} after") == "before [image/png, 318 bytes] after"
    assert scrub_text("see data:image/jpeg;base64," + blob) == "see [image/jpeg, 318 bytes]"
    assert scrub_value({"encrypted_content": "QUJD" * 10, "url": "https://x.org"}) == {
        "encrypted_content": "[encrypted content, 30 bytes]",
        "url": "https://x.org",
    }


def _all_text(trace: Any) -> str:
    return json.dumps(trace.to_dict())


@pytest.mark.parametrize(
    ("fixture", "placeholders"),
    [
        ("openai_responses_image.json", ["[image/png, 18 KB]"]),
        (
            "anthropic_payloads.json",
            ["[image/png, 6 KB]", "[encrypted content, 2 KB]", "[encrypted content, 1 KB]"],
        ),
        ("gemini_generate_content.json", ["[image/png, 6 KB]"]),
        ("bedrock_converse.json", ["[image/jpeg, 6 KB]"]),
    ],
)
def test_payloads_become_placeholders(fixture: str, placeholders: list[str]) -> None:
    (trace,) = convert("auto", load(fixture))
    text = _all_text(trace)
    for placeholder in placeholders:
        assert placeholder in text
    assert "iVBORw0KGgo" not in text
    assert len(text) < 6000


def test_anthropic_image_only_tool_result_is_a_placeholder() -> None:
    (trace,) = convert("anthropic", load("anthropic_payloads.json"))
    screenshot = trace.steps[2]
    assert (screenshot.type, screenshot.content) == ("observation", "[image/png, 6 KB]")


def test_media_parts_of_a_tool_result() -> None:
    blob = "JVBERi0xLjQK" + "Zm9vYmFy" * 40
    content = [
        {"type": "text", "text": "Attached."},
        {"type": "file", "file": {"file_data": blob, "filename": "report.pdf"}},
        {"type": "input_image", "image_url": "https://example.org/chart.png"},
        {"type": "image", "source": {"type": "url", "url": "https://example.org/a.jpg"}},
        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "hi"}},
    ]
    assert content_text(content, None, result=True) == "\n".join(
        [
            "Attached.",
            "[application/pdf, 249 bytes]",
            "[image: https://example.org/chart.png]",
            "[image: https://example.org/a.jpg]",
            "[text/plain, 2 bytes]",
        ]
    )
