"""Translation between our neutral types and the OpenAI Chat Completions wire format.

Pure functions over plain dicts so they can be tested without a server and reused by anything
that speaks the same format (the fake server included). Provider differences enter only through
``Capabilities``.
"""

from __future__ import annotations

from typing import Any, Mapping

from roleplay.errors import RpError

from .types import Capabilities, ChatMessage, ToolChoice, ToolSpec, Usage, content_text


def messages_to_wire(messages: list[ChatMessage], caps: Capabilities) -> list[dict[str, Any]]:
    return [_message_to_wire(m, i, caps) for i, m in enumerate(messages)]


def _message_to_wire(message: ChatMessage, index: int, caps: Capabilities) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role}
    if message.role == "user":
        out["content"] = _user_content(message.content, index, caps)
    elif message.role == "assistant" and message.tool_calls and not content_text(message.content):
        # The SDK and OpenAI use null content for a pure tool-call turn.
        out["content"] = None
    else:
        # Only user messages may carry images; everything else is sent as one string because many
        # OpenAI-compatible servers reject block arrays on system/assistant/tool messages.
        if isinstance(message.content, list) and any(b.get("type") != "text" for b in message.content):
            raise RpError(
                "model.bad_message",
                f"only user messages may carry images (message {index} is {message.role})",
                pointer=f"/messages/{index}/content",
            )
        out["content"] = content_text(message.content)
    if message.name is not None and message.role in ("system", "user", "assistant"):
        out["name"] = message.name
    if message.role == "assistant":
        if message.tool_calls:
            out["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in message.tool_calls
            ]
            if caps.requires_reasoning_on_tool_turns:
                # DeepSeek thinking mode: the field must be present on tool-call turns, even empty,
                # in every later request, or the API answers 400.
                out[caps.reasoning_field] = message.reasoning or ""
    if message.role == "tool":
        if not message.tool_call_id:
            raise RpError(
                "model.bad_message",
                f"tool message {index} has no tool_call_id",
                pointer=f"/messages/{index}/tool_call_id",
            )
        out["tool_call_id"] = message.tool_call_id
    return out


def _user_content(content: str | list[dict[str, Any]], index: int, caps: Capabilities) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    if all(b.get("type") == "text" for b in content):
        return content_text(content)
    parts: list[dict[str, Any]] = []
    for j, block in enumerate(content):
        kind = block.get("type")
        if kind == "text":
            parts.append({"type": "text", "text": block.get("text", "")})
        elif kind == "image":
            if not caps.supports_images:
                raise RpError(
                    "model.images_unsupported",
                    "this model does not accept images; remove them or choose a model that does",
                    pointer=f"/messages/{index}/content/{j}",
                )
            media_type = block.get("mediaType")
            data = block.get("data")
            if not isinstance(media_type, str) or not media_type.startswith("image/") or not isinstance(data, str):
                raise RpError(
                    "model.bad_message",
                    "an image block needs mediaType image/* and base64 data",
                    pointer=f"/messages/{index}/content/{j}",
                )
            parts.append({"type": "image_url", "image_url": {"url": f"data:{media_type};base64,{data}"}})
        else:
            raise RpError(
                "model.bad_message",
                f"unknown content block type {kind!r}",
                pointer=f"/messages/{index}/content/{j}/type",
            )
    return parts


def tools_to_wire(tools: list[ToolSpec], caps: Capabilities) -> list[dict[str, Any]]:
    out = []
    for tool in tools:
        parameters = declared_parameters(tool.parameters, caps)
        function: dict[str, Any] = {"name": tool.name, "description": tool.description, "parameters": parameters}
        if tool.strict and caps.supports_strict_tools:
            function["strict"] = True
        out.append({"type": "function", "function": function})
    return out


ROOT_COMBINATORS = ("oneOf", "anyOf", "allOf", "enum", "not")


def declared_parameters(schema: dict[str, Any], caps: Capabilities) -> dict[str, Any]:
    """``schema`` as this provider accepts it in a function declaration.

    Providers without ``accepts_root_combinators`` get one object in place of a root union: the
    properties of every branch, the members every branch requires, closed when every branch is
    closed, and the alternatives spelled out in the description. It never refuses an instance the
    union accepts, so the model can always send a valid call; the tool keeps validating against
    the full schema, which is what decides.
    """
    if caps.accepts_root_combinators or (schema.get("type") == "object" and not any(k in schema for k in ROOT_COMBINATORS)):
        return schema
    return _as_object(schema)


def _as_object(schema: dict[str, Any]) -> dict[str, Any]:
    own = {k: v for k, v in schema.items() if k not in ROOT_COMBINATORS}
    own["type"] = "object"
    # ``allOf``: every part holds. ``oneOf``/``anyOf``: one (at least one) branch holds.
    parts = [own, *(_as_object(p) for p in schema.get("allOf") or [] if _objectish(p))]
    notes = []
    for keyword in ("oneOf", "anyOf"):
        branches = [_as_object(b) for b in schema.get(keyword) or [] if _objectish(b)]
        if branches:
            parts.append(_either(branches))
            notes.append(_alternatives(branches, exactly=keyword == "oneOf"))
    merged = parts[0]
    for part in parts[1:]:
        merged = _both(merged, part)
    if notes:
        merged["description"] = " ".join([str(schema["description"]), *notes] if "description" in schema else notes)
    return merged


def _objectish(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("type", "object") == "object"


def _closed(schema: dict[str, Any]) -> bool:
    return schema.get("additionalProperties") is False


def _both(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """One object declaration for ``a`` and ``b`` holding together."""
    out = {
        **{k: v for k, v in b.items() if k not in ("properties", "required")},
        **{k: v for k, v in a.items() if k not in ("properties", "required")},
    }
    properties = dict(a.get("properties") or {})
    for key, sub in (b.get("properties") or {}).items():
        properties[key] = sub if key not in properties or properties[key] == sub else {"allOf": [properties[key], sub]}
    if properties:
        out["properties"] = properties
    required = list(dict.fromkeys([*(a.get("required") or []), *(b.get("required") or [])]))
    if required:
        out["required"] = required
    # Both parts' properties are declared, so one closed part closes the whole.
    out.pop("additionalProperties", None)
    if _closed(a) or _closed(b):
        out["additionalProperties"] = False
    return out


def _either(branches: list[dict[str, Any]]) -> dict[str, Any]:
    """One object declaration admitting whatever any of ``branches`` admits."""
    keys = list(dict.fromkeys(k for b in branches for k in b.get("properties") or {}))
    properties: dict[str, Any] = {}
    for key in keys:
        options: list[Any] = []
        for branch in branches:
            sub = (branch.get("properties") or {}).get(key)
            if sub is None and not _closed(branch):
                # This branch admits the key as an extra member, with any value it allows there.
                extra = branch.get("additionalProperties", True)
                sub = extra if isinstance(extra, dict) else {}
            if sub is not None and sub not in options:
                options.append(sub)
        properties[key] = options[0] if len(options) == 1 else ({} if {} in options else {"anyOf": options})
    out: dict[str, Any] = {"type": "object", "properties": properties}
    required = [k for k in branches[0].get("required") or [] if all(k in (b.get("required") or []) for b in branches[1:])]
    if required:
        out["required"] = required
    if all(_closed(b) for b in branches):
        out["additionalProperties"] = False
    return out


def _alternatives(branches: list[dict[str, Any]], *, exactly: bool) -> str:
    forms = []
    for i, branch in enumerate(branches, 1):
        text = str(branch.get("description") or "").rstrip(".")
        required = ", ".join(branch.get("required") or [])
        forms.append(f"({i}) {text}" + (f" [requires: {required}]" if required else ""))
    head = "Send exactly one of these forms" if exactly else "Send at least one of these forms"
    return f"{head}: {'; '.join(forms)}."


def tool_choice_to_wire(choice: ToolChoice) -> str | dict[str, Any]:
    if isinstance(choice, dict):
        return {"type": "function", "function": {"name": choice["name"]}}
    return choice


def usage_from_wire(usage: Mapping[str, Any] | None) -> Usage | None:
    """Read a usage object; DeepSeek and OpenAI report cache use differently."""
    if not usage:
        return None
    prompt = int(usage.get("prompt_tokens") or 0)
    completion = int(usage.get("completion_tokens") or 0)
    total = int(usage.get("total_tokens") or prompt + completion)
    hit = usage.get("prompt_cache_hit_tokens")
    miss = usage.get("prompt_cache_miss_tokens")
    details = usage.get("prompt_tokens_details") or {}
    if hit is None and isinstance(details, Mapping) and details.get("cached_tokens") is not None:
        hit = details["cached_tokens"]
        miss = prompt - int(hit)
    completion_details = usage.get("completion_tokens_details") or {}
    reasoning = completion_details.get("reasoning_tokens") if isinstance(completion_details, Mapping) else None
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=total,
        cache_hit_tokens=None if hit is None else int(hit),
        cache_miss_tokens=None if miss is None else int(miss),
        reasoning_tokens=None if reasoning is None else int(reasoning),
    )
