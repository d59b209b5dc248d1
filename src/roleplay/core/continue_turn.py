"""Continue: the Writer extends the last reply, as one committed turn (SillyTavern's Continue).

The turn is an ordinary Chat-mode turn (lease, prepare, Writer, ``rp_commit_turn``; its state
effects commit normally) whose input is the instruction ``CONTINUE_INPUT``, logged with
``source.rpContinue = {v, target}`` on that input message. The Writer sees the story so far, with
the reply to extend last, and writes only its next words.

Nothing already in the log is rewritten. The conversation (``core.conversation``) leaves the
instruction out and joins the turn's reply to the reply it extends, so the player, the next
Writer prompt and the parent's history all read one message; ``rp play`` prints the continuation
as it streams, right after the reply it extends. ``/undo`` takes the continuation back (it is the
last user turn) and the original reply reads as before.

Only a writing reply (a committed one, or the opening) can be continued: a discussion answer is
not story text, and after the player's own message there is nothing to extend.
"""

from __future__ import annotations

import asyncio
from typing import Any

from roleplay.errors import RpError
from roleplay.harness.leases import run_lease
from roleplay.harness.loop import AgentLoop
from roleplay.harness.models.routes import Route
from roleplay.harness.models.types import ChatModel
from roleplay.harness.surface import SURFACE

from .conversation import Entry, project
from .player_prompts import CONTINUE_INPUT, CONTINUE_SOURCE
from .profile import SESSION_PROJECTION
from .replies import replies_projection
from .run import RpRun, RunResult, opening_message_id, prepare_run, run_result
from .runtime import RoleplayRuntime
from .session_route import story_route
from .toolfree import parent_model
from .turn_eligibility import require_playable

SOURCE_VERSION = 1


async def visible_entries(rt: RoleplayRuntime, session_id: str) -> list[Entry]:
    """The conversation as the player reads it (continuations joined to their replies)."""
    nodes = (await rt.service.projection(session_id, SURFACE)).state["nodes"]
    writing = (await rt.service.projection(session_id, replies_projection)).state["writing"]
    return project(nodes, writing_ids=writing, opening_id=opening_message_id(nodes))


def reply_to_continue(entries: list[Entry]) -> Entry:
    """The last message, when it is a writing reply; else why there is nothing to continue."""
    if not entries:
        raise RpError("continue.nothing_to_continue", "there is no reply to continue yet; write something first")
    last = entries[-1]
    if last.speaker == "user":
        raise RpError("continue.nothing_to_continue", "the last message is yours: send it as a turn instead of continuing")
    if last.speaker != "writing":
        raise RpError(
            "continue.not_a_story_reply",
            "the last reply is a discussion answer, not story text; only a story reply can be continued",
            details={"messageId": last.message_id},
        )
    return last


async def continue_turn(
    rt: RoleplayRuntime,
    session_id: str,
    *,
    parent_route: Route | None,
    default_route: Route | None = None,
    abort: asyncio.Event | None = None,
) -> RunResult:
    """Run the Continue turn; the continuation streams to the session's subscribers like any reply.

    ``parent_route`` None: the story's own, read under the lease (``story_route``).
    ``RunResult.reply`` is the continuation alone (what streamed); ``extended_reply`` gives the
    whole message as it now reads."""
    async with run_lease(rt.store, session_id) as lease:
        await require_playable(rt, session_id)
        if parent_route is None:
            parent_route = story_route((await rt.service.projection(session_id, SESSION_PROJECTION)).state, default_route)
        target = reply_to_continue(await visible_entries(rt, session_id))  # read under the lease
        prepared = await prepare_run(rt, session_id, CONTINUE_INPUT, parent_route=parent_route)
        run = RpRun(rt, prepared)
        model: ChatModel = parent_model(run, rt.model_for(parent_route))
        loop = AgentLoop(rt.service, model, run.spec())
        source: dict[str, Any] = {CONTINUE_SOURCE: {"v": SOURCE_VERSION, "target": target.message_id}}
        turn = await loop.run_turn(session_id, CONTINUE_INPUT, abort=abort, source=source, turn_id=prepared.turn_id, lease=lease)
    return run_result(session_id, turn, prepared, run)


async def extended_reply(rt: RoleplayRuntime, session_id: str) -> Entry | None:
    """The last message as the player reads it (after a Continue: the reply with its continuation)."""
    entries = await visible_entries(rt, session_id)
    return entries[-1] if entries else None
