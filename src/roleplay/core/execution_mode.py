"""A session's execution mode and Writer route override, changed on its profile.

The library calls behind ``rp mode`` and ``rp writer-route`` (``core/agent_cli.py``), the HTTP
API's agent routes and ``/mode`` in ``rp play``. Each is a CAS on the profile revision (the
revision just read when none is given) and takes the session's run lease through
``apply_profile``, so it is ``run.busy`` while a turn runs.
"""

from __future__ import annotations

from typing import Any

from roleplay.errors import ConflictError, RpError, ValidationError
from roleplay.harness.models.routes import parse_route_spec

from .profile import SessionProfile, apply_profile, profile_of, session_projection
from .sources import StoreAssetReader

MODES = ("chat", "agent")


async def set_mode(rt: Any, session_id: str, mode: str, expected_revision: int | None = None) -> dict[str, Any]:
    """Switch ``runtime.executionMode`` (a CAS on the profile revision; ``run.busy`` mid-turn)."""
    if mode not in MODES:
        raise ValidationError("mode.invalid", f"the execution mode is chat or agent, not {mode!r}", pointer="/mode")
    return await _apply(rt, session_id, {"runtime": {"executionMode": mode}}, expected_revision)


async def set_writer_route(rt: Any, session_id: str, value: str, expected_revision: int | None = None) -> dict[str, Any]:
    """The session's Writer override: a route, ``follow`` (the conversation's) or ``default`` (removed)."""
    # A merge patch: the nulls drop the other form's keys from a route already there.
    route: dict[str, Any] | None
    if value == "default":
        route = None
    elif value == "follow":
        route = {"followConversation": True, "provider": None, "model": None, "reasoningEffort": None}
    else:
        parsed = parse_route_spec(value)
        route = {"provider": parsed.provider, "model": parsed.model, "reasoningEffort": parsed.reasoning_effort, "followConversation": None}
    return await _apply(rt, session_id, {"runtime": {"writerRoute": route}}, expected_revision)


async def _apply(rt: Any, session_id: str, patch: dict[str, Any], expected: int | None) -> dict[str, Any]:
    loaded = await rt.service.projection(session_id, session_projection)
    revision = loaded.state["revision"] if expected is None else expected
    applied = await apply_profile(
        rt.service, session_id, {"patch": patch, "expectedRevision": revision}, StoreAssetReader(rt.assets, cache=rt.asset_cache)
    )
    if not applied.outcome.ok:
        error = applied.outcome.error or {}
        code = error.get("code", "profile.rejected")
        kind = ConflictError if code.endswith("conflict") else RpError
        raise kind(code, error.get("message", "the change was refused"), pointer=error.get("pointer"), details=error.get("details") or {})
    if not applied.applied:
        # A revision conflict like any other (409 over HTTP), as the binding tools say it.
        raise ConflictError(
            "profile.stale_apply",
            "another profile change took effect first; re-read and retry",
            pointer="/expectedRevision",
            details={"commandId": applied.outcome.command_id},
        )
    return runtime_view(profile_of(applied.state), applied.state["revision"])


def runtime_view(profile: SessionProfile, revision: int) -> dict[str, Any]:
    route = profile.runtime.writer_route
    return {
        "executionMode": profile.execution_mode,
        "writerRoute": route.to_json_dict() if route is not None else None,
        "profileRevision": revision,
    }
