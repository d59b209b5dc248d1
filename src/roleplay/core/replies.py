"""``rp/replies``: which assistant messages are *writing replies* (own a successful commit).

The conversation projection labels writing and non-writing replies. Finding them by scanning the
whole log each turn costs O(log); this fold keeps the answer incrementally: it remembers which
assistant message made each ``rp_commit_turn`` call and records that message once the call's
result succeeds. Retraction needs no handling here: a deleted reply leaves the surface, and the
labels only apply to messages on the surface.
"""

from __future__ import annotations

from typing import Any

from roleplay.harness.events import Event
from roleplay.harness.projections import Projection
from roleplay.names import REPLIES_PROJECTION
from roleplay.harness.names import ASSISTANT_MESSAGE, TOOL_RESULT

from .commit import COMMIT_KIND, TOOL_NAME

REPLIES = REPLIES_PROJECTION


def _initial() -> dict[str, Any]:
    return {"pending": {}, "writing": []}


def _apply(state: dict[str, Any], event: Event) -> dict[str, Any]:
    p = event.payload
    if event.type == ASSISTANT_MESSAGE:
        for call in p.get("toolCalls") or ():
            if call["name"] == TOOL_NAME:
                state["pending"][call["id"]] = p["messageId"]
    elif event.type == TOOL_RESULT and p["name"] == TOOL_NAME:
        message_id = state["pending"].pop(p["callId"], None)
        if message_id is not None and p["ok"] and (p.get("meta") or {}).get("kind") == COMMIT_KIND:
            state["writing"].append(message_id)
    return state


replies_projection = Projection(name=REPLIES, version=1, initial=_initial, apply=_apply)
