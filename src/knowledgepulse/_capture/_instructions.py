"""Adding recalled worked examples to a model call's instructions, per client."""

from __future__ import annotations

from typing import Any

__all__ = ["first_user_text", "with_instructions"]


def with_instructions(provider: str, request: dict[str, Any], block: str) -> dict[str, Any]:
    """A copy of ``request`` whose instructions end with ``block``: the leading system (or
    developer) message of a Chat Completions request, extended or added; Anthropic's
    ``system``, extended or set."""
    if provider == "anthropic":
        system = request.get("system")
        if isinstance(system, list):
            return {**request, "system": [*system, {"type": "text", "text": block}]}
        joined = f"{system}\n\n{block}" if isinstance(system, str) and system else block
        return {**request, "system": joined}
    messages = list(request.get("messages") or [])
    first = messages[0] if messages else None
    if isinstance(first, dict) and first.get("role") in ("system", "developer"):
        content = first.get("content")
        if isinstance(content, list):
            content = [*content, {"type": "text", "text": block}]
        else:
            content = f"{content}\n\n{block}" if content else block
        messages[0] = {**first, "content": content}
    else:
        messages.insert(0, {"role": "system", "content": block})
    return {**request, "messages": messages}


def first_user_text(request: dict[str, Any]) -> str | None:
    """The text of the request's first user message, if any."""
    for message in request.get("messages") or []:
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            texts = [
                part.get("text", "")
                for part in content
                if isinstance(part, dict) and part.get("type") == "text"
            ]
            return " ".join(t for t in texts if t) or None
    return None
