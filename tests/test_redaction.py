"""Redaction: each kind found and replaced, ordinary text left alone, traces walked whole."""

from __future__ import annotations

import copy
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from _helpers import WORKED_EXAMPLE
from knowledgepulse import ReasoningTrace, TraceValidationError
from knowledgepulse.redaction import (
    KINDS,
    POLICIES,
    RedactionPolicy,
    UnknownPolicyError,
    redact_text,
    redact_trace,
)

DATA = Path(__file__).parent / "data"

# Keys are assembled from parts so that no complete credential-shaped literal sits in the
# repository for secret scanners to flag.
OPENAI = "sk-" + "proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
OPENAI_LEGACY = "sk-" + "T3BlbkFJ" + "aB1cD2eF3gH4iJ5kL6mN7oP8qR9sT0uV1wX2yZ3a"
ANTHROPIC = "sk-" + "ant-api03-" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe-_dCbA"
GITHUB = "gh" + "p_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
GITHUB_OAUTH = "gh" + "o_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
GITHUB_PAT = "github_" + "pat_" + "11ABCDEFG0123456789abc_" + "x" * 40 + "Y9"
AWS_ID = "AKIA" + "Z7QW4ERT6YUI2OPL"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"
SLACK = "xox" + "b-1234567890-0987654321-" + "AbCdEfGhIjKlMnOpQrStUvWx"
GOOGLE = "AI" + "za" + "SyD4f5G6h7J8k9L0z1X2c3V4b5N6m7Q8w9E"
STRIPE = "sk_" + "live_" + "4eC39HqLyjWDarjtT1zdp7dc"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4WGeKLs1Pt8Qu\n"
    "KUpRKfFLfRYC9AIKjbJTWit+CqvjWYzvQwECAwEAAQ==\n"
    "-----END RSA PRIVATE KEY-----"
)


@pytest.mark.parametrize(
    ("text", "expected", "kind"),
    [
        ("write to ana.silva5929@example.com today", "write to [EMAIL] today", "email"),
        ("from mia_li+kp@mail.example.org.", "from [EMAIL].", "email"),
        ("to <José.Núñez@example.es>", "to <[EMAIL]>", "email"),
        ("call +1 (555) 123-4567 now", "call [PHONE] now", "phone"),
        ("call 555-123-4567.", "call [PHONE].", "phone"),
        ("call 555.123.4567", "call [PHONE]", "phone"),
        ("ring +44 20 7946 0958", "ring [PHONE]", "phone"),
        ("ring +4915112345678", "ring [PHONE]", "phone"),
        ("card 4111 1111 1111 1111 exp 12/28", "card [CARD] exp 12/28", "card"),
        ("card 4111-1111-1111-1111", "card [CARD]", "card"),
        ("amex 378282246310005", "amex [CARD]", "card"),
        ("amex 3782 822463 10005", "amex [CARD]", "card"),
        (f"key {OPENAI} here", "key [API_KEY:openai] here", "openai"),
        (f"key={OPENAI_LEGACY}", "key=[API_KEY:openai]", "openai"),
        (f"key {ANTHROPIC}", "key [API_KEY:anthropic]", "anthropic"),
        (f"token {GITHUB}", "token [API_KEY:github]", "github"),
        (f"token {GITHUB_OAUTH}", "token [API_KEY:github]", "github"),
        (f"token {GITHUB_PAT}", "token [API_KEY:github]", "github"),
        (f"id {AWS_ID}", "id [API_KEY:aws]", "aws"),
        (f"bot {SLACK}", "bot [API_KEY:slack]", "slack"),
        (f"maps {GOOGLE}", "maps [API_KEY:google]", "google"),
        (f"pay {STRIPE}", "pay [API_KEY:stripe]", "stripe"),
        (f"Authorization: Bearer {JWT}", "Authorization: Bearer [JWT]", "jwt"),
        (f"key:\n{PEM}\ndone", "key:\n[PRIVATE_KEY]\ndone", "private_key"),
        ("iban DE89 3704 0044 0532 0130 00.", "iban [IBAN].", "iban"),
        ("iban GB82WEST12345698765432", "iban [IBAN]", "iban"),
        ("ssn 123-45-6789", "ssn [SSN]", "ssn"),
        (
            "postgres://admin:s3cr3t!x@db:5432/app",
            "postgres://admin:[PASSWORD]@db:5432/app",
            "url_password",
        ),
        ("DB_PASSWORD=hunter22 ./run", "DB_PASSWORD=[SECRET] ./run", "secret"),
        ('{"api_key": "abcd1234"}', '{"api_key": "[SECRET]"}', "secret"),
        ("from 203.0.113.5:8080", "from [IP_ADDRESS]:8080", "ip_address"),
        ('"dob": "1990-04-05"', '"dob": "[DATE_OF_BIRTH]"', "date_of_birth"),
        ("born on March 3, 1985.", "born on [DATE_OF_BIRTH].", "date_of_birth"),
    ],
)
def test_each_kind_becomes_its_placeholder(text: str, expected: str, kind: str) -> None:
    assert redact_text(text, "private") == (expected, Counter({kind: 1}))


def test_aws_secret_is_taken_next_to_its_key_id_or_by_its_label() -> None:
    near = f"creds {AWS_ID} / {AWS_SECRET}"
    assert redact_text(near) == (
        "creds [API_KEY:aws] / [API_KEY:aws_secret]",
        Counter({"aws": 1, "aws_secret": 1}),
    )
    labelled = f'{{"SecretAccessKey": "{AWS_SECRET}"}}'
    assert redact_text(labelled) == (
        '{"SecretAccessKey": "[API_KEY:aws_secret]"}',
        Counter({"aws_secret": 1}),
    )
    # Alone and unlabelled, 40 base64 characters are any token.
    assert redact_text(f"blob {AWS_SECRET}") == (f"blob {AWS_SECRET}", Counter())


def test_a_truncated_private_key_block_is_removed_to_the_end_of_its_base64() -> None:
    cut = PEM[:120]
    assert redact_text(f"out: {cut}") == ("out: [PRIVATE_KEY]", Counter({"private_key": 1}))


def test_a_private_key_inside_json_text_is_removed() -> None:
    text = json.dumps({"key": PEM, "n": 1})
    assert redact_text(text) == ('{"key": "[PRIVATE_KEY]", "n": 1}', Counter({"private_key": 1}))


@pytest.mark.parametrize(
    "text",
    [
        "card 4111 1111 1111 1112",  # Luhn fails
        "card 4111 1111-1111 1111",  # mixed separators
        "id 1111111111111117",  # Luhn-valid, but no issuer starts with 1
        "phone 5551234567",  # a bare run of digits is an id, not a phone number
        "phone +1 555",  # too few digits
        "ssn 000-12-3456",  # no SSN starts with 000
        "iban DE00 3704 0044 0532 0130 00",  # mod 97 fails
        "key sk-" + "a" * 30,  # not random: no upper case, no digit
    ],
)
def test_look_alikes_are_left_alone(text: str) -> None:
    assert redact_text(text) == (text, Counter())


def test_ordinary_text_is_left_alone() -> None:
    lines = (DATA / "redaction" / "ordinary.txt").read_text().splitlines()
    changed = [(line, redact_text(line)[0]) for line in lines if redact_text(line)[1]]
    assert changed == []


def test_levels_redact_what_the_policy_table_says() -> None:
    text = "mail a.b@example.com from 203.0.113.5, dob: 1990-04-05, key " + STRIPE
    assert redact_text(text, "federated") == (
        "mail [EMAIL] from 203.0.113.5, dob: 1990-04-05, key [API_KEY:stripe]",
        Counter({"email": 1, "stripe": 1}),
    )
    assert redact_text(text, "aggregated")[0] == (
        "mail [EMAIL] from 203.0.113.5, dob: [DATE_OF_BIRTH], key [API_KEY:stripe]"
    )
    assert redact_text(text, "private")[0] == (
        "mail [EMAIL] from [IP_ADDRESS], dob: [DATE_OF_BIRTH], key [API_KEY:stripe]"
    )
    assert POLICIES["private"].kinds == frozenset(KINDS)


def test_a_custom_policy_redacts_only_its_kinds() -> None:
    only_email = RedactionPolicy("email-only", frozenset({"email"}))
    text = f"a.b@example.com {STRIPE}"
    assert redact_text(text, only_email) == (f"[EMAIL] {STRIPE}", Counter({"email": 1}))


def test_an_unknown_policy_is_refused() -> None:
    with pytest.raises(UnknownPolicyError, match="unknown redaction policy 'public'"):
        redact_text("x", "public")


def _trace(**changes: Any) -> dict[str, Any]:
    trace = copy.deepcopy(WORKED_EXAMPLE)
    trace["metadata"]["privacy_level"] = "federated"
    for key, value in changes.items():
        trace[key] = value
    return trace


def test_redact_trace_walks_every_content_string_and_records_counts() -> None:
    trace = _trace(
        id="kp:trace:ana@example.com",
        task={"objective": f"Rotate {GITHUB} for ana@example.com"},
        steps=[
            {"step_id": 0, "type": "thought", "content": "Mail ana@example.com"},
            {
                "step_id": 1,
                "type": "tool_call",
                "tool": {"name": "send", "mcp_server": "mail"},
                "input": {"to": ["ana@example.com"], "password": "hunter2", "n": 4111111111111111},
                "output_summary": f"sent with {SLACK}",
                "note": "call 555-123-4567",
            },
        ],
        outcome={"result_summary": "rotated; card 4111 1111 1111 1111", "confidence": 0.9},
        knowledge_graph_delta={
            "entities": [{"name": "ana@example.com", "type": "person"}],
            "relationships": [{"fact": "ana@example.com owns repo"}],
        },
    )
    trace["metadata"]["agent_id"] = "agent@example.com"
    trace["metadata"]["ticket"] = {"from": "ana@example.com"}
    redacted, report = redact_trace(trace)
    data = redacted.to_dict()
    assert report.policy == "federated"
    assert report.counts == Counter(
        {"email": 7, "github": 1, "slack": 1, "secret": 1, "card": 2, "phone": 1}
    )
    assert data["id"] == "kp:trace:ana@example.com"  # the identity is never rewritten
    assert data["metadata"]["agent_id"] == "[EMAIL]"
    assert data["metadata"]["ticket"] == {"from": "[EMAIL]"}
    assert data["task"]["objective"] == "Rotate [API_KEY:github] for [EMAIL]"
    assert data["steps"][1]["input"] == {
        "to": ["[EMAIL]"],
        "password": "[SECRET]",
        "n": "[CARD]",
    }
    assert data["steps"][1]["tool"] == {"name": "send", "mcp_server": "mail"}
    assert data["steps"][1]["note"] == "call [PHONE]"
    assert data["outcome"]["result_summary"] == "rotated; card [CARD]"
    assert data["knowledge_graph_delta"] == {
        "entities": [{"name": "[EMAIL]", "type": "person"}],
        "relationships": [{"fact": "[EMAIL] owns repo"}],
    }
    assert data["metadata"]["kp_redaction"] == {
        "policy": "federated",
        "counts": {"card": 2, "email": 7, "github": 1, "phone": 1, "secret": 1, "slack": 1},
    }


def test_the_tool_object_is_redacted_but_for_the_tool_name() -> None:
    """Issue 22 item 2: before, the whole step ``tool`` object was skipped."""
    trace = _trace()
    trace["steps"][1]["tool"] = {
        "name": "github_pr_read",
        "config": {"api_key": OPENAI, "dsn": "postgresql://app:pa55word@db.internal:5432/app"},
        "description": f"reads PRs; deploy key id {AWS_ID}",
        "mcp_server": f"https://mcp.example.net/?token={GITHUB}",
    }
    redacted, report = redact_trace(trace)
    assert redacted.to_dict()["steps"][1]["tool"] == {
        "name": "github_pr_read",
        "config": {
            "api_key": "[API_KEY:openai]",
            "dsn": "postgresql://app:[PASSWORD]@db.internal:5432/app",
        },
        "description": "reads PRs; deploy key id [API_KEY:aws]",
        "mcp_server": "https://mcp.example.net/?token=[API_KEY:github]",
    }
    assert report.counts == Counter({"openai": 1, "url_password": 1, "aws": 1, "github": 1})


def test_metadata_fields_keys_and_card_numbers_are_checked_too() -> None:
    trace = _trace()
    metadata = trace["metadata"]
    metadata["task_domain"] = "billing for ana@example.com"
    metadata["framework"] = f"langchain {SLACK}"
    metadata["validated_by"] = ["reviewer@example.com", "ci"]
    trace["source_skill"] = "mail bob@example.com"
    trace["steps"][1]["input"] = {
        "ana@example.com": {"bob@example.com": 1, "eve@example.com": 2},
        "cards": [4111111111111111, 5555555555554444.0, 1700000000000, 4111111111111112],
        "plain": True,
    }
    trace["steps"][1]["latency_ms"] = 4111111111111111
    redacted, report = redact_trace(trace)
    data = redacted.to_dict()
    assert data["metadata"]["task_domain"] == "billing for [EMAIL]"
    assert data["metadata"]["framework"] == "langchain [API_KEY:slack]"
    assert data["metadata"]["validated_by"] == ["[EMAIL]", "ci"]
    assert data["source_skill"] == "mail [EMAIL]"
    assert data["steps"][1]["input"] == {
        "[EMAIL]": {"[EMAIL]": 1, "[EMAIL] (2)": 2},
        # A 13-digit timestamp and a number failing Luhn stay numbers.
        "cards": ["[CARD]", "[CARD]", 1700000000000, 4111111111111112],
        "plain": True,
    }
    assert data["steps"][1]["latency_ms"] is None  # a number field: the card goes
    assert report.counts == Counter({"email": 6, "slack": 1, "card": 3})
    assert redact_trace(redacted)[1].counts == Counter()


def test_redact_trace_follows_the_privacy_level_unless_told_otherwise() -> None:
    trace = _trace(task={"objective": "Log in from 203.0.113.5"})
    assert redact_trace(trace)[0].task.objective == "Log in from 203.0.113.5"
    redacted, report = redact_trace(trace, policy="private")
    assert redacted.task.objective == "Log in from [IP_ADDRESS]"
    assert report.to_dict() == {"policy": "private", "counts": {"ip_address": 1}}


def test_a_birth_date_field_is_redacted_by_its_name() -> None:
    trace = _trace()
    trace["steps"][1]["input"] = {"passenger": {"dob": "1990-04-05", "name": "Mia"}}
    redacted, report = redact_trace(trace, policy="aggregated")
    assert redacted.steps[1].input == {"passenger": {"dob": "[DATE_OF_BIRTH]", "name": "Mia"}}
    assert report.counts == Counter({"date_of_birth": 1})


def test_redacting_a_redacted_trace_changes_nothing() -> None:
    trace = _trace(task={"objective": f"Use {OPENAI} and mail ana@example.com"})
    once, _ = redact_trace(trace)
    twice, second = redact_trace(once)
    assert twice == once
    assert second.counts == Counter()
    assert twice.metadata.model_extra == {
        "kp_redaction": {"policy": "federated", "counts": {"email": 1, "openai": 1}}
    }


def test_redact_trace_accepts_a_model_and_refuses_an_invalid_record() -> None:
    model = ReasoningTrace.model_validate(_trace(task={"objective": "mail a@example.com"}))
    assert redact_trace(model)[0].task.objective == "mail [EMAIL]"
    assert model.task.objective == "mail a@example.com"  # the input is not changed
    with pytest.raises(TraceValidationError, match="steps"):
        redact_trace(_trace(steps=[]))


def test_tau_bench_sample_matches_only_its_customers_emails_and_birth_dates() -> None:
    from knowledgepulse.importers import from_openai

    traces = from_openai(json.loads((DATA / "tau_bench_sample.json").read_text()))
    found: dict[str, Counter[str]] = {}
    for level in ("federated", "aggregated", "private"):
        found[level] = Counter()
        for trace in traces:
            found[level].update(redact_trace(trace, policy=level)[1].counts)
    assert found == {
        "federated": Counter({"email": 1}),
        "aggregated": Counter({"email": 1, "date_of_birth": 15}),
        "private": Counter({"email": 1, "date_of_birth": 15}),
    }
