"""Model-facing State tools: read-only ``rp_state_read`` and the Agent-only ``rp_state``.

``state_tools(service)`` builds both as harness ``Tool`` objects and wires what they need into the
service (the ``rp-state-configure`` handler and the ``rp/state`` projections; both idempotent).
Which run may *offer* ``rp_state`` is the caller's allow-list: the spec makes it Agent-only
("Agent-only ``rp_state``"), so a Chat-mode run must leave it out; :data:`AGENT_ONLY_TOOLS` names it.

``rp_state`` never writes state directly. It plans the configuration, derives the assistant-tool
owner from the ``ToolContext`` (turn, step, call id) and the call index the ``rp/state`` fold keeps
(the assistant message whose ``toolCalls`` hold this call, and the native ``tool/call``), checks
that owner exactly as the fold will, then runs ``rp-state-configure`` as a CAS append at the head
it planned against. A concurrent append makes it re-plan (a few times) instead of recording a plan
made against a stale state.
"""

from __future__ import annotations

import json
from typing import Any

from roleplay.errors import ConflictError, Problem, RpError, ValidationError
from roleplay.harness.sessions import SessionService
from roleplay.harness.tools import Tool, ToolContext, ToolOutput
from roleplay.names import STATE_CONFIGURE_KIND, STATE_CONFIGURE_STATE, STATE_READ_TOOL
from roleplay.state.commands import configure_args, register_state_commands
from roleplay.state.config import ACTIONS, plan_config
from roleplay.state.definition import DEFAULT_NAMESPACE
from roleplay.state.events import CONFIGURE, STATE_TOOL, activity_projection, resolve_owner, state_document, state_projection
from roleplay.state.pointers import MISSING, PointerError, lookup, parse_pointer

READ_TOOL = STATE_READ_TOOL
AGENT_ONLY_TOOLS = frozenset({STATE_TOOL})
CONFIGURE_ATTEMPTS = 5
READ_VIEWS = ("namespaces", "values", "definitions", "value")

READ_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "view": {
            "type": "string",
            "enum": list(READ_VIEWS),
            "description": "namespaces (default): names, titles, modes, revisions; values; definitions; value: one JSON Pointer read",
        },
        "namespace": {"type": "string", "description": "limit to one namespace (for view=value: default 'story')"},
        "pointer": {
            "type": "string",
            "description": "JSON Pointer inside the namespace value, e.g. /characters/李钰/好感度; implies view=value",
        },
    },
    "additionalProperties": False,
}

STATE_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": list(ACTIONS)},
        "namespace": {"type": "string", "description": "default 'story'"},
        "expectedRevision": {"type": "integer", "minimum": 0, "description": "current namespace revision; 0 for create"},
        "definition": {"type": "object", "description": "complete definition: title, description?, updateMode, schema, rules"},
        "initialValue": {"description": "reset baseline (create: required)"},
        "value": {"description": "current value (update: optional replacement)"},
    },
    "required": ["action", "expectedRevision"],
    "additionalProperties": False,
}

STATE_GUIDANCE = (
    "rp_state changes the State configuration (create, update, reset, delete a namespace). Use it only "
    "after the user explicitly asks to configure variables; story changes go through the turn commit. "
    "Read the current revision with rp_state_read first. The change takes effect at once and belongs to "
    "this reply: deleting or regenerating the reply undoes it, editing its text keeps it."
)


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _with_problems(exc: ValidationError, prefix: str = "") -> ValidationError:
    """Tool results keep code, message, pointer and details: carry every problem in details and
    point at the first one."""
    problems = [Problem(p.code, p.message, prefix + (p.pointer or ""), p.details) for p in exc.problems]
    pointer = problems[0].pointer if problems else exc.pointer
    details = {**exc.details, "problems": [p.to_dict() for p in problems]} if problems else exc.details
    return ValidationError(exc.code, exc.message, pointer=pointer, details=details, problems=problems)


# -- rp_state_read -------------------------------------------------------------------------------


def read_state(document: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """The answer of ``rp_state_read`` for ``args`` against an ``rp.state`` document."""
    namespaces = document["namespaces"]
    view = "value" if "pointer" in args else args.get("view", "namespaces")
    name = args.get("namespace", DEFAULT_NAMESPACE if view == "value" else None)
    if name is not None and name not in namespaces:
        known = ", ".join(namespaces) or "none"
        raise ValidationError("state.read.namespace_unknown", f"no namespace {name!r} (known: {known})", pointer="/namespace")
    picked = {name: namespaces[name]} if name is not None else namespaces
    out: dict[str, Any] = {"revision": document["revision"]}
    if view == "namespaces":
        out["namespaces"] = {
            n: {
                "title": e["definition"].get("title"),
                **({"description": e["definition"]["description"]} if "description" in e["definition"] else {}),
                "updateMode": e["definition"].get("updateMode"),
                "revision": e["revision"],
            }
            for n, e in picked.items()
        }
    elif view == "values":
        out["values"] = {n: e["value"] for n, e in picked.items()}
    elif view == "definitions":
        out["definitions"] = {n: e["definition"] for n, e in picked.items()}
    else:
        pointer = args.get("pointer", "")
        try:
            parts = parse_pointer(pointer)
        except PointerError as exc:
            raise ValidationError("state.read.pointer_invalid", str(exc), pointer="/pointer") from None
        found = lookup(namespaces[name]["value"], parts)
        if found is MISSING:
            raise ValidationError("state.read.path_missing", f"nothing at {pointer!r} in namespace {name!r}", pointer="/pointer")
        out.update({"namespace": name, "namespaceRevision": namespaces[name]["revision"], "pointer": pointer, "value": found})
    return out


def read_tool(service: SessionService) -> Tool:
    async def handle(args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        loaded = await service.projection(ctx.session_id, state_projection)
        return ToolOutput(_dump(read_state(state_document(loaded.state), args)))

    return Tool(
        READ_TOOL,
        "Read the session's story State (rp.state v2): namespaces, values, definitions, or one value by JSON Pointer. Read-only.",
        READ_PARAMETERS,
        handle,
    )


# -- rp_state ------------------------------------------------------------------------------------


def state_tool(service: SessionService) -> Tool:
    async def handle(args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        if not ctx.turn_id or not ctx.step_id:
            raise RpError("state.config.no_owner", "rp_state only runs inside an agent turn step (it is owned by the calling reply)")
        for _ in range(CONFIGURE_ATTEMPTS):
            loaded = await service.projection(ctx.session_id, state_projection)
            tracker = loaded.state
            call = tracker["folder"]["calls"].get(ctx.call_id)
            if call is None:
                raise RpError("state.config.no_owner", f"no assistant message in the log made tool call {ctx.call_id!r}")
            owner = {
                "messageId": call["messageId"],
                "toolCallId": ctx.call_id,
                "turnId": ctx.turn_id,
                "stepId": ctx.step_id,
                "tool": STATE_TOOL,
            }
            _, problem = resolve_owner(tracker["folder"], owner)
            if problem is not None:
                raise RpError("state.config.owner_inconsistent", problem[1], pointer=problem[0])
            document = state_document(tracker)
            try:
                planned = plan_config(document, args)
            except ValidationError as exc:
                raise _with_problems(exc) from None
            try:
                outcome = await service.run_command(
                    ctx.session_id,
                    CONFIGURE,
                    configure_args(args, planned, owner),
                    expected_seq=loaded.upto_seq,
                    state={STATE_CONFIGURE_STATE: document},
                )
            except ConflictError:
                continue  # something was appended since we planned: plan again on the new head
            if not outcome.ok:
                err = outcome.error or {}
                raise RpError(
                    err.get("code", "state.config.rejected"),
                    err.get("message", "rejected"),
                    pointer=err.get("pointer"),
                    details=err.get("details"),
                )
            summary = {"ok": True, **outcome.result, "commandId": outcome.command_id}
            return ToolOutput(_dump(summary), meta={"kind": STATE_CONFIGURE_KIND, **summary})
        raise RpError("state.config.contended", f"the session kept changing; gave up after {CONFIGURE_ATTEMPTS} attempts")

    return Tool(
        STATE_TOOL,
        "Configure story State namespaces (create, update, reset, delete). Agent mode only, on an explicit user request.",
        STATE_PARAMETERS,
        handle,
        guidance=STATE_GUIDANCE,
    )


def state_tools(service: SessionService) -> list[Tool]:
    """``[rp_state_read, rp_state]`` bound to ``service``, with the command and projections wired."""
    register_state_commands(service.commands)
    for projection in (state_projection, activity_projection):
        if projection.name not in service.projections.names():
            service.projections.register(projection)
    return [read_tool(service), state_tool(service)]
