"""Branch a story at a business anchor; list a story's branches as a tree.

The spec (数据所有权与消息实体): a branch calls the native ``forkAt``; a committed continuation is
anchored at its commit result, a discussion at its final assistant message, a tool-only reply at
the turn's last business event. Never mid-turn (``harness.fork_points``): the fork keeps the whole
anchor turn (its ``turn/end``) and whatever was logged between it and the next turn (an edit of
its reply, a profile change), so the branch holds the log exactly as it stood right after that
turn. The new session folds the same state, reply options and summary slot as the source did at
that point; the source is untouched. Forking before a compaction checkpoint gives back the
original messages with no summary; after it, the checkpoint and its summary stay (spec).

Message actions never create other sessions; a branch is its own action (``rp branch``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from roleplay.errors import RpError
from roleplay.harness.fork_points import ForkPoint, after_turn_fork_point
from roleplay.harness.leases import run_lease
from roleplay.harness.store.base import SessionFilter, SessionRecord

from .message_actions import read_views, target_message
from .runtime import RoleplayRuntime
from .turn_surface import anchor_seq, last_live_turn, outcome

TREE_LIMIT = 10_000


@dataclass(frozen=True)
class Branch:
    record: SessionRecord
    source_id: str
    turn_id: str
    anchor_seq: int
    point: ForkPoint

    def to_dict(self) -> dict[str, Any]:
        return {
            "sessionId": self.record.id,
            "title": self.record.title,
            "sourceSessionId": self.source_id,
            "turnId": self.turn_id,
            "anchorSeq": self.anchor_seq,
            "forkedAtSeq": self.point.at_seq,
        }


async def branch(
    rt: RoleplayRuntime, session_id: str, *, at_message: str | None = None, at_turn: str | None = None, title: str | None = None
) -> Branch:
    """Fork ``session_id`` after the turn of ``at_message`` or after ``at_turn`` (default: the last
    closed turn). A turn id reaches turns a compaction summarised, whose messages are no longer
    targets: the branch then has the original messages and no summary (spec)."""
    async with run_lease(rt.store, session_id):
        views = await read_views(rt, session_id)
        if at_turn is not None:
            turn = views.turns["turns"].get(at_turn)
            if turn is None:
                raise RpError("turn.not_found", f"no turn {at_turn!r} in this session", pointer="/turnId")
            if outcome(turn) == "open":
                raise RpError("branch.turn_open", f"turn {at_turn!r} has not ended", pointer="/turnId")
        elif at_message is None:
            turn = last_live_turn(views.turns)
            turns = views.turns["turns"]
            while turn is not None and anchor_seq(turn) is None:
                earlier = [t for t in views.turns["order"] if turns[t]["startSeq"] < turn["startSeq"] and anchor_seq(turns[t]) is not None]
                turn = turns[earlier[-1]] if earlier else None
            if turn is None:
                raise RpError("branch.no_anchor", "the story has no closed turn to branch from yet")
        else:
            message = target_message(views, at_message)
            turn = views.turns["turns"][message["turnId"]]
            if outcome(turn) == "open":
                raise RpError("branch.turn_open", f"message {at_message!r} belongs to a turn that has not ended", pointer="/messageId")
        anchor = anchor_seq(turn)
        if anchor is None:
            raise RpError(
                "branch.no_anchor", f"turn {turn['turnId']} has no business anchor (nothing was said or done in it)", pointer="/messageId"
            )
        point = await after_turn_fork_point(rt.store, session_id, int(turn["endSeq"]))
        source = await rt.service.get(session_id)
        record = await rt.store.fork(session_id, point.at_seq, title=title or _branch_title(source))
    return Branch(record, session_id, turn["turnId"], anchor, point)


def _branch_title(source: SessionRecord) -> str | None:
    return f"{source.title} (branch)" if source.title else None


async def branch_tree(rt: RoleplayRuntime, session_id: str) -> dict[str, Any]:
    """The story's branches as a tree from its root: ``{sessionId, title, forkedAtSeq, archived,
    current, branches: […]}``, children oldest first."""
    await rt.service.get(session_id)
    records = await rt.store.list_sessions(SessionFilter(archived=None, roots_only=True, limit=TREE_LIMIT))
    by_id = {r.id: r for r in records}
    if session_id not in by_id:
        by_id[session_id] = await rt.service.get(session_id)
    children: dict[str, list[SessionRecord]] = {}
    for record in by_id.values():
        if record.forked_from is not None:
            children.setdefault(record.forked_from, []).append(record)
    root = by_id[session_id]
    seen = {root.id}
    while root.forked_from is not None and root.forked_from in by_id and root.forked_from not in seen:
        root = by_id[root.forked_from]
        seen.add(root.id)

    def node(record: SessionRecord) -> dict[str, Any]:
        kids = sorted(children.get(record.id, []), key=lambda r: (r.created_at, r.id))
        return {
            "sessionId": record.id,
            "title": record.title,
            "forkedAtSeq": record.forked_at_seq,
            "archived": record.archived,
            "current": record.id == session_id,
            "branches": [node(k) for k in kids],
        }

    return node(root)


def render_tree(tree: dict[str, Any]) -> list[str]:
    lines: list[str] = []

    def walk(node: dict[str, Any], prefix: str, last: bool, top: bool) -> None:
        label = node["sessionId"] + (f" · {node['title']}" if node["title"] else "")
        if node["forkedAtSeq"] is not None:
            label += f" · from seq {node['forkedAtSeq']}"
        if node["archived"]:
            label += " · archived"
        if node["current"]:
            label += "  ← this story"
        lines.append(label if top else f"{prefix}{'└─ ' if last else '├─ '}{label}")
        child_prefix = "" if top else prefix + ("   " if last else "│  ")
        for i, child in enumerate(node["branches"]):
            walk(child, child_prefix, i == len(node["branches"]) - 1, False)

    walk(tree, "", True, True)
    return lines
