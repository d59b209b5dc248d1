"""Message operations on the surface: delete from a message to the end, undo the last turn.

The spec (数据所有权与消息实体): deleting runs from the selected visible message to the end of
the conversation. The full target list goes into ``rpMessageAction`` and one *empty* native
``assistant/message`` with a ``suffix`` replacement masks that suffix atomically; the empty
carrier projects to nothing. Every committed entity in the range is retracted by the entity
rules (``harness.entities``), so State rebuilds from the remaining replies.

Every action takes the session's run lease (``run.busy`` while a turn runs): a run prepares its
context and commits against the log it read, so the log must not move under it. The targets are
computed from the surface at one head and the append is a CAS on that same head.
"""

from __future__ import annotations

from typing import Any

from roleplay.errors import NotFoundError, RpError
from roleplay.harness.events import EventDraft
from roleplay.harness.leases import run_lease
from roleplay.harness.projections import Loaded
from roleplay.harness.surface import SURFACE

from .run import RUN_CONTEXT
from .runtime import RoleplayRuntime

ACTION_VERSION = 1


async def delete_from(rt: RoleplayRuntime, session_id: str, message_id: str) -> list[str]:
    """Mask ``message_id`` and everything after it; returns the masked message ids."""
    async with run_lease(rt.store, session_id):
        return await _delete_from(rt, session_id, await _surface(rt, session_id), message_id)


async def _surface(rt: RoleplayRuntime, session_id: str) -> Loaded:
    return await rt.service.projection(session_id, SURFACE)


async def _delete_from(rt: RoleplayRuntime, session_id: str, surface: Loaded, message_id: str) -> list[str]:
    nodes = surface.state["nodes"]
    index = next((i for i, n in enumerate(nodes) if n["id"] == message_id), None)
    if index is None:
        raise NotFoundError("message.not_found", f"message {message_id!r} is not on the current surface", pointer="/messageId")
    if nodes[index].get("kind") == "compaction/summary":
        raise RpError("message.not_deletable", "a compaction summary cannot be deleted", pointer="/messageId")
    targets = [n["id"] for n in nodes[index:]]
    action: dict[str, Any] = {"v": ACTION_VERSION, "kind": "delete", "targets": targets}
    await rt.service.append(
        session_id,
        [
            EventDraft(
                "assistant/message",
                {
                    "messageId": rt.ids("msg_"),
                    "content": [],
                    "source": {"rpMessageAction": action},
                    "surfaceOp": {"op": "replace", "range": "suffix", "targetMessageId": message_id},
                },
            )
        ],
        expected_seq=surface.upto_seq,
    )
    return targets


async def undo_last_turn(rt: RoleplayRuntime, session_id: str) -> list[str]:
    """Delete the last user turn: from its input message (not the run context) to the end."""
    async with run_lease(rt.store, session_id):
        surface = await _surface(rt, session_id)
        for node in reversed(surface.state["nodes"]):
            if node["role"] == "user" and (node.get("source") or {}).get(RUN_CONTEXT) is None and node.get("kind") is None:
                return await _delete_from(rt, session_id, surface, node["id"])
    raise RpError("message.nothing_to_undo", "there is no user turn to undo")


async def edit_message(rt: RoleplayRuntime, session_id: str, message_id: str, text: str) -> None:
    """Replace one message's text in place (a ``node`` replacement: the message keeps its id).

    The spec: an edit keeps the stable message id, the model source, non-text blocks and any
    effect the reply owns (ownership migrates to the new event), and runs no text transformer.
    """
    async with run_lease(rt.store, session_id):
        surface = await _surface(rt, session_id)
        await _edit(rt, session_id, surface, message_id, text)


async def _edit(rt: RoleplayRuntime, session_id: str, surface: Loaded, message_id: str, text: str) -> None:
    node = next((n for n in surface.state["nodes"] if n["id"] == message_id), None)
    if node is None or node["role"] not in ("user", "assistant"):
        raise NotFoundError("message.not_found", f"message {message_id!r} is not an editable message on the surface", pointer="/messageId")
    if not text.strip():
        raise RpError("message.empty_edit", "an edit needs text; delete the message instead", pointer="/text")
    blocks = [b for b in node["content"] if b.get("type") != "text"]
    content = (
        [b for b in blocks if b.get("type") == "reasoning"]
        + [{"type": "text", "text": text}]
        + [b for b in blocks if b.get("type") == "image"]
    )
    source = dict(node.get("source") or {})
    source["rpMessageAction"] = {"v": ACTION_VERSION, "kind": "edit", "targets": [message_id]}
    payload: dict[str, Any] = {
        "messageId": rt.ids("msg_"),
        "content": content,
        "source": source,
        "surfaceOp": {"op": "replace", "range": "node", "targetMessageId": message_id},
    }
    if node.get("toolCalls"):
        payload["toolCalls"] = node["toolCalls"]
    kind = "user/message" if node["role"] == "user" else "assistant/message"
    await rt.service.append(session_id, [EventDraft(kind, payload)], expected_seq=surface.upto_seq)
