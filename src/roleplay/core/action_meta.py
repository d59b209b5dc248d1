"""``rpMessageAction``: the versioned metadata a message action writes into its replacement's ``source``.

The spec (数据所有权与消息实体) has rp-core define one versioned ``rpMessageAction`` and the message
actions write it on the native ``user/message`` / ``assistant/message`` replacement that carries
the action; no new event type, no second message store. Version 2 (this module) names its
targets as objects, because a failed reply enters the same protocol as a *turn* target
(``{"kind": "turn", "turnId"}``) when it has no model message to point at::

    {"v": 2, "kind": "edit" | "delete" | "regenerate" | "swipe",
     "targets": [{"kind": "message", "messageId": "msg_…"} | {"kind": "turn", "turnId": "turn_…"}, …],
     "replay": {"replayId", "turnId", "texts": ["…", …]},          # regenerate only
     "swipe": {"turnId", "index", "fromTurnId"}}                   # swipe only

Version 1 (written before) had ``targets`` as a list of message ids; :func:`parse_action` reads
both, so old logs fold the same. Anything else is not an action (never guessed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from roleplay.names import MESSAGE_ACTION_SOURCE

ACTION_KEY = MESSAGE_ACTION_SOURCE
ACTION_VERSION = 2
KINDS = frozenset({"edit", "delete", "regenerate", "swipe"})


def message_target(message_id: str) -> dict[str, str]:
    return {"kind": "message", "messageId": message_id}


def turn_target(turn_id: str) -> dict[str, str]:
    return {"kind": "turn", "turnId": turn_id}


def action_metadata(kind: str, targets: list[dict[str, str]], **extra: Any) -> dict[str, Any]:
    assert kind in KINDS, kind
    return {"v": ACTION_VERSION, "kind": kind, "targets": targets, **extra}


@dataclass(frozen=True)
class Action:
    kind: str
    message_ids: tuple[str, ...]
    turn_ids: tuple[str, ...]
    replay: dict[str, Any] | None = None
    swipe: dict[str, Any] | None = None
    raw: dict[str, Any] = field(default_factory=dict)


def parse_action(source: Any) -> Action | None:
    """The action a message's ``source`` carries (v1 or v2), or None."""
    if not isinstance(source, dict):
        return None
    meta = source.get(ACTION_KEY)
    if not isinstance(meta, dict) or meta.get("kind") not in KINDS or not isinstance(meta.get("targets"), list):
        return None
    messages: list[str] = []
    turns: list[str] = []
    if meta.get("v") == 1:
        messages = [t for t in meta["targets"] if isinstance(t, str)]
    elif meta.get("v") == ACTION_VERSION:
        for target in meta["targets"]:
            if not isinstance(target, dict):
                continue
            if target.get("kind") == "message" and isinstance(target.get("messageId"), str):
                messages.append(target["messageId"])
            elif target.get("kind") == "turn" and isinstance(target.get("turnId"), str):
                turns.append(target["turnId"])
    else:
        return None
    replay = meta.get("replay") if isinstance(meta.get("replay"), dict) else None
    swipe = meta.get("swipe") if isinstance(meta.get("swipe"), dict) else None
    return Action(meta["kind"], tuple(messages), tuple(turns), replay, swipe, meta)
