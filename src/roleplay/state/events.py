"""State entities from native events: the ``rp/state`` and ``rp/state/activity`` projections.

The spec forbids new event types, so State rides on three native carriers (docs/state.md):

* **bootstrap**: ``command/run {name: "rp-session-apply", args: {stateBootstrap, …}}`` with a
  paired ``command/done {kind: "success"}``. Counted only while the session is *blank*, i.e. no
  ``user/message`` has been logged yet ("State bootstrap 只在创建空白会话或空白会话重选开场资料时
  替换；进入对话后不再从共享资产重新计算"). The latest one wins: a newer bootstrap supersedes the
  older one instead of folding on top of it. Unowned, so never retracted.
* **configuration**: ``command/run {name: "rp-state-configure", args: {v: 3, input, result,
  owner}}`` + ``command/done {kind: "success"}``. Business root = the done; surface owner = the
  assistant message that called ``rp_state`` (``owner.messageId``), validated against the call
  index (message, tool call id, native ``tool/call``, turn, step, tool name). An inconsistent
  owner forms no entity and leaves a diagnostic.
* **commit**: ``tool/result {ok: true, meta: {kind: "rp-agent/turn-commit", effects: […]}}``.
  Business root = that result; owner = the assistant message whose ``toolCalls`` holds its call
  id. Only ``state.update`` effects matter here; a commit without any still clears activity.

Failed commands (``command/done {kind: "error"}``, a run without a done) and failed tool results
change nothing.

Folding order is business-root seq order (the spec: "按业务根事件序号合并 bootstrap、剩余配置
entity 和剩余剧情提交 entity"). Ownership comes from :mod:`roleplay.harness.entities`.

**Incremental folding with retraction.** A delete can retract an *old* entity, and the pure folds
of :mod:`roleplay.state.projection` cannot be undone, so the projection state keeps:

* ``base``: the view after every entity that can never be retracted any more (bootstrap, and
  whatever a compaction checkpoint kept). While the session is blank nothing is moved into it,
  because a later bootstrap must still be able to supersede an earlier one;
* ``entities`` (inside the folder): the still-effective, still-retractable entities in root order;
* ``view``: ``base`` folded with ``entities``: what consumers read.

A new entity folds onto ``view``; a retraction (or a superseding bootstrap) refolds ``view`` from
``base`` over the remaining entities. Every step is a deterministic function of the previous state
and the event, so a rebuild from seq 0 equals any snapshot-plus-tail load, and the view always
equals folding the effective entities from scratch (both property-tested).
"""

from __future__ import annotations

from typing import Any

from roleplay.harness import entities as folder
from roleplay.harness.events import Event
from roleplay.harness.projections import Projection
from roleplay.names import SESSION_APPLY_COMMAND, STATE_CONFIGURE_COMMAND, STATE_CONFIGURE_TOOL, TURN_COMMIT_KIND
from roleplay.state.operations import EFFECT_KIND
from roleplay.state.projection import empty_view, fold
from roleplay.state.shape import ACTIVITY_PROJECTION, ACTIVITY_VERSION, STATE_PROJECTION, STATE_VERSION
from roleplay.harness.names import COMMAND_DONE, COMMAND_RUN, TOOL_RESULT, USER_MESSAGE

SESSION_APPLY = SESSION_APPLY_COMMAND
CONFIGURE = STATE_CONFIGURE_COMMAND
CONFIGURE_VERSION = 3
STATE_TOOL = STATE_CONFIGURE_TOOL
MAX_DIAGNOSTICS = 20  # a sliding window: anomalies stay visible without growing the state forever

# The activity fold depends on the state fold, so its version moves with either.
ACTIVITY_FOLD_VERSION = STATE_VERSION * 100 + ACTIVITY_VERSION


def initial_tracker() -> dict[str, Any]:
    view = empty_view()
    return {"blank": True, "runs": {}, "folder": folder.initial(), "base": view, "view": view, "diagnostics": []}


def apply_event(tracker: dict[str, Any], event: Event) -> dict[str, Any]:
    """Fold one native event (the projections' ``apply``; mutates and returns ``tracker``)."""
    f = tracker["folder"]
    refold = bool(folder.observe(f, event))
    p = event.payload
    added: dict[str, Any] | None = None
    if event.type == USER_MESSAGE:
        tracker["blank"] = False
    elif event.type == COMMAND_RUN and p["name"] in (SESSION_APPLY, CONFIGURE):
        tracker["runs"][p["commandId"]] = {"name": p["name"], "args": p["args"], "seq": event.seq}
    elif event.type == COMMAND_DONE:
        run = tracker["runs"].pop(p["commandId"], None)
        if run is not None and p["kind"] == "success":
            if run["name"] == SESSION_APPLY:
                added, superseded = _bootstrap(tracker, run, event)
                refold = refold or superseded
            else:
                added = _configuration(tracker, run, event)
    elif event.type == TOOL_RESULT and p["ok"] and (p.get("meta") or {}).get("kind") == TURN_COMMIT_KIND:
        added = _commit(tracker, event)
    folder.settle(f, event)
    if refold:
        tracker["view"] = _fold_all(tracker["base"], f["entities"])
    elif added is not None:
        tracker["view"] = fold(tracker["view"], added["kind"], added["payload"])
    if not tracker["blank"]:
        settled = folder.pop_permanent_prefix(f)
        if settled:
            # With nothing retractable left, base and view are the same fold: reuse it.
            tracker["base"] = tracker["view"] if not f["entities"] else _fold_all(tracker["base"], settled)
    return tracker


def _fold_all(view: dict[str, Any], entities: list[dict[str, Any]]) -> dict[str, Any]:
    for entity in entities:
        view = fold(view, entity["data"]["kind"], entity["data"]["payload"])
    return view


def _diagnose(tracker: dict[str, Any], code: str, message: str, seq: int, pointer: str | None = None) -> None:
    item: dict[str, Any] = {"code": code, "message": message, "seq": seq}
    if pointer is not None:
        item["pointer"] = pointer
    tracker["diagnostics"] = (tracker["diagnostics"] + [item])[-MAX_DIAGNOSTICS:]


# -- the three entity kinds ------------------------------------------------------------------------


def _bootstrap(tracker: dict[str, Any], run: dict[str, Any], done: Event) -> tuple[dict[str, Any] | None, bool]:
    args = run["args"]
    if "stateBootstrap" not in args:
        return None, False  # a profile-only apply: the bootstrap stays as it was
    if not tracker["blank"]:
        _diagnose(
            tracker,
            "state.bootstrap.not_blank",
            "a state bootstrap after the first user message is ignored",
            done.seq,
            "/args/stateBootstrap",
        )
        return None, False
    payload = args["stateBootstrap"]
    if not isinstance(payload, dict) or not isinstance(payload.get("namespaces"), dict):
        _diagnose(tracker, "state.bootstrap.malformed", 'stateBootstrap must be {"namespaces": {…}}', done.seq, "/args/stateBootstrap")
        return None, False
    f = tracker["folder"]
    superseded = False
    for entity in list(f["entities"]):
        if entity["data"]["kind"] == "bootstrap":
            folder.remove(f, entity["root"])
            superseded = True
    data = {"kind": "bootstrap", "payload": payload}
    folder.add(f, done.seq, None, data)
    # When an older bootstrap was removed the caller refolds everything; otherwise fold the new one.
    return (None if superseded else data), superseded


_OWNER_FIELDS = ("messageId", "toolCallId", "turnId", "stepId", "tool")


def _configuration(tracker: dict[str, Any], run: dict[str, Any], done: Event) -> dict[str, Any] | None:
    args = run["args"]
    if args.get("v") != CONFIGURE_VERSION:
        # The spec: old configuration commands are neither migrated nor silently downgraded.
        _diagnose(tracker, "state.config.unsupported_version", f"{CONFIGURE} args must have v {CONFIGURE_VERSION}", done.seq, "/args/v")
        return None
    if not isinstance(args.get("result"), dict):
        _diagnose(tracker, "state.config.result_missing", "a configuration needs its canonical result", done.seq, "/args/result")
        return None
    owner_seq, problem = resolve_owner(tracker["folder"], args.get("owner"))
    if problem is not None:
        _diagnose(tracker, "state.config.owner_inconsistent", problem[1], done.seq, problem[0])
        return None
    data = {"kind": "config", "payload": args["result"]}
    if not folder.add(tracker["folder"], done.seq, owner_seq, data):
        return None  # its reply was deleted or regenerated before the command finished
    return data


def resolve_owner(f: dict[str, Any], owner: Any) -> tuple[int | None, tuple[str, str] | None]:
    """The seq of the assistant message an ``rp_state`` owner names, or (pointer, reason).

    Consistent means: the message made that (still unanswered) tool call, the native ``tool/call``
    was logged, and message, call, turn, step and tool name all agree.
    """
    if not isinstance(owner, dict):
        return None, ("/args/owner", "owner must be an object")
    for key in _OWNER_FIELDS:
        if not isinstance(owner.get(key), str) or not owner[key]:
            return None, (f"/args/owner/{key}", f"owner.{key} must be a non-empty string")
    if owner["tool"] != STATE_TOOL:
        return None, ("/args/owner/tool", f"owner.tool must be {STATE_TOOL!r}")
    call = f["calls"].get(owner["toolCallId"])
    if call is None:
        return None, ("/args/owner/toolCallId", "no unanswered tool call with that id")
    if call["messageId"] != owner["messageId"]:
        return None, ("/args/owner/messageId", "that tool call was made by another message")
    native = call.get("toolCall")
    if native is None:
        return None, ("/args/owner/toolCallId", "the native tool/call event is missing")
    for key, value in (("tool", owner["tool"]), ("turnId", owner["turnId"]), ("stepId", owner["stepId"])):
        field = "name" if key == "tool" else key
        if call.get(field) != value or native.get(field) != value:
            return None, (f"/args/owner/{key}", f"owner.{key} does not match the assistant message and its tool call")
    return call["seq"], None


def _commit(tracker: dict[str, Any], result: Event) -> dict[str, Any] | None:
    meta = result.payload["meta"]
    effects = meta.get("effects")
    if not isinstance(effects, list):
        _diagnose(tracker, "state.commit.effects_missing", "a turn commit result needs meta.effects (a list)", result.seq, "/meta/effects")
        return None
    call = tracker["folder"]["calls"].get(result.payload["callId"])
    if call is None:
        _diagnose(tracker, "state.commit.owner_missing", "no assistant message made this call", result.seq, "/callId")
        return None
    updates = [e for e in effects if isinstance(e, dict) and e.get("kind") == EFFECT_KIND]
    data = {"kind": "commit", "payload": {"effects": updates}}
    if not folder.add(tracker["folder"], result.seq, call["seq"], data):
        return None
    return data


# -- projections -----------------------------------------------------------------------------------


def state_document(tracker: dict[str, Any]) -> dict[str, Any]:
    """The ``rp.state`` v2 document (rp-state-v2 §Projection) out of a projection state."""
    return tracker["view"]["state"]


def activity_document(tracker: dict[str, Any]) -> dict[str, Any]:
    """``{"namespaces": {name: [{op, path, before, after, reason, …}]}}`` of the latest
    still-effective successful reply."""
    return tracker["view"]["activity"]


state_projection = Projection(name=STATE_PROJECTION, version=STATE_VERSION, initial=initial_tracker, apply=apply_event)

# Same events, same entity lifecycle (the spec: "该投影与 rp/state 使用相同事件和助手 entity 生命周期
# 重放"); read it with ``activity_document``. Its own name for its readers, but the same tracker as
# ``rp/state`` (same initial state, same apply): it is folded, cached and snapshotted as that one
# (``state_of``), so each event is folded once, not twice (issue 16). Its version stays as it was.
activity_projection = Projection(
    name=ACTIVITY_PROJECTION, version=ACTIVITY_FOLD_VERSION, initial=initial_tracker, apply=apply_event, state_of=state_projection
)
