"""Message operations on the surface: copy, edit, delete from a message to the end, delete a
failed turn, undo the last turn.

The spec (数据所有权与消息实体, 生命周期约束):
- **Delete** runs from the selected visible message to the end of the conversation. The full
  target list goes into ``rpMessageAction`` and one *empty* native ``assistant/message`` with a
  ``suffix`` replacement masks that suffix atomically; the empty carrier projects to nothing.
  Every committed entity in the range is retracted by the entity rules (``harness.entities``), so
  State rebuilds from the remaining replies.
- **Deleting a failed reply** keeps the user message that triggered it and cuts from the failed
  model output on; with no model output and nothing after it, it only hides the failure (a carrier
  with a ``kind: "turn"`` target and no replacement).
- **Edit** is a same-type single-node replacement: the message keeps its id, its model source, its
  non-text blocks and the effects it owns (ownership migrates, ``harness.entities``); an edit of a
  committed reply never repeats its effects and runs no text transformer.

Targets come from the ``rp-turn-surface`` fold (``core.turn_surface``): blank or tool-only model
messages and run-context messages are never targets; compacted ones answer ``message.not_found``.

Every action takes the session's run lease (``run.busy`` while a turn runs): a run prepares its
context and commits against the log it read, so the log must not move under it. The targets are
computed from the surface at one head and the append is a CAS on that same head.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from roleplay.errors import NotFoundError, RpError
from roleplay.harness.events import EventDraft
from roleplay.harness.leases import run_lease
from roleplay.harness.projections import Loaded
from roleplay.harness.surface import SURFACE
from roleplay.names import RUN_CONTEXT_SOURCE
from roleplay.harness.names import ASSISTANT_MESSAGE, SUMMARY_NODE_KIND, USER_MESSAGE

from .action_meta import ACTION_KEY, action_metadata, message_target, turn_target
from .runtime import RoleplayRuntime
from .turn_surface import COMPACTED, LIVE, outcome, turn_surface_projection

ACTION_VERSION = 2


@dataclass(frozen=True)
class Views:
    """The surface and the turn fold, read at one head."""

    surface: Loaded
    turns: dict[str, Any]

    @property
    def head(self) -> int:
        return self.surface.upto_seq

    @property
    def nodes(self) -> list[dict[str, Any]]:
        return self.surface.state["nodes"]


async def read_views(rt: RoleplayRuntime, session_id: str) -> Views:
    surface = await rt.service.projection(session_id, SURFACE)
    turns = await rt.service.projection(session_id, turn_surface_projection)
    if turns.upto_seq != surface.upto_seq:  # a write landed between the two reads: read both again
        surface = await rt.service.projection(session_id, SURFACE)
        turns = await rt.service.projection(session_id, turn_surface_projection)
    return Views(surface, turns.state)


def target_message(views: Views, message_id: str) -> dict[str, Any]:
    """The live action-target message ``message_id`` (its turn-fold record), or a stable error."""
    record = views.turns["messages"].get(message_id)
    on_surface = any(n["id"] == message_id for n in views.nodes)
    if record is None and on_surface:
        node = next(n for n in views.nodes if n["id"] == message_id)
        if node.get("kind") == SUMMARY_NODE_KIND:
            raise RpError("message.not_deletable", "a compaction summary cannot be edited, deleted or regenerated", pointer="/messageId")
        raise RpError(
            "message.not_a_target",
            f"message {message_id!r} is not a message you can act on (a blank or tool-only model step, or the run context)",
            pointer="/messageId",
        )
    if record is None or record["status"] != LIVE or not on_surface:
        why = "was compacted into a summary" if record is not None and record["status"] == COMPACTED else "is not on the current surface"
        raise NotFoundError("message.not_found", f"message {message_id!r} {why}", pointer="/messageId")
    return record


async def message_text(rt: RoleplayRuntime, session_id: str, message_id: str) -> str:
    """Copy: the message's text as the user sees it."""
    views = await read_views(rt, session_id)
    target_message(views, message_id)
    node = next(n for n in views.nodes if n["id"] == message_id)
    return "".join(b.get("text", "") for b in node["content"] if b.get("type") == "text")


# -- delete ------------------------------------------------------------------------------------------


async def delete_from(rt: RoleplayRuntime, session_id: str, message_id: str) -> list[str]:
    """Mask ``message_id`` and everything after it; returns the masked message ids. Deleting a
    failed turn's reply keeps the user message that triggered it (:func:`delete_turn`)."""
    async with run_lease(rt.store, session_id):
        views = await read_views(rt, session_id)
        record = target_message(views, message_id)
        turn = views.turns["turns"][record["turnId"]]
        if record["role"] == "assistant" and outcome(turn) not in ("committed", "uncommitted"):
            return await _delete_failed(rt, session_id, views, turn)
        return await _delete_from(rt, session_id, views, message_id)


async def _delete_from(
    rt: RoleplayRuntime, session_id: str, views: Views, message_id: str, *, kind: str = "delete", extra: dict[str, Any] | None = None
) -> list[str]:
    nodes = views.nodes
    index = next((i for i, n in enumerate(nodes) if n["id"] == message_id), None)
    if index is None:
        raise NotFoundError("message.not_found", f"message {message_id!r} is not on the current surface", pointer="/messageId")
    if nodes[index].get("kind") == SUMMARY_NODE_KIND:
        raise RpError("message.not_deletable", "a compaction summary cannot be deleted", pointer="/messageId")
    targets = [n["id"] for n in nodes[index:] if n["role"] in ("user", "assistant")]
    await _append_carrier(rt, session_id, views, message_id, action_metadata(kind, [message_target(t) for t in targets], **(extra or {})))
    return targets


async def _append_carrier(rt: RoleplayRuntime, session_id: str, views: Views, target: str | None, action: dict[str, Any]) -> None:
    payload: dict[str, Any] = {"messageId": rt.ids("msg_"), "content": [], "source": {ACTION_KEY: action}}
    if target is not None:
        payload["surfaceOp"] = {"op": "replace", "range": "suffix", "targetMessageId": target}
    await rt.service.append(session_id, [EventDraft(ASSISTANT_MESSAGE, payload)], expected_seq=views.head)


async def delete_turn(rt: RoleplayRuntime, session_id: str, turn_id: str) -> list[str]:
    """Delete a turn as a ``kind: "turn"`` target: a failed one keeps its user message (see
    :func:`delete_from`), any other is deleted from its first input to the end."""
    async with run_lease(rt.store, session_id):
        views = await read_views(rt, session_id)
        turn = views.turns["turns"].get(turn_id)
        if turn is None:
            raise NotFoundError("turn.not_found", f"no turn {turn_id!r} in this session", pointer="/turnId")
        if outcome(turn) not in ("committed", "uncommitted"):
            return await _delete_failed(rt, session_id, views, turn)
        first = next((m for m in [*turn["inputs"], *turn["replies"]] if views.turns["messages"][m]["status"] == LIVE), None)
        if first is None:
            raise NotFoundError("turn.not_found", f"turn {turn_id!r} is no longer on the conversation", pointer="/turnId")
        return await _delete_from(rt, session_id, views, first)


async def _delete_failed(rt: RoleplayRuntime, session_id: str, views: Views, turn: dict[str, Any]) -> list[str]:
    """Keep the turn's user input; cut from the first node the failed attempt added after it (its
    run context, model output and tool results), else from whatever follows the turn; with
    nothing after the input, only hide the failure."""
    if outcome(turn) == "open":
        raise RpError("message.turn_open", f"turn {turn['turnId']} has not ended; it cannot be deleted as a failure", pointer="/turnId")
    ids = [n["id"] for n in views.nodes]
    inputs, own_nodes = set(turn["inputs"]), set(turn["nodes"]) - set(turn["inputs"])
    own = next((i for i, node_id in enumerate(ids) if node_id in own_nodes), None)
    last_input = max((i for i, node_id in enumerate(ids) if node_id in inputs), default=None)
    start = own if own is not None else (last_input + 1 if last_input is not None else None)
    if start is not None:  # a replacement targets a message, never a tool result
        start = next((i for i in range(start, len(ids)) if not ids[i].startswith("tool:")), None)
    targets = [n["id"] for n in views.nodes[start:] if n["role"] in ("user", "assistant")] if start is not None else []
    action = action_metadata("delete", [turn_target(turn["turnId"]), *(message_target(t) for t in targets)])
    await _append_carrier(rt, session_id, views, ids[start] if start is not None else None, action)
    return targets


async def undo_last_turn(rt: RoleplayRuntime, session_id: str) -> list[str]:
    """Delete the last user turn: from its input message (not the run context) to the end."""
    async with run_lease(rt.store, session_id):
        views = await read_views(rt, session_id)
        for node in reversed(views.nodes):
            record = views.turns["messages"].get(node["id"])
            if record is not None and record["role"] == "user" and record["status"] == LIVE:
                return await _delete_from(rt, session_id, views, node["id"])
            if (
                node["role"] == "user"
                and record is None
                and node.get("kind") is None
                and not (node.get("source") or {}).get(RUN_CONTEXT_SOURCE)
            ):
                return await _delete_from(rt, session_id, views, node["id"])  # a user message outside any turn
    raise RpError("message.nothing_to_undo", "there is no user turn to undo")


# -- edit --------------------------------------------------------------------------------------------


async def edit_message(rt: RoleplayRuntime, session_id: str, message_id: str, text: str) -> None:
    """Replace one message's text in place (a ``node`` replacement: the message keeps its id).

    The spec: an edit keeps the stable message id, the model source, non-text blocks and any
    effect the reply owns (ownership migrates to the new event), and runs no text transformer.
    """
    async with run_lease(rt.store, session_id):
        views = await read_views(rt, session_id)
        await edit_in(rt, session_id, views, message_id, text)


async def edit_in(rt: RoleplayRuntime, session_id: str, views: Views, message_id: str, text: str) -> None:
    """The edit, under a lease the caller holds, against ``views``."""
    target_message(views, message_id)
    node = next(n for n in views.nodes if n["id"] == message_id)
    if not text.strip():
        raise RpError("message.empty_edit", "an edit needs text; delete the message instead", pointer="/text")
    blocks = [b for b in node["content"] if b.get("type") != "text"]
    content = (
        [b for b in blocks if b.get("type") == "reasoning"]
        + [{"type": "text", "text": text}]
        + [b for b in blocks if b.get("type") == "image"]
    )
    source = dict(node.get("source") or {})
    source[ACTION_KEY] = action_metadata("edit", [message_target(message_id)])
    payload: dict[str, Any] = {
        "messageId": rt.ids("msg_"),
        "content": content,
        "source": source,
        "surfaceOp": {"op": "replace", "range": "node", "targetMessageId": message_id},
    }
    kind = USER_MESSAGE if node["role"] == "user" else ASSISTANT_MESSAGE
    if node.get("toolCalls"):
        payload["toolCalls"] = node["toolCalls"]
    if kind == ASSISTANT_MESSAGE:
        original = await rt.service.events(session_id, after_seq=node["seq"] - 1, until_seq=node["seq"])
        if original and original[0].payload.get("model") is not None:
            payload["model"] = original[0].payload["model"]  # the model source stays the reply's
    await rt.service.append(session_id, [EventDraft(kind, payload)], expected_seq=views.head)


# -- the visible conversation ------------------------------------------------------------------------


async def visible_messages(rt: RoleplayRuntime, session_id: str) -> list[dict[str, Any]]:
    """The messages the player sees, numbered from 1, each with its id, its turn's outcome, and
    (on a turn's reply) the alternatives to swipe through; a failed turn's message says so."""
    from .conversation import project
    from .replies import replies_projection
    from .run import opening_message_id
    from .turn_surface import alternatives, body, failure_shown

    views = await read_views(rt, session_id)
    writing = (await rt.service.projection(session_id, replies_projection)).state["writing"]
    entries = project(views.nodes, writing_ids=writing, opening_id=opening_message_id(views.nodes))
    out: list[dict[str, Any]] = []
    for number, entry in enumerate(entries, 1):
        item: dict[str, Any] = {"number": number, "messageId": entry.message_id, "speaker": entry.speaker, "text": entry.text}
        record = views.turns["messages"].get(entry.message_id)
        turn = views.turns["turns"].get(record["turnId"]) if record is not None else None
        if turn is not None:
            item["role"] = record["role"]
            item["turnId"] = turn["turnId"]
            item["outcome"] = outcome(turn)
            item["edited"] = bool(record.get("edits"))
            shown = body(views.turns, turn)
            if shown is not None and shown["messageId"] == entry.message_id:
                item["bodyOwner"] = shown["owner"]
                alts = alternatives(views.turns, turn)
                if alts is not None:
                    item["alternatives"] = {"index": alts["index"], "count": alts["count"]}
            if failure_shown(views.turns, turn):
                item["failure"] = turn.get("error") or {"code": f"turn.{turn['end']}", "message": f"the turn ended: {turn['end']}"}
                alts = alternatives(views.turns, turn)
                if alts is not None:  # a failed regeneration: the replies before it to swipe back to
                    item["alternatives"] = {"index": alts["index"], "count": alts["count"]}
        out.append(item)
    return out


async def message_by_number(rt: RoleplayRuntime, session_id: str, ref: str) -> str:
    """A message id from what the player typed: an id, or its number in :func:`visible_messages`."""
    if not ref.strip().isdecimal():
        return ref.strip()
    listed = await visible_messages(rt, session_id)
    number = int(ref)
    if not 1 <= number <= len(listed):
        raise NotFoundError("message.not_found", f"there is no message {number}; the conversation has {len(listed)}", pointer="/messageId")
    return str(listed[number - 1]["messageId"])
