"""Swipes: make an earlier alternative of the last reply live again, with its own state.

Beyond the spec (no peer restores state per swipe). Every regenerate keeps the reply it replaced
as an alternative of that turn (``core.turn_surface`` groups them). A swipe makes another
alternative the live reply through a surface replacement, like a regenerate, except that the
new turn is not asked of a model: it re-materialises the alternative from the log.

One atomic append (a CAS on the head the swipe read):

1. an empty ``assistant/message`` ``suffix`` replacement with ``rpMessageAction {kind: "swipe",
   targets, swipe: {group, index, turnId, fromTurnId}}``: the displaced reply's turn leaves the
   surface, and its committed entities retire with it (the entity rules of ``harness.entities``);
2. a closed turn (``turn/start {mode: "swipe"}`` … ``turn/end completed``) holding the
   alternative's user input and run context as they stand now, and its body; for a committed
   alternative the body message calls ``rp_commit_turn`` and the ``tool/result`` carries the
   alternative's commit ``meta`` (its ``turnId`` now the new turn's, ``swipeOf`` naming the turn it
   came from), so its effects, reply options and other extensions become live again, owned by the
   new message.

The alternative's effects apply to exactly the state they were first committed on: alternatives
only exist for the last turn, and the replacement has just retracted everything after the turn
before it. Since the whole swipe is events, a replay of the log folds the same state.
"""

from __future__ import annotations

from typing import Any, Literal

from roleplay.errors import RpError
from roleplay.harness.events import Event, EventDraft
from roleplay.harness.leases import run_lease
from roleplay.names import COMMIT_TURN_TOOL
from roleplay.harness.names import ASSISTANT_MESSAGE, STEP_END, STEP_START, TOOL_CALL, TOOL_RESULT, TURN_END, TURN_START, USER_MESSAGE

from .action_meta import ACTION_KEY, action_metadata, message_target
from .message_actions import Views, read_views
from .runtime import RoleplayRuntime
from .turn_surface import SWIPE_MODE, alternatives, last_live_turn, live_inputs, outcome

SWIPE_SOURCE = "rpSwipe"
COMMIT_TOOL = COMMIT_TURN_TOOL


def _current_alternatives(views: Views) -> tuple[dict[str, Any], dict[str, Any]]:
    turn = last_live_turn(views.turns)
    alts = alternatives(views.turns, turn) if turn is not None else None
    if turn is None or alts is None:
        raise RpError("message.no_alternatives", "the last reply has no alternatives yet; regenerate it to make one")
    if outcome(turn) == "open":
        raise RpError("message.turn_open", f"turn {turn['turnId']} has not ended")
    return turn, alts


async def swipe(rt: RoleplayRuntime, session_id: str, direction: Literal["left", "right"] | int) -> dict[str, Any]:
    """Make the previous (``left``), next (``right``) or ``index``-th alternative of the last reply
    live; returns ``{index, count, turnId}`` of the new live turn."""
    async with run_lease(rt.store, session_id):
        views = await read_views(rt, session_id)
        turn, alts = _current_alternatives(views)
        # A failed live attempt stands after the last reply: left goes back to that reply.
        current = alts["index"] if alts["index"] is not None else alts["count"]
        if isinstance(direction, int) and not isinstance(direction, bool):
            wanted = direction
        elif direction in ("left", "right"):
            wanted = current - 1 if direction == "left" else current + 1
        else:
            raise RpError("message.swipe_direction", f"swipe left, right or to an index (got {direction!r})", pointer="/direction")
        if not 0 <= wanted < alts["count"]:
            edge = "first" if wanted < 0 else "last"
            raise RpError(
                "message.no_alternative",
                f"this is the {edge} of {alts['count']} alternatives" + ("; regenerate to make another" if edge == "last" else ""),
                details={"index": current, "count": alts["count"]},
            )
        if wanted == alts["index"]:
            return {"index": current, "count": alts["count"], "turnId": turn["turnId"]}
        item = alts["items"][wanted]
        drafts = await _materialise(rt, session_id, views, turn, alts["group"], item)
        events = await rt.service.append(session_id, drafts, expected_seq=views.head)
    new_turn = next(e.payload["turnId"] for e in events if e.type == TURN_START)
    return {"index": wanted, "count": alts["count"], "turnId": new_turn}


async def _event_at(rt: RoleplayRuntime, session_id: str, seq: int) -> Event:
    events = await rt.service.events(session_id, after_seq=seq - 1, until_seq=seq)
    return events[0]


async def _latest(rt: RoleplayRuntime, session_id: str, views: Views, message_id: str) -> Event:
    """The message's current version (an edit made after it was displaced included)."""
    return await _event_at(rt, session_id, int(views.turns["messages"][message_id]["seq"]))


async def _materialise(
    rt: RoleplayRuntime, session_id: str, views: Views, live_turn: dict[str, Any], group: str, item: dict[str, Any]
) -> list[EventDraft]:
    turns = views.turns["turns"]
    source = turns[item["currentTurnId"]]
    first = live_inputs(views.turns, live_turn)
    start_at = first[0] if first else next(m for m in live_turn["replies"] if views.turns["messages"][m]["status"] == "live")
    index = next(i for i, n in enumerate(views.nodes) if n["id"] == start_at)
    targets = [message_target(n["id"]) for n in views.nodes[index:] if n["role"] in ("user", "assistant")]
    swipe_meta = {"group": group, "index": item["raw"], "turnId": item["turnId"], "fromTurnId": live_turn["turnId"]}
    carrier = {
        "messageId": rt.ids("msg_"),
        "content": [],
        "source": {ACTION_KEY: action_metadata("swipe", targets, swipe=swipe_meta)},
        "surfaceOp": {"op": "replace", "range": "suffix", "targetMessageId": start_at},
    }
    turn_id, step_id = rt.ids("turn_"), rt.ids("step_")
    drafts = [EventDraft(ASSISTANT_MESSAGE, carrier)]
    inputs = [await _latest(rt, session_id, views, m) for m in source["inputs"]]
    drafts.append(EventDraft(TURN_START, {"turnId": turn_id, "mode": SWIPE_MODE, "inputMessageId": rt.ids("msg_")}))
    input_id = drafts[-1].payload["inputMessageId"]
    for n, event in enumerate(inputs):
        drafts.append(
            EventDraft(
                USER_MESSAGE,
                {"messageId": input_id if n == 0 else rt.ids("msg_"), "content": event.payload["content"], "turnId": turn_id},
            )
        )
    if source["runContext"] is not None:
        context = await _context_event(rt, session_id, source)
        if context is not None:
            drafts.append(
                EventDraft(
                    USER_MESSAGE,
                    {
                        "messageId": rt.ids("msg_"),
                        "content": context.payload["content"],
                        "turnId": turn_id,
                        "source": context.payload["source"],
                    },
                )
            )
    drafts.append(EventDraft(STEP_START, {"turnId": turn_id, "stepId": step_id, "index": 0}))
    body_id = source["commit"]["messageId"] if source["commit"] is not None else source["replies"][-1]
    body = await _latest(rt, session_id, views, body_id)
    reply: dict[str, Any] = {
        "messageId": rt.ids("msg_"),
        "content": body.payload["content"],
        "turnId": turn_id,
        "stepId": step_id,
        "source": {SWIPE_SOURCE: {"turnId": item["turnId"], "messageId": body_id}},
    }
    if body.payload.get("model") is not None:
        reply["model"] = body.payload["model"]
    if source["commit"] is None:
        drafts.append(EventDraft(ASSISTANT_MESSAGE, reply))
    else:
        result = await _event_at(rt, session_id, int(source["commit"]["resultSeq"]))
        call_id = rt.ids("call_")
        arguments = _call_arguments(body, source["commit"]["callId"])
        reply["toolCalls"] = [{"id": call_id, "name": COMMIT_TOOL, "arguments": arguments}]
        outcome_payload = {k: v for k, v in result.payload.items() if k in ("content", "meta", "ok", "name")}
        # The commit is the alternative's, now made by this turn: consumers that key a reply's
        # extensions by turn (reply options) find it under the live turn.
        outcome_payload["meta"] = {**outcome_payload["meta"], "turnId": turn_id, "swipeOf": {"turnId": source["turnId"]}}
        drafts += [
            EventDraft(ASSISTANT_MESSAGE, reply),
            EventDraft(TOOL_CALL, {"callId": call_id, "name": COMMIT_TOOL, "arguments": arguments, "turnId": turn_id, "stepId": step_id}),
            EventDraft(TOOL_RESULT, {**outcome_payload, "callId": call_id, "turnId": turn_id, "stepId": step_id}),
        ]
    drafts += [
        EventDraft(STEP_END, {"turnId": turn_id, "stepId": step_id}),
        EventDraft(TURN_END, {"turnId": turn_id, "outcome": "completed"}),
    ]
    return drafts


def _call_arguments(body: Event, call_id: str) -> str:
    for call in body.payload.get("toolCalls") or ():
        if call["id"] == call_id:
            return str(call["arguments"])
    return "{}"


async def _context_event(rt: RoleplayRuntime, session_id: str, source: dict[str, Any]) -> Event | None:
    end = source["endSeq"] or source["startSeq"]
    for event in await rt.service.events(session_id, after_seq=source["startSeq"] - 1, until_seq=end):
        if event.type == USER_MESSAGE and event.payload["messageId"] == source["runContext"]:
            return event
    return None
