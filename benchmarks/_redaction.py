"""Redaction figures: every planted secret caught, matches on real agent text, throughput.

The planted corpus is generated from a seed: traces carrying secrets and personal data of
every kind the detectors know, in varied places (prose, JSON tool inputs, URLs, code blocks,
JSON kept as a string, outcome, unknown fields). ``bench_redaction`` reports the share caught,
what the ``private`` policy finds in the tau-bench airline conversations (their customers'
e-mail addresses are fake but real-looking: true positives), and MB/s of string content.
"""

from __future__ import annotations

import base64
import json
import random
import string
import time
from collections import Counter
from typing import Any

from ._corpus import TAU_BENCH, load_tau_bench
from ._figures import Figure, report

ALNUM = string.ascii_letters + string.digits
FIRST = ["ana", "bob", "chen", "dara", "eli", "fatima", "goran", "hana", "ivan", "jo"]
LAST = ["smith", "garcia", "kim", "muller", "rossi", "nguyen", "okafor", "silva"]


def _text(rng: random.Random, length: int, alphabet: str = ALNUM) -> str:
    # Generated keys mix cases and digits; force one of each so a short draw is no exception.
    body = [rng.choice(alphabet) for _ in range(length - 3)]
    body += [rng.choice(string.ascii_uppercase), rng.choice(string.ascii_lowercase)]
    body.append(rng.choice(string.digits))
    rng.shuffle(body)
    return "".join(body)


def _luhn_complete(rng: random.Random, prefix: str, length: int) -> str:
    digits = prefix + "".join(rng.choice(string.digits) for _ in range(length - len(prefix) - 1))
    for check in string.digits:
        candidate = digits + check
        total = 0
        for position, char in enumerate(reversed(candidate)):
            value = int(char) * (2 if position % 2 else 1)
            total += value - 9 if value > 9 else value
        if total % 10 == 0:
            return candidate
    raise AssertionError("unreachable: one check digit always completes a Luhn number")


def _card(rng: random.Random) -> str:
    prefix, length = rng.choice([("4", 16), ("52", 16), ("37", 15), ("6011", 16), ("35", 16)])
    number = _luhn_complete(rng, prefix, length)
    style = rng.choice(["plain", " ", "-"])
    if style == "plain":
        return number
    sizes = [4, 6, 5] if length == 15 else [4, 4, 4, 4]
    groups, at = [], 0
    for size in sizes:
        groups.append(number[at : at + size])
        at += size
    return style.join(groups)


def _iban(rng: random.Random) -> str:
    country, length = rng.choice([("DE", 18), ("GB", 18), ("FR", 23), ("NL", 14)])
    if country in {"GB", "NL"}:
        bban = "".join(rng.choice(string.ascii_uppercase) for _ in range(4))
        bban += "".join(rng.choice(string.digits) for _ in range(length - 4))
    else:
        bban = "".join(rng.choice(string.digits) for _ in range(length))
    number = "".join(str(int(char, 36)) for char in bban + country + "00")
    iban = f"{country}{98 - int(number) % 97:02d}{bban}"
    if rng.random() < 0.5:
        return iban
    return " ".join(iban[i : i + 4] for i in range(0, len(iban), 4))


def _phone(rng: random.Random) -> str:
    def d(n: int) -> str:
        return "".join(rng.choice(string.digits) for _ in range(n))

    area = str(rng.randint(201, 989))
    return rng.choice(
        [
            f"+1 ({area}) {d(3)}-{d(4)}",
            f"+1-{area}-{d(3)}-{d(4)}",
            f"{area}-{d(3)}-{d(4)}",
            f"({area}) {d(3)}-{d(4)}",
            f"{area}.{d(3)}.{d(4)}",
            f"+44 20 {d(4)} {d(4)}",
            f"+33 1 {d(2)} {d(2)} {d(2)} {d(2)}",
            f"+49{d(11)}",
        ]
    )


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _jwt(rng: random.Random) -> str:
    header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    claims = {"sub": str(rng.randint(1, 10**9)), "name": rng.choice(FIRST), "iat": 1716203640}
    signature = _b64url(bytes(rng.getrandbits(8) for _ in range(32)))
    return f"{header}.{_b64url(json.dumps(claims).encode())}.{signature}"


def _pem(rng: random.Random) -> str:
    label = rng.choice(["RSA PRIVATE KEY", "EC PRIVATE KEY", "PRIVATE KEY", "OPENSSH PRIVATE KEY"])
    body = base64.b64encode(bytes(rng.getrandbits(8) for _ in range(rng.randint(90, 300))))
    lines = [body[i : i + 64].decode() for i in range(0, len(body), 64)]
    return f"-----BEGIN {label}-----\n" + "\n".join(lines) + f"\n-----END {label}-----"


def secret_value(rng: random.Random, kind: str) -> str:
    if kind == "email":
        domain = rng.choice(["example.com", "mail.example.org", "corp.example.co.uk"])
        return f"{rng.choice(FIRST)}.{rng.choice(LAST)}{rng.randint(1, 9999)}@{domain}"
    if kind == "openai":
        return rng.choice(["sk-", "sk-proj-"]) + _text(rng, rng.choice([48, 120]), ALNUM + "_-")
    if kind == "anthropic":
        return "sk-ant-api03-" + _text(rng, 93, ALNUM + "_-") + "AA"
    if kind == "github":
        return rng.choice(
            [f"ghp_{_text(rng, 36)}", f"gho_{_text(rng, 36)}", f"github_pat_{_text(rng, 82)}"]
        )
    if kind == "aws":
        return rng.choice(["AKIA", "ASIA"]) + "".join(
            rng.choice(string.ascii_uppercase + string.digits) for _ in range(16)
        )
    if kind == "slack":
        return f"xox{rng.choice('abpr')}-{rng.randint(10**9, 10**10)}-{_text(rng, 24)}"
    if kind == "google":
        return "AIza" + _text(rng, 35, ALNUM + "_-")
    if kind == "stripe":
        return "sk_live_" + _text(rng, 24)
    simple = {"card": _card, "iban": _iban, "phone": _phone, "jwt": _jwt, "private_key": _pem}
    if kind in simple:
        return simple[kind](rng)
    if kind == "ssn":
        return f"{rng.randint(100, 665)}-{rng.randint(10, 99)}-{rng.randint(1000, 9999)}"
    if kind == "ip_address":
        return f"{rng.choice([rng.randint(11, 126), rng.randint(128, 223)])}.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"
    raise ValueError(kind)


#: Kinds planted on their own (AWS secrets, passwords and dates of birth need context).
PLANTED_KINDS = (
    "email", "phone", "card", "openai", "anthropic", "github", "aws", "slack", "jwt",
    "private_key", "google", "stripe", "iban", "ssn", "ip_address",
)  # fmt: skip

_PROSE = [
    "Please use {s} for this request.",
    "The customer wrote: my details are {s}, thanks!",
    "Found {s} in the logs (line 42, 2024-05-20T10:00:00Z).",
    "{s}",
]
_URLS = ["https://api.example.com/v1/items?key={s}&page=2", "see https://example.com/u/{s}/ now"]
_CODE = ['```python\nclient = Client("{s}")\nprint(client.version)\n```', "export VALUE='{s}'"]


def _placed(rng: random.Random, kind: str, value: str) -> Any:
    """``value`` in a context: a string, or a JSON value for a tool input."""
    where = rng.choice(["prose", "url", "code", "json", "json-text"])
    if kind == "private_key" and where == "url":
        where = "code"
    if where == "json":
        return {"request": {"headers": {"X-Value": value}, "items": [1, 2]}}
    if where == "json-text":
        return json.dumps({"config": {"value": value, "retries": 3}})
    template = rng.choice({"prose": _PROSE, "url": _URLS, "code": _CODE}[where])
    return template.format(s=value)


def _contextual(rng: random.Random) -> list[tuple[str, str, str]]:
    """(kind, value, text) for the kinds only context identifies."""
    key_id, secret = secret_value(rng, "aws"), _text(rng, 40, ALNUM + "/+")
    password, token = _text(rng, 14, ALNUM + "!#%"), _text(rng, 24)
    year, month, day = rng.randint(1940, 2005), rng.randint(1, 12), rng.randint(1, 28)
    birth = rng.choice([f"{year}-{month:02d}-{day:02d}", f"{month}/{day}/{year}"])
    return [
        ("aws_secret", secret, f"aws_access_key_id = {key_id}\naws_secret_access_key = {secret}"),
        ("aws", key_id, ""),
        ("url_password", password, f"postgres://admin:{password}@db.example.com:5432/app"),
        (
            "secret",
            token,
            rng.choice(
                [f"export API_TOKEN=x AUTH_TOKEN={token}", f'{{"client_secret": "{token}"}}']
            ),
        ),
        ("date_of_birth", birth, f"Passenger date of birth: {birth}."),
    ]


def planted_traces(seed: int, count: int) -> list[tuple[dict[str, Any], list[tuple[str, str]]]]:
    """``count`` traces, each with one secret of every kind; returns (trace, [(kind, value)])."""
    rng = random.Random(seed)
    out = []
    for number in range(count):
        planted: list[tuple[str, str]] = []
        pieces: list[Any] = []
        for kind in PLANTED_KINDS:
            value = secret_value(rng, kind)
            planted.append((kind, value))
            pieces.append(_placed(rng, kind, value))
        for kind, value, text in _contextual(rng):
            planted.append((kind, value))
            if text:
                pieces.append(text)
        rng.shuffle(pieces)
        strings = [p for p in pieces if isinstance(p, str)]
        inputs = [p for p in pieces if not isinstance(p, str)]
        # The first three strings go to the metadata, the task and the outcome; the rest
        # alternate between a step's content and its output summary.
        notes, objective, result = strings[:3]
        steps: list[dict[str, Any]] = []
        for index, text in enumerate(strings[3:]):
            field = "content" if index % 2 else "output_summary"
            steps.append({"step_id": len(steps), "type": "observation", field: text})
        for value in inputs:
            steps.append(
                {
                    "step_id": len(steps),
                    "type": "tool_call",
                    "tool": {"name": "http_request"},
                    "input": value,
                    "output_summary": "200 OK, 3 items, took 1.25 s (v2.3.1)",
                }
            )
        trace = {
            "@context": "https://openknowledgepulse.org/schema/v1",
            "@type": "ReasoningTrace",
            "id": f"kp:trace:planted-{seed}-{number}",
            "metadata": {
                "created_at": "2026-01-01T10:00:00Z",
                "task_domain": "support",
                "success": True,
                "visibility": "private",
                "privacy_level": "private",
                "ticket": {"notes": [notes], "order": "1234567890123"},
            },
            "task": {"objective": f"Resolve ticket #{40000 + number}: {objective}"},
            "steps": steps,
            "outcome": {"result_summary": f"Done, v1.2.3 shipped. {result}", "confidence": 0.9},
        }
        out.append((trace, planted))
    return out


def leaked(trace_json: str, planted: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The planted values still present in a serialised trace (raw or JSON-escaped)."""
    escaped = [(k, v, json.dumps(v)[1:-1]) for k, v in planted]
    return [(k, v) for k, v, e in escaped if v in trace_json or e in trace_json]


def _string_bytes(value: Any) -> int:
    if isinstance(value, str):
        return len(value.encode())
    if isinstance(value, dict):
        return sum(_string_bytes(v) for v in value.values())
    if isinstance(value, list):
        return sum(_string_bytes(v) for v in value)
    return 0


def tau_bench_traces() -> list[Any]:
    from knowledgepulse.importers import from_openai

    return from_openai(load_tau_bench())


def bench_redaction(quick: bool) -> None:
    """Planted secrets caught, tau-bench matches by kind, and throughput (MB/s of strings)."""
    from knowledgepulse.redaction import redact_trace

    corpus = planted_traces(seed=7, count=20 if quick else 200)
    planted_total = sum(len(planted) for _, planted in corpus)
    missed = sum(
        len(leaked(redact_trace(trace)[0].to_json(), planted)) for trace, planted in corpus
    )
    report(
        Figure(
            "redaction: planted secrets caught (every kind)",
            100.0 * (planted_total - missed) / planted_total,
            "%",
            100,
            False,
            note=f"{planted_total} planted",
        )
    )
    if not TAU_BENCH.exists():
        report(Figure("redaction: tau-bench matches (private)", None, "matches"))
        return
    traces = tau_bench_traces()
    if quick:
        traces = traces[:40]
    found: Counter[str] = Counter()
    size = sum(_string_bytes(trace.to_dict()) for trace in traces)
    start = time.perf_counter()
    for trace in traces:
        found.update(redact_trace(trace, policy="private")[1].counts)
    elapsed = time.perf_counter() - start
    kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(found.items()))
    report(
        Figure(
            "redaction: tau-bench matches (private policy)",
            sum(found.values()),
            "matches",
            note=kinds,
        )
    )
    report(
        Figure(
            "redaction: redact_trace throughput (tau-bench)",
            size / elapsed / 1e6,
            "MB/s",
            None,
            False,
            note=f"{len(traces)} traces, {size / 1e6:.1f} MB of strings",
        )
    )
