"""Message actions, state and activity, reply options, metrics and the prompt preview.

``{ref}`` is a message id or its number as ``GET …/messages`` shows it (1 = first), as in the CLI.
Every action is refused with 409 ``run.busy`` while a turn of the story runs.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from roleplay.core.message_actions import delete_from, delete_turn, edit_message, message_by_number, undo_last_turn, visible_messages
from roleplay.core.metrics import parse_prices, session_metrics
from roleplay.core.run import prepare_run
from roleplay.core.swipes import swipe
from roleplay.core.turn_eligibility import require_playable
from roleplay.core.turn_surface import live_turns
from roleplay.errors import NotFoundError, RpError
from roleplay.harness.prompts import PromptAssembly, PromptContext
from roleplay.names import (
    ASSET_READ_TOOL, COMMIT_TURN_TOOL, REPLY_OPTIONS_FEATURE, STATE_ACTIVITY_PROJECTION, STATE_FEATURE, STATE_PROJECTION,
    STATE_READ_TOOL, WRITE_TURN_TOOL,
)  # fmt: skip
from roleplay.reply_options.projection import PROJECTION as REPLY_OPTIONS
from roleplay.reply_options.projection import live_entries
from roleplay.state.events import activity_document, state_document

from .app import Web, WebState
from .models import EditBody, SwipeBody
from .routes_turns import session_route

router = APIRouter(tags=["messages"])


@router.get("/sessions/{session_id}/messages")
async def messages(w: Web, session_id: str) -> dict[str, Any]:
    """The visible messages with their numbers, ids and alternatives, as ``rp messages --json``:
    ``running`` is whether a run holds the story now (in any process), ``activeTurnId`` the turn
    it is writing, and each message of a turn says whether it is that one (``active``)."""
    listed = await visible_messages(w.rt, session_id)
    live = await live_turns(w.rt, session_id)
    for item in listed:
        if "turnId" in item:  # live, not logged: the turn a run is writing now
            item["active"] = item["turnId"] == live["activeTurnId"]
    return {"sessionId": session_id, "running": live["running"], "activeTurnId": live["activeTurnId"], "messages": listed}


@router.put("/sessions/{session_id}/messages/{ref}")
async def edit(w: Web, session_id: str, ref: str, body: EditBody) -> dict[str, Any]:
    """Replace a message's text; a reply keeps its effects."""
    message_id = await message_by_number(w.rt, session_id, ref)
    await edit_message(w.rt, session_id, message_id, body.text)
    return {"sessionId": session_id, "messageId": message_id, "edited": True}


@router.delete("/sessions/{session_id}/messages/{ref}")
async def delete(w: Web, session_id: str, ref: str) -> dict[str, Any]:
    """Delete a message and everything after it (a ``turn_…`` id deletes a failed turn)."""
    if ref.startswith("turn_"):
        message_id, masked = ref, await delete_turn(w.rt, session_id, ref)
    else:
        message_id = await message_by_number(w.rt, session_id, ref)
        masked = await delete_from(w.rt, session_id, message_id)
    return {"sessionId": session_id, "messageId": message_id, "deleted": masked}


@router.post("/sessions/{session_id}/undo")
async def undo(w: Web, session_id: str) -> dict[str, Any]:
    """Take back the player's last turn."""
    return {"sessionId": session_id, "deleted": await undo_last_turn(w.rt, session_id)}


@router.post("/sessions/{session_id}/swipe")
async def swipe_reply(w: Web, session_id: str, body: SwipeBody) -> dict[str, Any]:
    """Show another alternative of the last reply: left, right or its number (1 = first)."""
    target: Any = body.direction - 1 if isinstance(body.direction, int) else body.direction
    moved = await swipe(w.rt, session_id, target)
    listed = await visible_messages(w.rt, session_id)
    reply = next((m for m in reversed(listed) if m.get("alternatives")), listed[-1] if listed else None)
    return {"sessionId": session_id, **moved, "reply": reply}


@router.get("/sessions/{session_id}/metrics")
async def metrics(
    w: Web,
    session_id: str,
    price: Annotated[list[str], Query(description="provider/model=INPUT, OUTPUT per million tokens", default_factory=list)],
) -> dict[str, Any]:
    """Tokens, latency, route and cost of each reply and in total."""
    return await session_metrics(w.rt, session_id, parse_prices(price))


async def _projection(w: WebState, session_id: str, name: str, feature: str) -> Any:
    await w.rt.store.get_session(session_id)
    try:
        return (await w.rt.service.projection(session_id, name)).state
    except RpError as exc:
        if exc.code.startswith("projection."):
            raise NotFoundError("feature.off", f"{feature} is turned off on this server", details={"feature": feature}) from exc
        raise


@router.get("/sessions/{session_id}/state")
async def state(w: Web, session_id: str) -> dict[str, Any]:
    """The story state: each namespace's value, and the last changes."""
    tracker = await _projection(w, session_id, STATE_PROJECTION, STATE_FEATURE)
    doc = state_document(tracker)
    return {
        "sessionId": session_id,
        "values": {name: ns["value"] for name, ns in doc.get("namespaces", {}).items()},
        "document": doc,
        "lastChanges": activity_document(tracker),
    }


@router.get("/sessions/{session_id}/activity")
async def activity(w: Web, session_id: str) -> dict[str, Any]:
    """The state's change history (``rp/state/activity``)."""
    tracker = await _projection(w, session_id, STATE_ACTIVITY_PROJECTION, STATE_FEATURE)
    return {"sessionId": session_id, "activity": activity_document(tracker)}


@router.get("/sessions/{session_id}/reply-options")
async def reply_options(w: Web, session_id: str) -> dict[str, Any]:
    """The reply options offered with each reply still on the story."""
    folded = await _projection(w, session_id, REPLY_OPTIONS, REPLY_OPTIONS_FEATURE)
    return {"sessionId": session_id, "replyOptions": live_entries(folded)}


@router.get("/sessions/{session_id}/prompt")
async def prompt_preview(
    w: Web,
    session_id: str,
    text: Annotated[str, Query(description="the input to preview the turn with")] = "(next input)",
    model: str | None = None,
) -> dict[str, Any]:
    """The exact Writer prompt and parent views the next turn would use (nothing is written)."""
    await require_playable(w.rt, session_id, allow_archived=True)
    route = await session_route(w, session_id, model)
    p = await prepare_run(w.rt, session_id, text, parent_route=route)
    parent_system = PromptAssembly(p.parent_system_sections).assemble(
        PromptContext(session_id, frozenset({WRITE_TURN_TOOL, COMMIT_TURN_TOOL, ASSET_READ_TOOL, STATE_READ_TOOL}))
    )
    return {
        "writer": {"route": p.writer_route.spec, "system": p.writer_system, "user": p.build.writer_prompt,
                   "sections": [s.slot_id for s in p.build.sections]},
        "parent": {"route": route.spec, "system": parent_system.text, "runContext": p.run_context},
        "participation": p.profile.participation,
        "epoch": p.build.epoch,
        "diagnostics": [d.to_dict() for d in p.build.diagnostics],
        "window": None if p.build.window is None else p.build.window.to_dict(),
    }  # fmt: skip
