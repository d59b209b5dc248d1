"""``rp_run_subagent``: run one task sub-agent of the run's frozen catalog (Agent mode only).

Spec (Agent 模式, 系统提示词所有权): each call starts a *fresh* child session that inherits no
history. Its system prompt is the harness identity followed by the item's instructions verbatim
(no organisational shell, no runtime limits restated); its one user message is a single
``<task_input>`` holding the explicit ``task`` and the object ``input`` the parent passed, followed
by this turn's image blocks. Its tools are the item's allow-list intersected with the installed
tools, never the Writer, the commit, asset or State writes or another sub-agent (and the harness
refuses a spawn at depth ≥ 1 anyway); ``rp_asset_read`` and ``rp_state_read`` read the story it
works for (its bindings, its State), read-only. Each item runs on its own route (``provider/model[/effort]``)
or, without one, on the conversation's route.

**Input is an object.** The schema says so and the handler checks again (the tool validates its
own arguments so the refusal has its own code): a string that merely *holds* JSON is refused with
``subagent.input_not_object``, since the spec forbids re-encoded JSON.

**Outcome.** A success is ``tool/result.meta.kind = rp-agent/subagent-result`` with the child
session, route and text. Any failure (unknown or disabled name, a bad input, the child failing,
timing out, being aborted) is reported to ``on_outcome`` so the run blocks the steps that depend
on it (``core.agent_mode``), and comes back as an error result naming what is blocked.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from roleplay.errors import RpError
from roleplay.harness.models.routes import Route, parse_route_spec
from roleplay.harness.subagents import SubagentRequest
from roleplay.harness.tools import Tool, ToolContext, ToolOutput, ToolRegistry
from roleplay.names import (
    ASSET_READ_TOOL,
    ASSET_WRITE_TOOL,
    COMMIT_TURN_TOOL,
    RUN_SUBAGENT_TOOL,
    STATE_CONFIGURE_TOOL,
    STATE_READ_TOOL,
    SUBAGENT_RESULT_KIND,
    WRITE_TURN_TOOL,
)

from .prompts import safe_json
from .runtime import RoleplayRuntime
from .subagent_catalog import SubagentItem
from .subagent_run import result_reference, run_structured

SUBAGENT_PRESET = "rp-subagent"
SUBAGENT_TIMEOUT = 300.0
SUBAGENT_STEP_LIMIT = 8
MAX_TASK = 8_000
MAX_INPUT_CHARS = 60_000
# What no specialist may ever hold, whatever its allow-list says (spec: it cannot replace the
# Writer, deliver or commit the reply, touch State or shared assets, or start a sub-agent).
STORY_READ_TOOLS = frozenset({ASSET_READ_TOOL, STATE_READ_TOOL})
FORBIDDEN_TOOLS = frozenset({WRITE_TURN_TOOL, COMMIT_TURN_TOOL, ASSET_WRITE_TOOL, STATE_CONFIGURE_TOOL, RUN_SUBAGENT_TOOL})

GUIDANCE = """\
## rp_run_subagent

Runs one specialist of <specialist_catalog> as a fresh, isolated task: {"name": "<catalog name>", "task": "<what to do, explicitly>", "input": {…}}. input is a JSON object (never a JSON string); the specialist sees only task, input and this turn's images, so pass everything it needs. Its result is text for you to use as its usageContract says; it never reaches the user by itself. If it fails, the steps that depend on it are blocked: run it again or answer the user without them.\
"""

Outcome = Callable[[str, dict[str, Any] | None], None]  # (item name, error or None on success)


def task_input(task: str, value: dict[str, Any]) -> str:
    """The child's one user message: the explicit task and input, tag-safe JSON."""
    return f'<task_input format="json">{safe_json({"task": task, "input": value})}</task_input>'


def item_route(item: SubagentItem, conversation: Route) -> Route:
    """The item's own route (its reasoning effort included), else the conversation's."""
    if item.route is None:
        return conversation
    return parse_route_spec(item.route)


def item_tools(item: SubagentItem, installed: Sequence[str]) -> list[str]:
    have = set(installed)
    return [name for name in item.tools if name in have and name not in FORBIDDEN_TOOLS]


def specialist_registry(rt: RoleplayRuntime, names: Sequence[str], story_id: str) -> ToolRegistry:
    """The specialist's tools. The story's read tools read the *story* (its bindings, its State),
    not the specialist's own empty child session; they stay read-only (a child is never Agent)."""
    registry = ToolRegistry()
    for name in names:
        tool = rt.tools.get(name)
        if name in STORY_READ_TOOLS:
            tool = replace(tool, handler=_on_story(tool, story_id))
        registry.register(tool)
    return registry


def _on_story(tool: Tool, story_id: str) -> Any:
    async def handler(args: dict[str, Any], ctx: ToolContext) -> Any:
        value = tool.handler(args, replace(ctx, session_id=story_id))
        return await value if inspect.isawaitable(value) else value

    return handler


def subagent_tool(
    rt: RoleplayRuntime,
    items: Sequence[SubagentItem],
    *,
    conversation_route: Route,
    identity: str,
    images: Sequence[dict[str, Any]],
    on_outcome: Outcome,
) -> Tool:
    """The run's ``rp_run_subagent`` over its frozen enabled ``items`` (disabled ones never get here)."""
    by_name = {item.name: item for item in items}

    def check(args: dict[str, Any]) -> tuple[SubagentItem, str, dict[str, Any]]:
        extra = sorted(set(args) - {"name", "task", "input"})
        if extra:
            raise RpError("subagent.invalid_arguments", f"unknown argument {extra[0]!r}; send name, task and input", pointer=f"/{extra[0]}")
        name = args.get("name")
        item = by_name.get(name) if isinstance(name, str) else None
        if item is None:
            known = ", ".join(by_name) or "none"
            raise RpError(
                "subagent.unknown", f"no enabled specialist named {name!r} in this run's catalog (enabled: {known})", pointer="/name"
            )
        task = args.get("task")
        if not isinstance(task, str) or not task.strip() or len(task) > MAX_TASK:
            raise RpError("subagent.invalid_task", f"task must be a non-empty string of at most {MAX_TASK} characters", pointer="/task")
        value = args.get("input")
        if isinstance(value, str):
            try:
                json.loads(value)
                what = "a JSON string"
            except ValueError:
                what = "a string"
            raise RpError(
                "subagent.input_not_object", f"input must be a JSON object itself, not {what}; pass the object directly", pointer="/input"
            )
        if not isinstance(value, dict):
            raise RpError("subagent.input_not_object", "input must be a JSON object", pointer="/input")
        if len(safe_json(value)) > MAX_INPUT_CHARS:
            raise RpError("subagent.input_too_large", f"input must stay under {MAX_INPUT_CHARS} characters of JSON", pointer="/input")
        return item, task.strip(), value

    async def handler(args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        # A malformed call starts nothing and blocks nothing: the parent just calls again.
        item, task, value = check(args)
        name = item.name
        try:
            route = item_route(item, conversation_route)
            request = SubagentRequest(
                preset=SUBAGENT_PRESET,
                system_prompt=f"{identity}\n\n{item.instructions}",
                user_text=task_input(task, value),
                images=list(images),
                tools=item_tools(item, rt.tools.names()),
                timeout=SUBAGENT_TIMEOUT,
                step_limit=SUBAGENT_STEP_LIMIT,
                title=item.name,
                reasoning_effort=route.reasoning_effort,
            )
            result = await run_structured(
                rt.service,
                ctx.session_id,
                request,
                model=rt.model_for(route),
                tools=specialist_registry(rt, request.tools, ctx.session_id),
                abort=ctx.abort,
                depth=ctx.depth,
            )
            text = result.text.strip()
            if not text:
                raise RpError("subagent.empty", f"specialist {item.name!r} returned nothing", details={"childSessionId": result.session_id})
        except RpError as exc:
            error = {"code": exc.code, "message": exc.message, **({"details": exc.details} if exc.details else {})}
            on_outcome(name, error)
            raise RpError(
                exc.code,
                f"specialist {name!r} failed: {exc.message}. The steps that depend on it are blocked (rp_write_turn and "
                "rp_commit_turn refuse until it succeeds): run it again, or answer the user without writing.",
                pointer=exc.pointer,
                details={**exc.details, "subagent": name},
            ) from None
        on_outcome(name, None)
        meta = {"kind": SUBAGENT_RESULT_KIND, "name": item.name, "route": route.to_dict(), "text": text, **result_reference(result)}
        return ToolOutput(f'<subagent_result name="{item.name}">\n{text}\n</subagent_result>', meta=meta)

    names = list(by_name)
    return Tool(
        RUN_SUBAGENT_TOOL,
        "Run one specialist of this turn's <specialist_catalog> as a fresh isolated task with an explicit task and a JSON object input.",
        {
            "type": "object",
            "properties": {
                "name": {"type": "string", "enum": names} if names else {"type": "string"},
                "task": {"type": "string", "minLength": 1, "maxLength": MAX_TASK},
                "input": {"type": "object", "description": "a JSON object, never a JSON-encoded string"},
            },
            "required": ["name", "task", "input"],
            "additionalProperties": False,
        },
        handler,
        guidance=GUIDANCE,
        timeout=SUBAGENT_TIMEOUT + 30,
        spawns_subagent=True,
        self_validating=True,
    )


__all__ = ["FORBIDDEN_TOOLS", "specialist_registry", "SUBAGENT_PRESET", "item_route", "item_tools", "subagent_tool", "task_input"]
