"""The ``rp-state-configure`` command: the only durable carrier of explicit State configuration.

Args (v3, the spec's "v3 命令参数保存规范化输入、最终 canonical result，以及 … assistant-tool owner")::

    {"v": 3,
     "input":  {"action": "create" | "update" | "reset" | "delete", "namespace"?, "expectedRevision", …},
     "result": <plan_config(projection, input)>,
     "owner":  {"messageId", "toolCallId", "turnId", "stepId", "tool": "rp_state"}}

The handler re-plans ``input`` against the current projection (``ctx.state["rpState"]``, the
``rp.state`` document) and insists that the stored ``result`` is exactly that plan: the fold
installs ``result`` verbatim, so a result that does not follow from its input must never be
recorded as a success. Rejections raise :class:`RpError`, which the harness records as
``command/done {kind: "error"}``; such a command never counts. Owner consistency against the log
is checked by the fold (:func:`roleplay.state.events.resolve_owner`), which sees the log; the
handler only checks the owner's shape.

Register with ``register_state_commands(registry)`` and run through
``SessionService.run_command(session_id, "rp-state-configure", args, state={"rpState": doc})``.
"""

from __future__ import annotations

from typing import Any, Mapping, NoReturn

from roleplay.canonical import canonical_json
from roleplay.errors import Problem, RpError, ValidationError
from roleplay.harness.commands import CommandContext, CommandRegistry
from roleplay.names import STATE_CONFIGURE_STATE
from roleplay.state.config import plan_config
from roleplay.state.events import CONFIGURE, CONFIGURE_VERSION, STATE_TOOL

OWNER_FIELDS = ("messageId", "toolCallId", "turnId", "stepId", "tool")
ARG_FIELDS = ("v", "input", "result", "owner")


def configure_args(command: Mapping[str, Any], result: Mapping[str, Any], owner: Mapping[str, Any]) -> dict[str, Any]:
    """The v3 args for a planned configuration."""
    return {"v": CONFIGURE_VERSION, "input": dict(command), "result": dict(result), "owner": dict(owner)}


def _shape_problems(args: Mapping[str, Any]) -> list[Problem]:
    problems = [Problem("state.config.args_unknown", f"unknown argument {k!r}", f"/{k}") for k in sorted(args) if k not in ARG_FIELDS]
    if args.get("v") != CONFIGURE_VERSION:
        problems.append(Problem("state.config.unsupported_version", f"{CONFIGURE} takes v {CONFIGURE_VERSION}", "/v"))
    for key in ("input", "result", "owner"):
        if not isinstance(args.get(key), dict):
            problems.append(Problem("state.config.args_invalid", f"{key!r} must be an object", f"/{key}"))
    owner = args.get("owner")
    if isinstance(owner, dict):
        for key in OWNER_FIELDS:
            if not isinstance(owner.get(key), str) or not owner[key]:
                problems.append(Problem("state.config.owner_invalid", f"owner.{key} must be a non-empty string", f"/owner/{key}"))
        if owner.get("tool") not in (None, STATE_TOOL) and isinstance(owner.get("tool"), str):
            problems.append(Problem("state.config.owner_invalid", f"owner.tool must be {STATE_TOOL!r}", "/owner/tool"))
        problems.extend(
            Problem("state.config.owner_invalid", f"unknown owner field {k!r}", f"/owner/{k}")
            for k in sorted(owner)
            if k not in OWNER_FIELDS
        )
    return problems


def _raise(code: str, message: str, problems: list[Problem]) -> NoReturn:
    # The harness keeps code, message, pointer and details of a failed command; the full problem
    # list travels in details so that every independent problem reaches the caller at once.
    raise ValidationError(
        code, message, pointer=problems[0].pointer, details={"problems": [p.to_dict() for p in problems]}, problems=problems
    )


def configure_handler(args: dict[str, Any], ctx: CommandContext) -> dict[str, Any]:
    """Validate one ``rp-state-configure``; return ``{action, namespace, revision}`` (revision is
    the namespace revision after the change, None for delete)."""
    problems = _shape_problems(args)
    if problems:
        _raise("state.config.rejected", "the configuration command is malformed", problems)
    projection = ctx.state.get(STATE_CONFIGURE_STATE)
    if not isinstance(projection, dict) or not isinstance(projection.get("namespaces"), dict):
        raise RpError("state.config.projection_missing", "the command needs the current rp.state document in state['rpState']")
    try:
        planned = plan_config(projection, args["input"])
    except ValidationError as exc:
        moved = [Problem(p.code, p.message, "/input" + (p.pointer or ""), p.details) for p in exc.problems]
        _raise(exc.code, exc.message, moved or [Problem(exc.code, exc.message, "/input")])
    if canonical_json(planned) != canonical_json(args["result"]):
        raise ValidationError(
            "state.config.result_mismatch",
            "the stored result is not what the input plans to against the current state",
            pointer="/result",
        )
    entry = planned.get("entry")
    return {
        "action": planned["action"],
        "namespace": planned["namespace"],
        "revision": entry["revision"] if isinstance(entry, dict) else None,
    }


def register_state_commands(registry: CommandRegistry) -> None:
    registry.register(CONFIGURE, configure_handler)
