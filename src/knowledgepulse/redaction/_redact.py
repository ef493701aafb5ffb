"""Redacting text and whole traces; what was removed is counted, never kept."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .._schema import ReasoningTrace, parse_trace
from ._checks import is_card_number
from ._detectors import BIRTH_FIELD_NAMES, DATE, SECRET_FIELD_NAMES
from ._policy import RedactionPolicy, resolve_policy

__all__ = ["METADATA_KEY", "RedactionReport", "redact_text", "redact_trace"]

#: Where a redacted trace records its policy and counts: ``metadata.kp_redaction``.
METADATA_KEY = "kp_redaction"

_TWO_DIGITS = re.compile(r"\d\d")
_PLACEHOLDER = re.compile(r"\[[A-Z_]+(?::[a-z_]+)?\]")

# What is never rewritten: the trace's identity and structure (its id, ``@context`` and
# ``@type``, step ids and types, tool names), and the metadata fields whose type leaves no
# room for a secret (a date-time, a boolean, a number in [0, 1], two enumerations, and the
# redaction's own record). Every other string is examined, dictionary keys and the schema's
# free-text metadata (task_domain, framework, agent_id, validated_by) included, and so is
# every integer (a card number sent as a JSON number).
_TOP_EXEMPT = frozenset({"@context", "@type", "id"})
_METADATA_EXEMPT = frozenset(
    {"created_at", "success", "quality_score", "visibility", "privacy_level", METADATA_KEY}
)
_STEP_EXEMPT = frozenset({"step_id", "type"})
_TOOL_EXEMPT = frozenset({"name"})
_NOTHING = frozenset[str]()


@dataclass(frozen=True)
class RedactionReport:
    """What one redaction removed: the policy applied and a count per kind (no values)."""

    policy: str
    counts: Counter[str] = field(default_factory=Counter)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def to_dict(self) -> dict[str, Any]:
        """``{"policy": ..., "counts": {kind: n}}``, kinds sorted; the form kept in metadata."""
        return {"policy": self.policy, "counts": dict(sorted(self.counts.items()))}


def redact_text(text: str, policy: str | RedactionPolicy = "private") -> tuple[str, Counter[str]]:
    """``text`` with every secret and personal datum ``policy`` covers replaced by a typed
    placeholder (``[EMAIL]``, ``[API_KEY:openai]``…), and how many of each kind were.

    Args:
        text: any string.
        policy: a privacy level (``"federated"``, ``"aggregated"``, ``"private"``) or a
            :class:`RedactionPolicy`. Raises :class:`UnknownPolicyError` for another name.
    """
    counts: Counter[str] = Counter()
    return _redact_string(text, resolve_policy(policy), counts), counts


def redact_trace(
    trace: ReasoningTrace | Mapping[str, Any],
    *,
    policy: str | RedactionPolicy | None = None,
) -> tuple[ReasoningTrace, RedactionReport]:
    """A copy of ``trace`` with every string of its content redacted, and the report.

    Every string, dictionary key and integer is examined, at any depth (the tool object but
    its name, the metadata's free-text fields, unknown fields), except what docs/redaction.md
    names as exempt: the id, ``@context``/``@type``, step ids and types, tool names, and the
    metadata fields ``created_at``, ``success``, ``quality_score``, ``visibility``,
    ``privacy_level``. A string under a key named like a secret (``password``,
    ``api_key``…) is replaced whatever it looks like; an integer that is a card number
    becomes ``"[CARD]"``. The policy and counts are added to ``metadata.kp_redaction``
    (counts of an earlier redaction are added to).

    Args:
        trace: a ReasoningTrace or a mapping validated as one (raises
            :class:`TraceValidationError` if it is not).
        policy: a privacy level or a :class:`RedactionPolicy`; by default the trace's own
            ``metadata.privacy_level``.
    """
    parsed = parse_trace(trace)
    chosen = resolve_policy(policy if policy is not None else parsed.metadata.privacy_level)
    walker = _Walker(chosen)
    data = parsed.to_dict()
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key in _TOP_EXEMPT:
            out[key] = value
        elif key == "metadata":
            out[key] = walker.mapping(value, skip=_METADATA_EXEMPT)
        elif key == "steps":
            out[key] = [walker.step(step) for step in value]
        else:
            walker.put(out, key, walker.value(value, key))
    report = RedactionReport(chosen.name, walker.counts)
    earlier = data["metadata"].get(METADATA_KEY)
    total = Counter(walker.counts)
    if isinstance(earlier, Mapping) and isinstance(earlier.get("counts"), Mapping):
        total.update({k: v for k, v in earlier["counts"].items() if isinstance(v, int) and v > 0})
    out["metadata"][METADATA_KEY] = RedactionReport(chosen.name, total).to_dict()
    return ReasoningTrace.model_validate(out), report


class _Walker:
    """Rewrites the strings, keys and integers of nested JSON values, counting what it
    removes."""

    def __init__(self, policy: RedactionPolicy) -> None:
        self.policy = policy
        self.counts: Counter[str] = Counter()
        kinds = policy.kinds
        self._secret_fields = "secret" in kinds
        self._birth_fields = "date_of_birth" in kinds
        self._cards = "card" in kinds
        self._clean_keys: set[str] = set()

    def mapping(self, value: Any, *, skip: frozenset[str]) -> Any:
        """A dictionary with its keys and values redacted, but for the keys in ``skip``."""
        if not isinstance(value, dict):
            return self.value(value, None)
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key in skip:
                out[key] = item
            else:
                self.put(out, key, self.value(item, key))
        return out

    def step(self, value: dict[str, Any]) -> dict[str, Any]:
        """A step: all but its id and type, its tool object but the tool's name."""
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key in _STEP_EXEMPT:
                out[key] = item
            elif key == "tool" and isinstance(item, dict):
                out[key] = self.mapping(item, skip=_TOOL_EXEMPT)
            elif key == "latency_ms" and self._is_card(item):
                # The schema wants a number here: the card goes, no placeholder comes.
                self.counts["card"] += 1
                out[key] = None
            else:
                self.put(out, key, self.value(item, key))
        return out

    def put(self, out: dict[str, Any], key: str, value: Any) -> None:
        """``out[key] = value``, with ``key`` redacted; two keys redacted alike
        (``a@x.org``, ``b@y.org``) stay two (``[EMAIL]``, ``[EMAIL] (2)``)."""
        if key in self._clean_keys:  # the same few keys recur in every message
            out[key] = value
            return
        name = _redact_string(key, self.policy, self.counts)
        if name == key:
            self._clean_keys.add(key)
        else:
            base, n = name, 1
            while name in out:
                n += 1
                name = f"{base} ({n})"
        out[name] = value

    def value(self, value: Any, key: str | None) -> Any:
        if isinstance(value, str):
            return self._string(value, key)
        if isinstance(value, dict):
            return self.mapping(value, skip=_NOTHING)
        if isinstance(value, list):
            # Items of a list inherit its key: {"passwords": [...]} is judged by the name.
            return [self.value(item, key) for item in value]
        if self._is_card(value):
            self.counts["card"] += 1
            return "[CARD]"
        return value

    def _is_card(self, value: Any) -> bool:
        """An integer (or a float of one) whose digits are a card number."""
        if not self._cards or isinstance(value, bool):
            return False
        if isinstance(value, float):
            if not value.is_integer() or not 1e12 <= abs(value) < 1e19:
                return False
            value = int(value)
        return isinstance(value, int) and 10**12 <= value < 10**19 and is_card_number(str(value))

    def _string(self, text: str, key: str | None) -> str:
        redacted = _redact_string(text, self.policy, self.counts)
        if key is None or redacted != text or not text.strip() or _PLACEHOLDER.fullmatch(text):
            return redacted
        name = key.lower().replace("-", "_")
        if self._secret_fields and name in SECRET_FIELD_NAMES:
            self.counts["secret"] += 1
            return "[SECRET]"
        if self._birth_fields and name in BIRTH_FIELD_NAMES and DATE.fullmatch(text):
            self.counts["date_of_birth"] += 1
            return "[DATE_OF_BIRTH]"
        return text


def _redact_string(text: str, policy: RedactionPolicy, counts: Counter[str]) -> str:
    present = {trigger for trigger in policy.triggers if trigger in text}
    has_digits = _TWO_DIGITS.search(text) is not None
    if not present and not has_digits:
        return text
    for detector in policy.detectors:
        if detector.triggers:
            if present.isdisjoint(detector.triggers):
                continue
        elif not has_digits:
            continue
        text, found = detector.redact(text)
        if found:
            counts[detector.kind] += found
    return text
