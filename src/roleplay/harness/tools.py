"""Tools: static registration, argument validation, execution with stable error codes.

A tool is registered once with a JSON Schema (Draft 2020-12) for its arguments. Before a handler
runs, the raw argument text the model produced is parsed as JSON and validated against that
schema; every failure becomes a ``tool/result`` with ``ok: false`` and a stable code, so the model
(and a test) can tell *why* a call failed:

==========================  =====================================================
``tool.unknown``            no tool by that name is registered
``tool.not_available``      registered, but not visible to this run or masked in this step
``tool.invalid_json``       the argument text is not a JSON object
``tool.invalid_arguments``  schema violation (``pointer`` names the first offending field)
``tool.timeout``            the handler ran past its time limit
``tool.failed``             the handler raised something other than ``RpError``
(handler's own code)        the handler raised ``RpError``: its code passes through
==========================  =====================================================

Oversized results are trimmed to ``max_result_chars`` with a visible marker, and the result's
``meta.trimmed`` says how much was cut: the model must know it did not see everything.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Iterable

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from roleplay.errors import NotFoundError, Problem, RpError, ValidationError, pointer_from_parts

from .models.types import ToolCall, ToolSpec

TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
DEFAULT_MAX_RESULT_CHARS = 50_000
TRIM_MARKER = "\n[… {cut} characters trimmed from this tool result …]\n"


@dataclass
class ToolContext:
    """What a handler may know about the call it serves."""

    session_id: str
    turn_id: str | None
    step_id: str | None
    call_id: str
    depth: int = 0  # 0 for a top-level run, 1 inside a sub-agent: spawning tools refuse at depth ≥ 1
    abort: asyncio.Event | None = None
    # What the run lends its tools (``AgentSpec.deps``), opaque to the harness: a roleplay run puts
    # its typed dependencies here and its tools narrow them; ``rp chat`` has none.
    deps: object = None


@dataclass(frozen=True)
class ToolOutput:
    content: str | list[dict[str, Any]]
    meta: dict[str, Any] | None = None


Handler = Callable[[dict[str, Any], ToolContext], "ToolOutput | str | Awaitable[ToolOutput | str]"]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    handler: Handler
    strict: bool = False
    guidance: str | None = None  # becomes the prompt section ``tool:<name>`` while visible
    timeout: float | None = None
    max_result_chars: int = DEFAULT_MAX_RESULT_CHARS
    spawns_subagent: bool = False  # never offered inside a sub-agent (no recursion)
    # The handler validates its own arguments against ``parameters`` (after the registry checked
    # that they are a JSON object). For tools that must run a dry-run precheck and report domain
    # problems even when the schema fails (``rp_commit_turn``); the schema is still what the
    # model is offered.
    self_validating: bool = False

    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.parameters, self.strict)


@dataclass(frozen=True)
class ToolResultData:
    """What becomes a ``tool/result`` event payload."""

    call_id: str
    name: str
    ok: bool
    content: str | list[dict[str, Any]]
    error: dict[str, Any] | None = None
    meta: dict[str, Any] | None = None

    def payload(self) -> dict[str, Any]:
        out: dict[str, Any] = {"callId": self.call_id, "name": self.name, "ok": self.ok, "content": self.content}
        if self.error is not None:
            out["error"] = self.error
        if self.meta is not None:
            out["meta"] = self.meta
        return out


class ToolRegistry:
    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._validators: dict[str, Draft202012Validator] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        if not TOOL_NAME.match(tool.name):
            raise ValidationError(
                "tool.invalid_name", f"tool name {tool.name!r} must be 1-64 characters of A-Z a-z 0-9 _ -", pointer="/name"
            )
        if tool.name in self._tools:
            raise ValidationError("tool.duplicate", f"tool {tool.name!r} is already registered", pointer="/name")
        try:
            Draft202012Validator.check_schema(tool.parameters)
        except SchemaError as exc:
            raise ValidationError(
                "tool.invalid_schema",
                f"tool {tool.name!r} has an invalid parameter schema: {exc.message}",
                pointer="/parameters" + pointer_from_parts(list(exc.path)),
            ) from None
        if tool.parameters.get("type") != "object":
            raise ValidationError(
                "tool.invalid_schema", f"tool {tool.name!r} parameters must be an object schema", pointer="/parameters/type"
            )
        self._tools[tool.name] = tool
        self._validators[tool.name] = Draft202012Validator(tool.parameters)

    def get(self, name: str) -> Tool:
        try:
            return self._tools[name]
        except KeyError:
            raise NotFoundError("tool.unknown", f"no tool named {name!r}") from None

    def names(self) -> list[str]:
        return sorted(self._tools)

    def __contains__(self, name: str) -> bool:
        return name in self._tools

    def visible(self, allowed: Iterable[str] | None = None, *, depth: int = 0) -> list[Tool]:
        """Tools a run may offer: the allow-list ∩ the registered tools, in registration order.
        ``None`` allows every tool. Inside a sub-agent (depth ≥ 1), spawning tools are removed."""
        allow = None if allowed is None else set(allowed)
        return [t for t in self._tools.values() if (allow is None or t.name in allow) and not (depth >= 1 and t.spawns_subagent)]

    def validate(self, name: str, raw_arguments: str) -> dict[str, Any]:
        """Parse and validate; raise ``tool.invalid_json`` / ``tool.invalid_arguments``."""
        tool = self.get(name)
        try:
            args = json.loads(raw_arguments) if raw_arguments.strip() else {}
        except (ValueError, RecursionError) as exc:
            raise ValidationError("tool.invalid_json", f"arguments are not valid JSON: {exc}", pointer="") from None
        if not isinstance(args, dict):
            raise ValidationError("tool.invalid_json", "arguments must be a JSON object", pointer="")
        if tool.self_validating:
            return args
        errors = sorted(self._validators[name].iter_errors(args), key=lambda e: (list(e.absolute_path), e.message))
        if errors:
            problems = [_problem(e) for e in errors]
            raise ValidationError(
                "tool.invalid_arguments",
                f"invalid arguments for {name}: {problems[0].message}",
                pointer=problems[0].pointer,
                problems=problems,
            )
        return args

    async def execute(self, call: ToolCall, ctx: ToolContext, *, visible: Iterable[str] | None = None) -> ToolResultData:
        """Run one call. Never raises for the call's own failures: they become error results.
        ``asyncio.CancelledError`` (an abort) is the one exception that propagates."""
        try:
            tool = self.get(call.name)
            if visible is not None and call.name not in set(visible):
                raise RpError("tool.not_available", f"tool {call.name!r} is not available in this step")
            args = self.validate(call.name, call.arguments)
            output = await _invoke(tool, args, ctx)
        except RpError as exc:
            return ToolResultData(call.id, call.name, False, f"Error [{exc.code}]: {exc.message}", error=_error_dict(exc))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a handler bug must not kill the turn
            err = RpError("tool.failed", f"tool {call.name!r} failed: {type(exc).__name__}: {exc}")
            return ToolResultData(call.id, call.name, False, f"Error [{err.code}]: {err.message}", error=_error_dict(err))
        content, trimmed = trim(output.content, tool.max_result_chars)
        meta = dict(output.meta) if output.meta else None
        if trimmed:
            meta = {**(meta or {}), "trimmed": trimmed}
        return ToolResultData(call.id, call.name, True, content, meta=meta)


async def _invoke(tool: Tool, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
    async def call() -> Any:
        value = tool.handler(args, ctx)
        return await value if inspect.isawaitable(value) else value

    try:
        value = await (asyncio.wait_for(call(), tool.timeout) if tool.timeout else call())
    except asyncio.TimeoutError:
        raise RpError("tool.timeout", f"tool {tool.name!r} did not finish within {tool.timeout:g}s") from None
    if isinstance(value, ToolOutput):
        return value
    if isinstance(value, str):
        return ToolOutput(value)
    if isinstance(value, (dict, list)):
        return ToolOutput(json.dumps(value, ensure_ascii=False))
    raise RpError("tool.failed", f"tool {tool.name!r} returned {type(value).__name__}, not text or ToolOutput")


def trim(content: str | list[dict[str, Any]], limit: int) -> tuple[str | list[dict[str, Any]], int]:
    """Cut text content to ``limit`` characters, keeping head and tail around a marker."""
    if isinstance(content, str):
        if len(content) <= limit:
            return content, 0
        cut = len(content) - limit
        head = limit * 3 // 4
        return content[:head] + TRIM_MARKER.format(cut=cut) + content[len(content) - (limit - head) :], cut
    total, out, cut = 0, [], 0
    for block in content:
        if block.get("type") == "text":
            text = block.get("text", "")
            room = max(0, limit - total)
            if len(text) > room:
                cut += len(text) - room
                text = text[:room] + TRIM_MARKER.format(cut=len(block.get("text", "")) - room)
            total += len(text)
            out.append({**block, "text": text})
        else:
            out.append(block)
    return out, cut


def _problem(err: Any) -> Problem:
    path = list(err.absolute_path)
    if err.validator == "required":
        missing = err.message.split("'")[1] if "'" in err.message else ""
        path = path + [missing] if missing else path
    elif err.validator == "additionalProperties":
        allowed = set(err.schema.get("properties", {}))
        extra = sorted(k for k in err.instance if k not in allowed) if isinstance(err.instance, dict) else []
        path = path + extra[:1]
    return Problem("tool.invalid_arguments", err.message, pointer=pointer_from_parts(path))


def _error_dict(exc: RpError) -> dict[str, Any]:
    out: dict[str, Any] = {"code": exc.code, "message": exc.message}
    if exc.pointer is not None:
        out["pointer"] = exc.pointer
    if exc.details:
        out["details"] = exc.details
    if exc.problems:
        out["problems"] = [p.to_dict() for p in exc.problems]
    return out
