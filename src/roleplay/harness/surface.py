"""The surface: the model-visible message list folded out of a session's events.

Nodes come from ``user/message``, ``assistant/message`` and ``tool/result`` events. A message whose
payload has ``surfaceOp: {op: "replace", range, targetMessageId}`` does not append; it rewrites
the current surface:

- ``range: "node"`` (an edit) swaps the one target node for the new message, which takes the
  target's message id, so references to that message stay valid.
- ``range: "suffix"`` (delete, regenerate) drops the target node and every node after it, then
  appends the new message.
- An assistant replacement with no visible content (the spec's ``deriveEventMessage() → null``)
  contributes no node: an empty ``node`` replacement removes the node, an empty ``suffix``
  replacement truncates.

``compaction/checkpoint`` replaces the nodes its ``sourceEventSeqs`` name (all of them when it
names none) with one summary node at the front; the nodes it does not name stay after it, verbatim.
The event log keeps every event; only the projection changes.

The fold is pure and total: an op whose target is not on the surface is ignored here (the session
service rejects such appends, so this only matters for hand-made logs) and counted in
``ignoredOps`` so that the anomaly stays visible.
"""

from __future__ import annotations

from itertools import islice
from typing import Any, Iterable, Sequence

from roleplay.harness.names import ASSISTANT_MESSAGE, COMPACTION_CHECKPOINT, SUMMARY_NODE_KIND, TOOL_RESULT, USER_MESSAGE

from .events import Event, is_empty_assistant
from .projections import Projection

SURFACE = "harness/surface"


def initial_surface() -> dict[str, Any]:
    return {"nodes": [], "ignoredOps": 0}


def _node(event: Event) -> dict[str, Any] | None:
    p = event.payload
    if event.type == USER_MESSAGE:
        node = {"id": p["messageId"], "role": "user", "seq": event.seq, "content": p["content"]}
    elif event.type == ASSISTANT_MESSAGE:
        if is_empty_assistant(p):
            return None
        node = {"id": p["messageId"], "role": "assistant", "seq": event.seq, "content": p["content"]}
        if p.get("toolCalls"):
            node["toolCalls"] = p["toolCalls"]
    elif event.type == TOOL_RESULT:
        node = {
            "id": f"tool:{p['callId']}",
            "role": "tool",
            "seq": event.seq,
            "toolCallId": p["callId"],
            "name": p["name"],
            "content": p["content"],
        }
        if not p["ok"]:
            node["isError"] = True
        return node
    else:
        return None
    if p.get("source") is not None:
        node["source"] = p["source"]
    return node


def find_node(nodes: list[dict[str, Any]], message_id: str) -> int:
    """Index of the node with ``message_id``, searching from the end (targets are usually recent)."""
    for i in range(len(nodes) - 1, -1, -1):
        if nodes[i]["id"] == message_id:
            return i
    return -1


def apply_surface(state: dict[str, Any], event: Event) -> dict[str, Any]:
    nodes: list[dict[str, Any]] = state["nodes"]
    if event.type == COMPACTION_CHECKPOINT:
        p = event.payload
        summary = {
            "id": p["checkpointId"],
            "role": "user",
            "kind": SUMMARY_NODE_KIND,
            "seq": event.seq,
            "content": [{"type": "text", "text": p["summary"]}],
        }
        # ``sourceEventSeqs`` names the replaced nodes (a node by its seq or an edit it replaced);
        # the rest (the latest exchange, kept verbatim) stays after the summary. Without seqs the
        # whole surface is replaced.
        replaced = set(p.get("sourceEventSeqs") or ())
        kept = [n for n in nodes if n["seq"] not in replaced and not replaced.intersection(n.get("replaces", ()))] if replaced else []
        state["nodes"] = [summary, *kept]
        return state
    if event.type not in (USER_MESSAGE, ASSISTANT_MESSAGE, TOOL_RESULT):
        return state
    new = _node(event)
    op = event.payload.get("surfaceOp") if event.type != TOOL_RESULT else None
    if not op:
        if new is not None:
            nodes.append(new)
        return state
    at = find_node(nodes, op["targetMessageId"])
    if at < 0:
        state["ignoredOps"] += 1
        return state
    # A rewrite puts a new list in place of the old one, which stays as it was: a node list is
    # only ever appended to, so a holder of one (``SurfaceKey``) keeps its prefix without a copy.
    if op["range"] == "node":
        if new is None:
            state["nodes"] = [*nodes[:at], *nodes[at + 1 :]]
        else:
            old = nodes[at]
            new["id"] = old["id"]
            new["replaces"] = old.get("replaces", []) + [old["seq"]]
            state["nodes"] = [*nodes[:at], new, *nodes[at + 1 :]]
    else:
        state["nodes"] = nodes[:at] if new is None else [*nodes[:at], new]
    return state


def rewrites_surface(event: Event) -> bool:
    """Whether ``event`` changes nodes already on the surface (every other event appends or does
    nothing): a message with a ``surfaceOp``, or a compaction checkpoint."""
    if event.type == COMPACTION_CHECKPOINT:
        return True
    return event.type in (USER_MESSAGE, ASSISTANT_MESSAGE) and bool(event.payload.get("surfaceOp"))


def copy_surface(state: dict[str, Any]) -> dict[str, Any]:
    """A copy that folding more events into leaves ``state`` as it was (``Projection.copy``): the
    node list copied, not the nodes, which ``apply_surface`` never changes once on the surface (a
    rewrite puts a new node in its place)."""
    return {**state, "nodes": list(state["nodes"])}


surface_projection = Projection(
    name=SURFACE, version=1, initial=initial_surface, apply=apply_surface, rewrites=rewrites_surface, copy=copy_surface
)


def replaced_seqs(state: dict[str, Any], op: dict[str, Any]) -> list[int] | None:
    """The event seqs whose nodes ``op`` would replace on this surface; None when the target is
    not on the surface. Recorded as ``sourceEventSeqs`` so that owners of business entities can
    be retired (suffix) or migrated (node) from the log alone."""
    nodes = state["nodes"]
    at = find_node(nodes, op["targetMessageId"])
    if at < 0:
        return None
    span = [nodes[at]] if op["range"] == "node" else nodes[at:]
    seqs: list[int] = []
    for node in span:
        seqs.extend(node.get("replaces", []))
        seqs.append(node["seq"])
    return sorted(seqs)


class SurfaceKey:
    """Which node versions a surface holds: an edit, delete or regenerate changes it. Kept as the
    nodes themselves (not a pair per node: a long story's surface has tens of thousands of nodes,
    and the key is taken at every turn but compared only after a rewrite). A node is never changed
    once it is on a surface (a rewrite puts a new node in its place), so the nodes kept say what
    the surface held. Compared by (id, seq).

    A surface's own node list is kept as it is with its length, not copied (issue 12: a copy of a
    long story's list at every turn): ``apply_surface`` only appends to a list (a rewrite makes a
    new one), so its first nodes stay what they were. ``surface_key`` takes such a list; other
    nodes are copied (``SurfaceKey(nodes)``)."""

    __slots__ = ("_nodes", "_count")

    def __init__(self, nodes: Iterable[dict[str, Any]], *, count: int | None = None) -> None:
        kept = nodes if count is not None and isinstance(nodes, list) else tuple(nodes)
        self._nodes: Sequence[dict[str, Any]] = kept
        self._count = len(kept) if count is None or kept is not nodes else count

    def __len__(self) -> int:
        return self._count

    def nodes(self) -> Sequence[dict[str, Any]]:
        """The nodes the surface held."""
        return self._nodes if len(self._nodes) == self._count else self._nodes[: self._count]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SurfaceKey):
            return NotImplemented
        if self._count != other._count:
            return False
        a, b = self._nodes, other._nodes
        return all(x is y or (x["id"] == y["id"] and x["seq"] == y["seq"]) for x, y in zip(islice(a, self._count), b))

    __hash__ = None  # type: ignore[assignment]

    def pairs(self) -> tuple[tuple[str, int], ...]:
        return tuple((n["id"], n["seq"]) for n in islice(self._nodes, self._count))

    def __repr__(self) -> str:
        return f"SurfaceKey({self.pairs()!r})"


def surface_key(nodes: Iterable[dict[str, Any]]) -> SurfaceKey:
    """The key of a surface's node list (``state["nodes"]`` of the surface projection, which
    ``apply_surface`` only appends to), kept without a copy; any other iterable is copied."""
    return SurfaceKey(nodes, count=len(nodes)) if isinstance(nodes, list) else SurfaceKey(nodes)


def to_model_messages(state: dict[str, Any]) -> list[dict[str, Any]]:
    """The surface as neutral chat messages (role, content, toolCalls, toolCallId)."""
    out = []
    for node in state["nodes"]:
        msg: dict[str, Any] = {"role": node["role"], "content": node["content"]}
        if "toolCalls" in node:
            msg["toolCalls"] = node["toolCalls"]
        if node["role"] == "tool":
            msg["toolCallId"] = node["toolCallId"]
            msg["name"] = node["name"]
        out.append(msg)
    return out
