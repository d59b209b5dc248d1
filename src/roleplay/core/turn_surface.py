"""``rp-turn-surface``: each turn's outcome, body owner, commit and deletion semantics, from the log alone.

The spec's rp-message-actions row: "从 Session Log 折叠唯一 ``rp-turn-surface``，显式区分回复
outcome、正文 owner、提交与删除语义". Every message action (edit, delete, regenerate, swipe,
branch, failed-turn recovery) and every view of the conversation (``rp messages``, ``rp play``'s
numbers) reads this one fold, so they never disagree about what a turn is.

Rules, each from the spec:

- **Targets.** Only a user input or an assistant message with visible text becomes an action
  target; blank or tool-only model messages never do (空白或仅含工具调用的模型消息不会建立消息
  操作节点). The runtime's run-context message is part of its turn but never a target either.
- **Retirement.** Only an explicit ``rpMessageAction`` retires a message (只有显式
  ``rpMessageAction`` 才能产生 ``retired``). An edit (``kind: "edit"``) keeps the message live with a
  new version; a compaction checkpoint marks what it covers ``compacted`` (such messages answer
  ``message.not_found``), never retired.
- **Outcome.** ``committed`` (the turn ended with a successful ``rp_commit_turn``), ``uncommitted``
  (it completed without one: a discussion reply), ``failed`` (error or step limit), ``aborted``,
  ``interrupted``, or ``open`` (no ``turn/end`` yet). Of several open turns only the last can be
  the running one; the others are *orphans* (a crash left them; the next run closes them as
  interrupted), shown collapsed with their last readable text as the recovered body.
- **Body owner.** A committed turn's body is the message that owns the successful commit
  (``owner: "commit"``); an uncommitted one's is its last reply with text (``"reply"``); a failed,
  aborted, interrupted or open one shows its last readable text (``"recovered"``), if any.
- **Deletion semantics.** Deleting a committed reply retracts its effects (删除…已提交回复的
  entity 全部失活); an uncommitted one has none to retract; deleting a failed reply keeps the user
  message that triggered it and cuts from the failed model output (删除失败回复: 保留触发失败的该轮
  用户消息), or, with no model output and nothing after it, only hides the failure.
- **Branch anchor.** A committed turn's commit result, a discussion's final assistant message, a
  tool-only turn's last business event (已提交续写以 commit result 为业务锚点…); only closed turns
  have one.
- **Alternatives** (swipes, beyond the spec). A regenerate's replay, delivered as the next turn with
  the same input text, joins the regenerated turn's *group* as a new alternative; a swipe
  re-materialises an alternative as a new turn (``mode: "swipe"``) that takes that alternative's
  place in the group. Derived from the log only, so a replay folds the same groups.

The state is plain JSON (snapshot-safe) and grows with the number of messages and turns.

**Active** (the spec's marker for the running turn) is not in the fold: whether a run holds the
session's lease now is live, not logged. :func:`live_turns` overlays it on the folded view: the last
open turn is ``active`` while the lease is held (asked without taking it), and every other open
turn, that one too when nothing holds the lease, is an orphan (the fold's own ``orphan`` only knows
that a later open turn exists).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from roleplay.harness.events import Event, is_empty_assistant, message_text
from roleplay.harness.leases import lease_taken
from roleplay.harness.projections import Projection
from roleplay.names import ASSET_WRITE_KIND, CONTINUE_SOURCE, MESSAGE_ACTION_SOURCE, RUN_CONTEXT_SOURCE, TURN_COMMIT_KIND
from roleplay.harness.names import ASSISTANT_MESSAGE, COMPACTION_CHECKPOINT, TOOL_RESULT, TURN_END, TURN_START, USER_MESSAGE

from .action_meta import parse_action

if TYPE_CHECKING:
    from .runtime import RoleplayRuntime

TURN_SURFACE = "rp-turn-surface"
VERSION = 1
COMMIT_KIND = TURN_COMMIT_KIND
RUN_CONTEXT = RUN_CONTEXT_SOURCE
SWIPE_MODE = "swipe"
LIVE, RETIRED, COMPACTED = "live", "retired", "compacted"
BODY_OUTCOMES = ("committed", "uncommitted")
_CLOSED_OUTCOMES = {
    "completed": None,  # committed or uncommitted, decided by the commit
    "error": "failed",
    "step-limit": "failed",
    "aborted": "aborted",
    "interrupted": "interrupted",
}


def initial() -> dict[str, Any]:
    return {"v": VERSION, "turns": {}, "order": [], "messages": {}, "groups": {}, "pending": None}


def _turn(state: dict[str, Any], turn_id: str | None) -> dict[str, Any] | None:
    return state["turns"].get(turn_id) if turn_id else None


def apply(state: dict[str, Any], event: Event) -> dict[str, Any]:
    p = event.payload
    kind = event.type
    if kind == TURN_START:
        _start(state, event)
    elif kind == TURN_END:
        turn = _turn(state, p["turnId"])
        if turn is not None:
            turn["endSeq"], turn["end"] = event.seq, p["outcome"]
            if p.get("error"):
                turn["error"] = {"code": p["error"]["code"], "message": p["error"]["message"]}
    elif kind in (USER_MESSAGE, ASSISTANT_MESSAGE):
        if p.get("surfaceOp"):
            _replacement(state, event)
        else:
            action = parse_action(p.get("source"))
            if action is not None:
                _retire(state, action, event)  # e.g. hiding a failure that has nothing to mask
            else:
                _message(state, event)
    elif kind == TOOL_RESULT:
        _tool_result(state, event)
    elif kind == COMPACTION_CHECKPOINT:
        covered = set(p.get("sourceEventSeqs", []))
        for message in state["messages"].values():
            # A checkpoint that names no seqs replaces the whole surface.
            if message["status"] == LIVE and (not covered or covered.intersection(message["versions"])):
                message["status"] = COMPACTED
    return state


def _start(state: dict[str, Any], event: Event) -> None:
    p = event.payload
    turn_id = p["turnId"]
    turn: dict[str, Any] = {
        "turnId": turn_id,
        "startSeq": event.seq,
        "mode": p.get("mode"),
        "endSeq": None,
        "end": None,
        "inputs": [],
        "runContext": None,
        "replies": [],
        "nodes": [],  # every surface node the turn added (tool-only messages and results too)
        "calls": {},
        "commit": None,
        "lastBusinessSeq": None,
        "sharedAssetWrites": False,
        "dismissed": False,
        "group": None,
    }
    state["turns"][turn_id] = turn
    state["order"].append(turn_id)
    pending, state["pending"] = state["pending"], None
    if pending is None:
        return
    if pending["kind"] == "swipe" and p.get("mode") == SWIPE_MODE:
        group = state["groups"].get(pending["group"])
        if group is not None and 0 <= pending["index"] < len(group["alts"]):
            group["alts"][pending["index"]]["current"] = turn_id
            group["live"] = pending["index"]
            turn["group"] = pending["group"]
    elif pending["kind"] == "regenerate":
        turn["replayOf"] = pending  # joins the group once its input is known to be the replay


def _message(state: dict[str, Any], event: Event) -> None:
    p = event.payload
    turn = _turn(state, p.get("turnId"))
    if turn is None:
        return
    turn["nodes"].append(p["messageId"])
    source = p.get("source") or {}
    if event.type == USER_MESSAGE:
        if source.get(RUN_CONTEXT) is not None:
            turn["runContext"] = p["messageId"]
            return
        _add_message(state, event, turn, "user")
        turn["inputs"].append(p["messageId"])
        if source.get(CONTINUE_SOURCE) is not None:
            turn["continues"] = True  # a Continue: its input is an instruction, not the player's text
        replay = turn.pop("replayOf", None)
        if replay is not None and len(turn["inputs"]) == 1 and message_text(p) == replay["text"]:
            _join(state, replay["turnId"], turn)
        return
    for call in p.get("toolCalls") or ():
        turn["calls"][call["id"]] = p["messageId"]
    if is_empty_assistant(p):
        return
    if message_text(p).strip():
        _add_message(state, event, turn, "assistant")
        turn["replies"].append(p["messageId"])
        if not p.get("toolCalls"):
            turn["lastBusinessSeq"] = event.seq


def _add_message(state: dict[str, Any], event: Event, turn: dict[str, Any], role: str) -> None:
    state["messages"][event.payload["messageId"]] = {
        "turnId": turn["turnId"],
        "role": role,
        "seq": event.seq,
        "firstSeq": event.seq,
        "versions": [event.seq],
        "status": LIVE,
    }


def _join(state: dict[str, Any], regenerated: str, turn: dict[str, Any]) -> None:
    """A delivered replay: ``turn`` becomes a new alternative of the regenerated turn's group."""
    old = state["turns"].get(regenerated)
    if old is None:
        return
    group_id = old["group"] or regenerated
    group = state["groups"].setdefault(group_id, {"alts": [{"turnId": regenerated, "current": regenerated}], "live": 0})
    old["group"] = group_id
    group["alts"].append({"turnId": turn["turnId"], "current": turn["turnId"]})
    group["live"] = len(group["alts"]) - 1
    turn["group"] = group_id


def _replacement(state: dict[str, Any], event: Event) -> None:
    p = event.payload
    op = p["surfaceOp"]
    action = parse_action(p.get("source"))
    target = state["messages"].get(op["targetMessageId"])
    visible = not (event.type == ASSISTANT_MESSAGE and is_empty_assistant(p))
    if op["range"] == "node" and visible and target is not None and target["status"] == LIVE:
        target["seq"] = event.seq  # an edit: same message, new version
        target["versions"].append(event.seq)
        target["edits"] = target.get("edits", 0) + 1
    if action is None:
        raw = (p.get("source") or {}).get(MESSAGE_ACTION_SOURCE)
        if isinstance(raw, dict) and op["range"] == "node" and not visible and target is not None and target["status"] == LIVE:
            target["status"], target["retiredSeq"] = RETIRED, event.seq  # e.g. an opening removed by re-choosing none
        return
    _retire(state, action, event)


def _retire(state: dict[str, Any], action: Any, event: Event) -> None:
    # Any later action supersedes an undelivered replay: the conversation it was for has changed.
    state["pending"] = None
    if action.kind != "edit":
        for message_id in action.message_ids:
            message = state["messages"].get(message_id)
            if message is not None and message["status"] == LIVE:
                message["status"] = RETIRED
                message["retiredSeq"] = event.seq
        for turn_id in action.turn_ids:
            turn = state["turns"].get(turn_id)
            if turn is not None:
                turn["dismissed"] = True
    if action.kind == "regenerate" and action.replay is not None:
        texts = action.replay.get("texts") or []
        state["pending"] = {
            "kind": "regenerate",
            "turnId": action.replay.get("turnId"),
            "replayId": action.replay.get("replayId"),
            "text": "\n\n".join(t for t in texts if isinstance(t, str)),
            "seq": event.seq,
        }
    elif action.kind == "swipe" and action.swipe is not None:
        state["pending"] = {"kind": "swipe", "group": action.swipe.get("group"), "index": action.swipe.get("index"), "seq": event.seq}


def _tool_result(state: dict[str, Any], event: Event) -> None:
    p = event.payload
    turn = _turn(state, p.get("turnId"))
    if turn is None:
        return
    turn["nodes"].append(f"tool:{p['callId']}")
    meta = p.get("meta") or {}
    if not p["ok"]:
        return
    if meta.get("kind") == COMMIT_KIND and turn["calls"].get(p["callId"]) is not None:
        turn["commit"] = {
            "messageId": turn["calls"][p["callId"]],
            "callId": p["callId"],
            "resultSeq": event.seq,
            "effects": len(meta.get("effects") or []),
            "extensions": sorted((meta.get("extensions") or {}).keys()) if isinstance(meta.get("extensions"), dict) else [],
        }
    if meta.get("kind") == ASSET_WRITE_KIND and meta.get("target") == "asset":
        turn["sharedAssetWrites"] = True
    turn["lastBusinessSeq"] = event.seq


turn_surface_projection = Projection(name=TURN_SURFACE, version=VERSION, initial=initial, apply=apply)


# -- reading the fold -------------------------------------------------------------------------------


def outcome(turn: dict[str, Any]) -> str:
    if turn["endSeq"] is None:
        return "open"
    closed = _CLOSED_OUTCOMES.get(turn["end"], "failed")
    if closed is None:
        return "committed" if turn["commit"] is not None else "uncommitted"
    return closed


def is_live(state: dict[str, Any], message_id: str | None) -> bool:
    message = state["messages"].get(message_id) if message_id else None
    return message is not None and message["status"] == LIVE


def body(state: dict[str, Any], turn: dict[str, Any]) -> dict[str, Any] | None:
    """The message that shows the turn's reply, and why it is that one."""
    result = outcome(turn)
    if result == "committed":
        owner, message_id = "commit", turn["commit"]["messageId"]
    elif turn["replies"]:
        owner, message_id = ("reply" if result == "uncommitted" else "recovered"), turn["replies"][-1]
    else:
        return None
    return {"messageId": message_id, "owner": owner, "live": is_live(state, message_id)}


def anchor_seq(turn: dict[str, Any]) -> int | None:
    """The business anchor a branch at this turn keeps (closed turns only)."""
    if turn["endSeq"] is None:
        return None
    if turn["commit"] is not None:
        return int(turn["commit"]["resultSeq"])
    if turn["lastBusinessSeq"] is not None:
        return int(turn["lastBusinessSeq"])
    return None


def live_inputs(state: dict[str, Any], turn: dict[str, Any]) -> list[str]:
    return [m for m in turn["inputs"] if is_live(state, m)]


def turn_is_live(state: dict[str, Any], turn: dict[str, Any]) -> bool:
    """On the conversation: some message of it (an input or a reply) is live."""
    return any(is_live(state, m) for m in [*turn["inputs"], *turn["replies"]])


def failure_shown(state: dict[str, Any], turn: dict[str, Any]) -> bool:
    """A failed, aborted, interrupted or orphaned turn shows its failure until it is deleted."""
    return outcome(turn) not in (*BODY_OUTCOMES, "open") and not turn["dismissed"] and turn_is_live(state, turn)


def alternatives(state: dict[str, Any], turn: dict[str, Any]) -> dict[str, Any] | None:
    """The turn's alternatives (each with its index), when it belongs to a group of more than one
    reply, or when the live attempt failed and an earlier reply is there to swipe back to (``index``
    None). Failed attempts in the group (a retried failure) are not alternatives."""
    group = state["groups"].get(turn["group"]) if turn["group"] else None
    if group is None:
        return None
    items: list[dict[str, Any]] = []
    for raw, alt in enumerate(group["alts"]):
        current = state["turns"].get(alt["current"])
        if current is None or outcome(current) not in BODY_OUTCOMES:
            continue
        items.append(
            {"index": len(items), "raw": raw, "turnId": alt["turnId"], "currentTurnId": alt["current"], "live": raw == group["live"]}
        )
    live = next((i["index"] for i in items if i["live"]), None)
    # One reply is no choice, unless the live attempt is a failure: then it is the way back.
    if len(items) < 2 and not (items and live is None):
        return None
    return {"group": turn["group"], "index": live, "count": len(items), "items": items}


def deletion(state: dict[str, Any], turn: dict[str, Any]) -> dict[str, Any]:
    result = outcome(turn)
    if result in BODY_OUTCOMES:
        return {"keepsInput": False, "retracts": result == "committed"}
    return {"keepsInput": True, "retracts": False, "hidesFailureOnly": not any(is_live(state, m) for m in turn["replies"])}


def last_live_turn(state: dict[str, Any]) -> dict[str, Any] | None:
    for turn_id in reversed(state["order"]):
        turn = state["turns"][turn_id]
        if turn_is_live(state, turn):
            return turn
    return None


def turn_view(state: dict[str, Any], turn: dict[str, Any], *, last: bool = False, open_ids: tuple[str, ...] = ()) -> dict[str, Any]:
    result = outcome(turn)
    view: dict[str, Any] = {
        "turnId": turn["turnId"],
        "mode": turn["mode"],
        "outcome": result,
        "startSeq": turn["startSeq"],
        "endSeq": turn["endSeq"],
        "inputs": live_inputs(state, turn),
        "body": body(state, turn),
        "commit": turn["commit"],
        "deletion": deletion(state, turn),
        "anchorSeq": anchor_seq(turn),
        "sharedAssetWrites": turn["sharedAssetWrites"],
        "regenerable": last
        and bool(live_inputs(state, turn))
        and not turn["sharedAssetWrites"]
        and not turn.get("continues")
        and result != "open",
        "alternatives": alternatives(state, turn),
        "failureShown": failure_shown(state, turn),
    }
    if result == "open":
        # Only the last open turn can be the running one; the others are orphans of a crash.
        view["orphan"] = bool(open_ids) and turn["turnId"] != open_ids[-1]
    if turn.get("error"):
        view["error"] = turn["error"]
    return view


def turns_view(state: dict[str, Any]) -> list[dict[str, Any]]:
    """Every turn still on the conversation, oldest first, as the actions and views read it."""
    live = [state["turns"][t] for t in state["order"] if turn_is_live(state, state["turns"][t])]
    open_ids = tuple(t["turnId"] for t in live if t["endSeq"] is None)
    return [turn_view(state, t, last=i == len(live) - 1, open_ids=open_ids) for i, t in enumerate(live)]


def running_turn(views: list[dict[str, Any]], running: bool) -> str | None:
    """The active turn of ``turns_view``'s list: the last open one, while a run holds the lease."""
    open_ids = [v["turnId"] for v in views if v["outcome"] == "open"]
    return open_ids[-1] if running and open_ids else None


def mark_active(views: list[dict[str, Any]], running: bool) -> list[dict[str, Any]]:
    """``views`` with the live overlay: ``active`` on every turn, ``orphan`` on every open one."""
    active = running_turn(views, running)
    for view in views:
        view["active"] = view["turnId"] == active
        if view["outcome"] == "open":
            view["orphan"] = not view["active"]
    return views


async def live_turns(rt: RoleplayRuntime, session_id: str) -> dict[str, Any]:
    """``{"running", "activeTurnId", "turns"}``: the folded turns with the live ``active`` overlay."""
    state = (await rt.service.projection(session_id, turn_surface_projection)).state
    running = await lease_taken(rt.store, session_id)  # after the read: a turn started since is not in it
    views = mark_active(turns_view(state), running)
    return {"running": running, "activeTurnId": running_turn(views, running), "turns": views}
