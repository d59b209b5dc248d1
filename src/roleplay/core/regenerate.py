"""Regenerate the last reply in the same session; save-and-regenerate; retry a failed turn.

The spec (数据所有权与消息实体, 生命周期约束 "重新生成最后消息"): only the last recoverable
message can be regenerated. An empty assistant replacement of the same kind as a delete masks
the turn and its suffix, and ``rpMessageAction.replay`` stores every plain-text user message of
that turn still present; they are sent again, in order, to the same agent of the same session.
State first returns to the previous turn (the replacement retracts the turn's committed
entities), then the new commit applies. A turn that wrote shared assets cannot be regenerated
(shared assets are not rolled back). A failed turn is retried the same way (retry = regenerate
with the same input). Save-and-regenerate edits the turn's user message first.

**Delivery.** The action is written under the run lease, then the turn runs under its own lease
(``play_turn``). A replay counts as delivered when the next turn starts with exactly its text
(``core.turn_surface``); a process that stops between the two leaves it *pending*, and
:func:`deliver_pending_replay` (run when a story is opened for play) sends it then. The replay
never travels as an empty user message.

A delivered replay joins the regenerated turn's group, so the replaced reply stays available as
an alternative (``core.swipes``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from roleplay.errors import RpError
from roleplay.harness.leases import run_lease
from roleplay.harness.models.routes import Route

from .message_actions import Views, _delete_from, edit_in, read_views
from .run import RunResult, play_turn
from .runtime import RoleplayRuntime
from .turn_surface import last_live_turn, live_inputs, outcome, turn_surface_projection


def regenerable_turn(views: Views) -> dict[str, Any]:
    """The turn a regenerate would replace: the last one on the conversation, closed, with a
    live user input and no shared asset write; else a stable error."""
    turn = last_live_turn(views.turns)
    if turn is None or not live_inputs(views.turns, turn):
        raise RpError("message.not_regenerable", "there is no reply to regenerate: the last turn has no user message (an opening)")
    if outcome(turn) == "open":
        raise RpError("message.turn_open", f"turn {turn['turnId']} has not ended; wait for it or let the next run close it")
    if turn.get("continues"):
        raise RpError(
            "message.not_regenerable",
            "the last reply is a continuation; /undo takes it back and /continue writes another",
            details={"turnId": turn["turnId"]},
        )
    if turn["sharedAssetWrites"]:
        raise RpError(
            "message.regenerate_shared_assets",
            "this turn wrote shared assets, which a regenerate cannot take back; edit or delete the reply instead",
            details={"turnId": turn["turnId"]},
        )
    return turn


def replay_texts(views: Views, turn: dict[str, Any]) -> list[str]:
    """The turn's plain-text user messages still present, in order (images are not replayed)."""
    texts = []
    for message_id in live_inputs(views.turns, turn):
        node = next(n for n in views.nodes if n["id"] == message_id)
        text = "".join(b.get("text", "") for b in node["content"] if b.get("type") == "text")
        if text.strip():
            texts.append(text)
    if not texts:
        raise RpError("message.not_regenerable", "the turn's user message has no text to send again", details={"turnId": turn["turnId"]})
    return texts


async def record_regenerate(rt: RoleplayRuntime, session_id: str, *, save_edit: str | None = None) -> dict[str, Any]:
    """Write the regenerate action (after the edit, for save-and-regenerate); returns the replay."""
    async with run_lease(rt.store, session_id):
        views = await read_views(rt, session_id)
        turn = regenerable_turn(views)
        if save_edit is not None:
            await edit_in(rt, session_id, views, live_inputs(views.turns, turn)[0], save_edit)
            views = await read_views(rt, session_id)
            turn = regenerable_turn(views)
        replay = {"replayId": rt.ids("rpl_"), "turnId": turn["turnId"], "texts": replay_texts(views, turn)}
        await _delete_from(rt, session_id, views, live_inputs(views.turns, turn)[0], kind="regenerate", extra={"replay": replay})
    return replay


async def regenerate(
    rt: RoleplayRuntime,
    session_id: str,
    *,
    parent_route: Route | None,
    default_route: Route | None = None,
    save_edit: str | None = None,
    abort: asyncio.Event | None = None,
) -> RunResult:
    """Regenerate the last reply (``save_edit``: edit its user message first) and play the replay
    (``parent_route`` None: the story's own, read under the turn's lease, as ``play_turn`` does).
    A replay recorded earlier and never delivered is delivered instead: its turn is already off
    the story, so regenerating "the last reply" again would replace the turn before it."""
    pending = await pending_replay(rt, session_id)
    if pending is not None:
        if save_edit is not None:
            raise RpError(
                "message.replay_pending",
                "a regenerate is still waiting to be sent; run it first (rp regenerate without --save-edit), then edit",
                details={"replayId": pending["replayId"]},
            )
        return await play_turn(rt, session_id, pending["text"], parent_route=parent_route, default_route=default_route, abort=abort)
    replay = await record_regenerate(rt, session_id, save_edit=save_edit)
    texts = "\n\n".join(replay["texts"])
    return await play_turn(rt, session_id, texts, parent_route=parent_route, default_route=default_route, abort=abort)


async def pending_replay(rt: RoleplayRuntime, session_id: str) -> dict[str, Any] | None:
    """A regenerate recorded but not delivered (no turn has started since), or None."""
    pending = (await rt.service.projection(session_id, turn_surface_projection)).state["pending"]
    return dict(pending) if pending is not None and pending["kind"] == "regenerate" else None


async def deliver_pending_replay(
    rt: RoleplayRuntime, session_id: str, *, parent_route: Route, abort: asyncio.Event | None = None
) -> RunResult | None:
    """Start-up recovery: send a recorded, undelivered replay now; None when there is none."""
    pending = await pending_replay(rt, session_id)
    if pending is None:
        return None
    return await play_turn(rt, session_id, pending["text"], parent_route=parent_route, abort=abort)
