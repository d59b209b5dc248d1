"""Replies made up locally (scripted test model, offline demo) and streamed like a real provider.

Both local models accept the same loose reply forms so that a test script and a demo policy read
alike: a string, a ``Reply``, a dict with the same fields, or a finished ``ModelResponse``.
Token counts are estimates (four characters a token): good enough for budgets and displays,
and deterministic.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Mapping

from roleplay.errors import RpError

from .types import (
    Completed,
    ModelRequest,
    ModelResponse,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    Usage,
    content_text,
)


@dataclass
class Reply:
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    reasoning: str | None = None
    finish_reason: str | None = None
    usage: Usage | None = None


def coerce_reply(value: Any, *, call_id_prefix: str) -> Reply:
    """Normalise one reply form; tool calls without ids get ``<prefix>_<n>``."""
    if isinstance(value, Reply):
        reply = Reply(value.text, list(value.tool_calls), value.reasoning, value.finish_reason, value.usage)
    elif isinstance(value, str):
        reply = Reply(text=value)
    elif isinstance(value, ModelResponse):
        reply = Reply(value.text, list(value.tool_calls), value.reasoning, value.finish_reason, value.usage)
    elif isinstance(value, Mapping):
        unknown = set(value) - {"text", "tool_calls", "reasoning", "finish_reason", "usage"}
        if unknown:
            raise RpError("model.bad_reply", f"unknown reply fields: {', '.join(sorted(unknown))}")
        reply = Reply(
            text=value.get("text", ""),
            tool_calls=list(value.get("tool_calls", [])),
            reasoning=value.get("reasoning"),
            finish_reason=value.get("finish_reason"),
            usage=value.get("usage"),
        )
    else:
        raise RpError("model.bad_reply", f"cannot use {type(value).__name__} as a model reply")
    if isinstance(reply.usage, Mapping):
        reply.usage = Usage(**reply.usage)
    reply.tool_calls = [_coerce_call(c, f"{call_id_prefix}_{i}") for i, c in enumerate(reply.tool_calls)]
    return reply


def _coerce_call(value: Any, default_id: str) -> ToolCall:
    if isinstance(value, ToolCall):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("name"), str):
        arguments = value.get("arguments", {})
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        return ToolCall(id=value.get("id") or default_id, name=value["name"], arguments=arguments)
    raise RpError("model.bad_reply", 'a scripted tool call needs at least {"name": ..., "arguments": ...}')


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def estimate_prompt_tokens(request: ModelRequest) -> int:
    total = 0
    for message in request.messages:
        total += 4 + estimate_tokens(content_text(message.content))
        total += sum(estimate_tokens(c.name + c.arguments) for c in message.tool_calls)
    for tool in request.tools:
        total += estimate_tokens(tool.name + tool.description + json.dumps(tool.parameters, sort_keys=True))
    return total


def split_chunks(text: str, pieces: int) -> list[str]:
    """Split at word boundaries into at most ``pieces`` non-empty chunks that join back exactly."""
    if not text:
        return []
    words = re.findall(r"\S+\s*|\s+", text)
    size = max(1, math.ceil(len(words) / max(1, pieces)))
    return ["".join(words[i : i + size]) for i in range(0, len(words), size)]


async def stream_reply(reply: Reply, request: ModelRequest, *, provider: str, model: str, pieces: int = 3) -> AsyncIterator[StreamEvent]:
    for chunk in split_chunks(reply.reasoning or "", pieces):
        yield ReasoningDelta(chunk)
    for chunk in split_chunks(reply.text, pieces):
        yield TextDelta(chunk)
    for index, call in enumerate(reply.tool_calls):
        # Two fragments per call, like real providers: id and name first, arguments split.
        half = len(call.arguments) // 2
        yield ToolCallDelta(index, call.id, call.name, call.arguments[:half])
        yield ToolCallDelta(index, None, None, call.arguments[half:])
    usage = reply.usage
    if usage is None:
        prompt = estimate_prompt_tokens(request)
        completion = estimate_tokens(reply.text + (reply.reasoning or "")) + sum(estimate_tokens(c.arguments) for c in reply.tool_calls)
        usage = Usage(prompt, completion, prompt + completion)
    yield Completed(
        ModelResponse(
            text=reply.text,
            reasoning=reply.reasoning,
            tool_calls=list(reply.tool_calls),
            usage=usage,
            finish_reason=reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop"),
            model=model,
            provider=provider,
        )
    )
