"""Reply options in ``rp play`` and ``rp say``: the options of the turn just played, as choices.

The play loop numbers the choices after the reply, and a line that is just one of those numbers
sends that option through the normal send path, exactly as if the player had typed it (spec: the
browser "calls the current session's ``conversation.send()`` unchanged"). The options are read
from the ``rp/reply-options`` projection, the same place a replay or another process reads them.

:func:`options_of_reply` gives them again for a reply already on the conversation, when play
resumes, or an undo, delete, swipe or branch makes that reply the last one (core decides which
reply is last; the options stay owned by the reply's message, so a retracted reply has none).
"""

from __future__ import annotations

from typing import Any

from .projection import live_entries, options_for_turn, reply_options_projection


async def options_after_turn(rt: Any, result: Any) -> list[str]:
    """The options the turn in ``result`` (a ``core.run.RunResult``) committed, or []."""
    if not result.committed:
        return []
    state = (await rt.service.projection(result.session_id, reply_options_projection)).state
    return options_for_turn(state, result.turn.turn_id)


async def options_of_reply(rt: Any, session_id: str, turn_id: str) -> list[str]:
    """The options of the reply ``turn_id`` committed, if it is still on the surface, or []."""
    state = (await rt.service.projection(session_id, reply_options_projection)).state
    return options_for_turn(state, turn_id)


async def session_options(rt: Any, session_id: str) -> list[dict[str, Any]]:
    """``[{messageId, turnId, options}]`` of every reply on the surface that has options."""
    return live_entries((await rt.service.projection(session_id, reply_options_projection)).state)


__all__ = ["options_after_turn", "options_of_reply", "session_options"]
