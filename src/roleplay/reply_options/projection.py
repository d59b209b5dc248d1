"""``rp/reply-options``: the reply options of every reply still on the surface, folded from the log.

The options travel in the turn commit itself (``tool/result.meta.extensions["rp.reply-options"]``
of a successful ``rp_commit_turn``, written atomically with the reply), so replaying the log gives
them back exactly; nothing else stores them.

They belong to the reply: an entity owned by the assistant message that made the commit call,
folded by the harness's surface-owned entity folder (``harness.entities``). So they follow message
actions with no code of their own: deleting or undoing the reply retracts them, an edit of the
reply keeps them, and a compaction checkpoint settles them (its summary is never a reply with
options, so settled entries are dropped from the state).

The state keeps at most ``MAX_ENTRIES`` live entries, oldest dropped first: options only matter
near the end of a story, and a fold must not grow with the story. The cap is part of the fold, so
a fresh fold still equals the incremental one.

Extension value, v1: ``{"v": 1, "options": [string, …]}``. A value of another version or shape
is counted in ``ignored`` and otherwise skipped (a newer writer's options are not misread).
"""

from __future__ import annotations

from typing import Any

from roleplay.harness import entities as folder
from roleplay.harness.events import Event
from roleplay.harness.projections import Projection
from roleplay.names import COMMIT_TURN_TOOL, TURN_COMMIT_KIND
from roleplay.harness.names import TOOL_RESULT

EXTENSION_KEY = "rp.reply-options"
EXTENSION_VERSION = 1
PROJECTION = "rp/reply-options"
MAX_ENTRIES = 64


def extension_value(options: list[str]) -> dict[str, Any]:
    return {"v": EXTENSION_VERSION, "options": list(options)}


def _initial() -> dict[str, Any]:
    return {"folder": folder.initial(), "ignored": 0}


def _options_of(value: Any) -> list[str] | None:
    if not isinstance(value, dict) or value.get("v") != EXTENSION_VERSION:
        return None
    options = value.get("options")
    if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
        return None
    return list(options)


def _apply(state: dict[str, Any], event: Event) -> dict[str, Any]:
    f = state["folder"]
    folder.observe(f, event)
    p = event.payload
    if event.type == TOOL_RESULT and p["name"] == COMMIT_TURN_TOOL and p["ok"]:
        meta = p.get("meta") or {}
        extensions = meta.get("extensions") if meta.get("kind") == TURN_COMMIT_KIND else None
        if isinstance(extensions, dict) and EXTENSION_KEY in extensions:
            options = _options_of(extensions[EXTENSION_KEY])
            call = f["calls"].get(p["callId"])
            if options is None or call is None:
                state["ignored"] += 1
            else:
                data = {"messageId": call["messageId"], "turnId": meta.get("turnId"), "options": options}
                folder.add(f, event.seq, call["seq"], data)
    folder.settle(f, event)
    folder.pop_permanent_prefix(f)  # behind a checkpoint: no reply on the surface to show them under
    while len(f["entities"]) > MAX_ENTRIES:
        folder.remove(f, f["entities"][0]["root"])
    return state


reply_options_projection = Projection(name=PROJECTION, version=1, initial=_initial, apply=_apply)


def live_entries(state: dict[str, Any]) -> list[dict[str, Any]]:
    """``[{messageId, turnId, options}]`` of every reply still on the surface, oldest first."""
    return [dict(e["data"]) for e in state["folder"]["entities"]]


def options_for_turn(state: dict[str, Any], turn_id: str) -> list[str]:
    """The options of the reply that ``turn_id`` committed, or [] (none, failed, or retracted)."""
    for entry in reversed(state["folder"]["entities"]):
        if entry["data"].get("turnId") == turn_id:
            return list(entry["data"]["options"])
    return []


def options_for_message(state: dict[str, Any], message_id: str) -> list[str]:
    for entry in reversed(state["folder"]["entities"]):
        if entry["data"].get("messageId") == message_id:
            return list(entry["data"]["options"])
    return []


__all__ = [
    "EXTENSION_KEY",
    "EXTENSION_VERSION",
    "MAX_ENTRIES",
    "PROJECTION",
    "extension_value",
    "live_entries",
    "options_for_message",
    "options_for_turn",
    "reply_options_projection",
]
