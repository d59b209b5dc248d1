"""State entities from native events: the ``rp/state`` and ``rp/state/activity`` projections.

The central property: the fold of a log with deletes and regenerates equals the fold of the same
log without the retracted replies; and a rebuild from zero equals any snapshot-plus-tail load.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roleplay.canonical import canonical_json
from roleplay.harness import entities as ent
from roleplay.errors import RpError
from roleplay.harness.events import Event, EventDraft, validate_payload
from roleplay.harness.projections import fold as fold_projection, load, roundtrip, write_snapshot
from roleplay.harness.sessions import SessionService
from roleplay.harness.store import EventStore
from roleplay.harness.surface import apply_surface, find_node, initial_surface, replaced_seqs
from roleplay.state.config import plan_config
from roleplay.state.events import (
    ACTIVITY_FOLD_VERSION,
    activity_document,
    activity_projection,
    apply_event,
    initial_tracker,
    state_document,
    state_projection,
)
from roleplay.state.projection import bootstrap_payload, empty_view, fold, prepare_commit
from roleplay.state.shape import STATE_VERSION

AFF = "/characters/李钰/好感度"
EXTRA_DEF = {"title": "额外", "updateMode": "schema-only", "schema": {"type": "object"}, "rules": []}


def text(t: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": t}] if t else []


class StoryLog:
    """A session log built reply by reply, stamped like the session service stamps it, folded as
    it grows (so configurations and commits are planned against the state they will meet).

    ``replies`` remembers each reply's drafts and whether a delete/regenerate reached its owner,
    decided from the harness surface alone (not from the code under test)."""

    def __init__(self, make: Any, mode: str = "rules-required") -> None:
        self.make = make
        self.events: list[Event] = []
        self.surface = initial_surface()
        self.tracker = initial_tracker()
        self.replies: list[dict[str, Any]] = []
        self.n = 0
        boot = bootstrap_payload(make.definition(mode), make.value())
        self.seed = self.add(*self.command("rp-session-apply", {"stateBootstrap": boot}))

    # -- plumbing
    def add(self, *drafts: EventDraft) -> list[EventDraft]:
        out = []
        for d in drafts:
            payload = validate_payload(d.type, copy.deepcopy(d.payload))  # the stored, normalised form
            op = payload.get("surfaceOp")
            if op:
                op["sourceEventSeqs"] = replaced_seqs(self.surface, op) or []
            if d.type == "compaction/checkpoint":
                payload["sourceEventSeqs"] = sorted(s for n in self.surface["nodes"] for s in [*n.get("replaces", []), n["seq"]])
            ev = Event("s", len(self.events) + 1, d.type, payload, "t")
            apply_surface(self.surface, ev)
            apply_event(self.tracker, ev)
            self.events.append(ev)
            out.append(EventDraft(d.type, payload))
        return out

    def next_id(self) -> int:
        self.n += 1
        return self.n

    def command(self, name: str, args: dict[str, Any], ok: bool = True) -> list[EventDraft]:
        cid = f"cmd{self.next_id()}"
        done: dict[str, Any] = (
            {"commandId": cid, "kind": "success"} if ok else {"commandId": cid, "kind": "error", "error": {"code": "x", "message": "no"}}
        )
        return [EventDraft("command/run", {"commandId": cid, "name": name, "args": args}), EventDraft("command/done", done)]

    @property
    def doc(self) -> dict[str, Any]:
        return state_document(self.tracker)

    def revision(self, ns: str = "story") -> int:
        return self.doc["namespaces"][ns]["revision"]

    # -- replies
    def reply(self, tool: str | None, middle: list[EventDraft] | None = None, result: dict[str, Any] | None = None) -> dict[str, Any]:
        """user → assistant (tool call) → tool/call → middle → tool/result → final assistant."""
        i = self.next_id()
        turn, step, call = f"turn{i}", f"step{i}", f"call{i}"
        drafts = [EventDraft("user/message", {"messageId": f"u{i}", "content": text("继续"), "turnId": turn})]
        owner: dict[str, Any] = {"messageId": f"a{i}", "content": text("(thinking)"), "turnId": turn, "stepId": step}
        if tool:
            owner["toolCalls"] = [{"id": call, "name": tool, "arguments": "{}"}]
        drafts.append(EventDraft("assistant/message", owner))
        reply = {"owner": f"a{i}", "user": f"u{i}", "turn": turn, "step": step, "call": call, "retracted": False, "drafts": []}
        reply["drafts"] += self.add(*drafts)
        if tool:
            reply["drafts"] += self.add(
                EventDraft("tool/call", {"callId": call, "name": tool, "arguments": "{}", "turnId": turn, "stepId": step})
            )
            reply["drafts"] += self.add(*(middle(reply) if callable(middle) else middle or []))
            res = {"callId": call, "name": tool, "ok": True, "content": "ok", "turnId": turn, "stepId": step, **(result or {})}
            reply["drafts"] += self.add(EventDraft("tool/result", res))
        reply["drafts"] += self.add(
            EventDraft("assistant/message", {"messageId": f"f{i}", "content": text("故事继续。"), "turnId": turn, "stepId": step})
        )
        self.replies.append(reply)
        return reply

    def commit(self, effects: list[dict[str, Any]], ok: bool = True) -> dict[str, Any]:
        meta = {"kind": "rp-agent/turn-commit", "effects": effects}
        return self.reply("rp_commit_turn", result={"ok": ok, "meta": meta})

    def configure(self, command: dict[str, Any], ok: bool = True) -> dict[str, Any]:
        result = plan_config(self.doc, command)

        def middle(reply: dict[str, Any]) -> list[EventDraft]:
            owner = {
                "messageId": reply["owner"],
                "toolCallId": reply["call"],
                "turnId": reply["turn"],
                "stepId": reply["step"],
                "tool": "rp_state",
            }
            return self.command("rp-state-configure", {"v": 3, "input": command, "result": result, "owner": owner}, ok=ok)

        return self.reply("rp_state", middle)

    def valid_commit(self, by: int) -> dict[str, Any]:
        effects = [self.make.effect([self.make.change("increment", AFF, rule="liyu-affection", by=by)], revision=self.revision())]
        try:
            prepare_commit(self.doc, effects)
        except RpError:
            return self.commit(effects, ok=False)  # what the real tool would have logged
        return self.commit(effects)

    # -- surface operations
    def _retract(self, span: list[str]) -> None:
        for reply in self.replies:
            if reply["owner"] in span:
                reply["retracted"] = True

    def delete(self, target: str, rng: str = "suffix") -> None:
        at = find_node(self.surface["nodes"], target)
        span = [n["id"] for n in (self.surface["nodes"][at:] if rng == "suffix" else [self.surface["nodes"][at]])]
        self._retract(span)
        op = {"op": "replace", "range": rng, "targetMessageId": target}
        self.add(EventDraft("assistant/message", {"messageId": f"d{self.next_id()}", "content": [], "surfaceOp": op}))

    def edit(self, target: str, role: str = "assistant") -> None:
        op = {"op": "replace", "range": "node", "targetMessageId": target}
        self.add(EventDraft(f"{role}/message", {"messageId": f"e{self.next_id()}", "content": text("改过的正文"), "surfaceOp": op}))

    def compact(self) -> None:
        self.add(EventDraft("compaction/checkpoint", {"checkpointId": f"cp{self.next_id()}", "summary": "前情提要"}))

    def live_ids(self, role: str | None = None) -> list[str]:
        return [
            n["id"]
            for n in self.surface["nodes"]
            if n.get("kind") != "compaction/summary" and n["role"] != "tool" and (role is None or n["role"] == role)
        ]

    def without_retracted(self) -> list[EventDraft]:
        """The log as if the retracted replies had never happened (no deletes, edits, checkpoints)."""
        out = list(self.seed)
        for reply in self.replies:
            if not reply["retracted"]:
                out += reply["drafts"]
        return out


def fold_drafts(drafts: list[EventDraft]) -> dict[str, Any]:
    tracker = initial_tracker()
    for i, d in enumerate(drafts):
        apply_event(tracker, Event("s", i + 1, d.type, d.payload, "t"))
    return tracker


# -- random stories ---------------------------------------------------------------------------------

OPS = [
    "commit",
    "commit",
    "empty-commit",
    "failed-commit",
    "config",
    "failed-config",
    "plain",
    "edit",
    "delete",
    "delete-node",
    "regen",
    "compact",
]


def play(log: StoryLog, script: list[tuple[str, int]]) -> StoryLog:
    for kind, pick in script:
        live = log.live_ids()
        if kind == "commit":
            log.valid_commit([-3, -1, 2, 4][pick % 4])
        elif kind == "empty-commit":
            log.commit([{"kind": "other.effect", "payload": {}}])
        elif kind == "failed-commit":
            log.commit([log.make.effect([log.make.change("set", "/day", value=9, rule="next-day")])], ok=False)
        elif kind in ("config", "failed-config"):
            if "extra" in log.doc["namespaces"]:
                command = {"action": "delete", "namespace": "extra", "expectedRevision": log.revision("extra")}
            elif pick % 3 == 0:
                command = {"action": "reset", "expectedRevision": log.revision()}
            elif pick % 3 == 1:
                command = {
                    "action": "update",
                    "expectedRevision": log.revision(),
                    "definition": log.make.definition(["schema-only", "rules-required"][pick % 2]),
                }
            else:
                command = {
                    "action": "create",
                    "namespace": "extra",
                    "expectedRevision": 0,
                    "definition": EXTRA_DEF,
                    "initialValue": {"n": pick},
                }
            log.configure(command, ok=kind == "config")
        elif kind == "plain" or not live:
            log.reply(None)
        elif kind == "edit":
            target = live[pick % len(live)]
            log.edit(target, role=next(n["role"] for n in log.surface["nodes"] if n["id"] == target))
        elif kind == "delete":
            log.delete(live[pick % len(live)])
        elif kind == "delete-node":
            assistants = log.live_ids("assistant")
            if assistants:
                log.delete(assistants[pick % len(assistants)], rng="node")
        elif kind == "regen":
            users = log.live_ids("user")
            if users:
                log.delete(users[-1])
                log.valid_commit(1)  # the regenerated reply
        else:
            log.compact()
    return log


scripts = st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 30)), max_size=18)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(script=scripts, cuts=st.lists(st.integers(1, 150), max_size=4))
def test_fold_after_delete_or_regenerate_equals_the_log_without_those_replies(
    make: Any, script: list[tuple[str, int]], cuts: list[int]
) -> None:
    log = play(StoryLog(make), script)
    clean = fold_drafts(log.without_retracted())
    assert canonical_json(log.tracker["view"]) == canonical_json(clean["view"])
    # Rebuild from zero == incremental through snapshot round trips.
    state, start = None, 0
    for cut in sorted({min(c, len(log.events)) for c in cuts} | {len(log.events)}):
        state = roundtrip(fold_projection(state_projection, log.events[start:cut], state))
        start = cut
    assert state == roundtrip(log.tracker)
    # And the view is the plain fold of the entities the batch folder calls effective.
    assert canonical_json(log.tracker["view"]) == canonical_json(refold_effective(log.events))


def refold_effective(events: list[Event]) -> dict[str, Any]:
    """An independent batch computation: collect every candidate entity, ask the batch folder
    which survive, fold those from scratch."""
    tracker = initial_tracker()
    cands: list[ent.Candidate] = []
    for ev in events:
        before = {e["root"] for e in tracker["folder"]["entities"]} | {-1}
        apply_event(tracker, ev)
        for e in tracker["folder"]["entities"]:
            if e["root"] == ev.seq and e["root"] not in before:
                cands.append(ent.Candidate(e["root"], e["owner"], e["data"]))
    boots = [c for c in cands if c.data["kind"] == "bootstrap"]
    cands = [c for c in cands if c.data["kind"] != "bootstrap"] + boots[-1:]
    view = empty_view()
    for c in ent.effective_entities(events, cands):
        view = fold(view, c.data["kind"], c.data["payload"])
    return view


# -- targeted behaviour ----------------------------------------------------------------------------


def story(log: StoryLog) -> dict[str, Any]:
    return log.doc["namespaces"]["story"]


def test_versions_and_names() -> None:
    assert (state_projection.name, state_projection.version) == ("rp/state", STATE_VERSION) == ("rp/state", 8)
    assert (activity_projection.name, activity_projection.version) == ("rp/state/activity", ACTIVITY_FOLD_VERSION)


def test_configuration_is_retracted_by_delete_and_regenerate_but_kept_by_edit(make: Any) -> None:
    log = StoryLog(make)
    reply = log.configure({"action": "update", "expectedRevision": 1, "definition": make.definition("schema-only")})
    assert story(log)["definition"]["updateMode"] == "schema-only" and story(log)["revision"] == 2
    log.edit(reply["owner"])  # editing the reply's text keeps its configuration
    assert story(log)["definition"]["updateMode"] == "schema-only"
    log.delete(reply["owner"])
    assert story(log)["definition"]["updateMode"] == "rules-required" and story(log)["revision"] == 1
    again = log.configure({"action": "create", "namespace": "extra", "expectedRevision": 0, "definition": EXTRA_DEF, "initialValue": {}})
    assert "extra" in log.doc["namespaces"]
    log.delete(again["user"])  # regenerate: suffix from the turn's user message
    assert "extra" not in log.doc["namespaces"]


def test_bootstrap_is_never_retracted_and_only_counts_while_blank(make: Any) -> None:
    log = StoryLog(make)
    log.valid_commit(2)
    log.delete(log.live_ids()[0])  # delete everything there is
    assert story(log)["value"] == make.value() and story(log)["revision"] == 1
    late = bootstrap_payload(EXTRA_DEF, {})
    log.add(*log.command("rp-session-apply", {"stateBootstrap": late}))
    assert list(log.doc["namespaces"]) == ["story"]
    assert log.tracker["diagnostics"][-1]["code"] == "state.bootstrap.not_blank"


def test_the_latest_bootstrap_wins_while_the_session_is_blank(make: Any) -> None:
    log = StoryLog(make)
    log.add(*log.command("rp-session-apply", {"profile": {"title": "no state here"}}))
    log.add(*log.command("rp-session-apply", {"stateBootstrap": bootstrap_payload(EXTRA_DEF, {"n": 1}, namespace="extra")}))
    assert list(log.doc["namespaces"]) == ["extra"] and log.doc["revision"] == 1
    log.add(*log.command("rp-session-apply", {"stateBootstrap": {"oops": 1}}))  # malformed: ignored
    assert log.tracker["diagnostics"][-1]["code"] == "state.bootstrap.malformed"
    assert list(log.doc["namespaces"]) == ["extra"]


def test_activity_tracks_the_latest_effective_reply(make: Any) -> None:
    log = StoryLog(make)
    first = log.valid_commit(2)
    records = activity_document(log.tracker)["namespaces"]["story"]
    assert [(r["op"], r["path"], r["before"], r["after"]) for r in records] == [("increment", AFF, 10, 12)]
    second = log.valid_commit(-1)
    assert activity_document(log.tracker)["namespaces"]["story"][0]["after"] == 11
    log.delete(second["user"])  # regenerate: the previous reply's activity comes back
    assert activity_document(log.tracker)["namespaces"]["story"][0]["after"] == 12
    log.commit([])  # a reply without updates clears it
    assert activity_document(log.tracker) == {"namespaces": {}}
    log.valid_commit(3)
    log.configure({"action": "reset", "expectedRevision": log.revision()})  # configuration clears it
    assert activity_document(log.tracker) == {"namespaces": {}} and story(log)["value"] == make.value()
    assert first["retracted"] is False


def test_failed_commands_and_failed_tool_results_change_nothing(make: Any) -> None:
    log = StoryLog(make)
    before = canonical_json(log.tracker["view"])
    log.configure({"action": "reset", "expectedRevision": 1}, ok=False)
    log.commit([make.effect([make.change("set", "/weather", value="雨", rule="weather")])], ok=False)
    log.add(EventDraft("command/run", {"commandId": "dangling", "name": "rp-state-configure", "args": {}}))  # no done
    assert canonical_json(log.tracker["view"]) == before


def test_inconsistent_owner_forms_no_entity(make: Any) -> None:
    log = StoryLog(make)
    command = {"action": "reset", "expectedRevision": 1}
    result = plan_config(log.doc, command)

    def bad(field: str, value: str):  # noqa: ANN202
        def middle(reply: dict[str, Any]) -> list[EventDraft]:
            owner = {
                "messageId": reply["owner"],
                "toolCallId": reply["call"],
                "turnId": reply["turn"],
                "stepId": reply["step"],
                "tool": "rp_state",
                field: value,
            }
            return log.command("rp-state-configure", {"v": 3, "input": command, "result": result, "owner": owner})

        return middle

    log.valid_commit(5)
    changed = canonical_json(log.doc)
    for field, value, pointer in [
        ("stepId", "other", "/args/owner/stepId"),
        ("messageId", "f1", "/args/owner/messageId"),
        ("toolCallId", "nope", "/args/owner/toolCallId"),
        ("tool", "rp_commit_turn", "/args/owner/tool"),
    ]:
        log.reply("rp_state", bad(field, value))
        assert log.tracker["diagnostics"][-1]["pointer"] == pointer
    assert canonical_json(log.doc) == changed
    legacy = log.command("rp-state-configure", {"v": 2, "input": command, "result": result})
    log.add(*legacy)
    assert log.tracker["diagnostics"][-1]["code"] == "state.config.unsupported_version"


def test_compaction_keeps_entities_and_bounds_the_state(make: Any) -> None:
    log = StoryLog(make)
    reply = log.configure({"action": "update", "expectedRevision": 1, "definition": make.definition("schema-only")})
    log.valid_commit(2)
    assert len(log.tracker["folder"]["entities"]) == 2
    log.compact()
    assert log.tracker["folder"]["entities"] == [] and log.tracker["base"] == log.tracker["view"]
    later = log.valid_commit(1)
    log.delete(later["user"])
    assert story(log)["value"]["characters"]["李钰"]["好感度"] == 12
    assert story(log)["definition"]["updateMode"] == "schema-only" and reply["retracted"] is False


# -- the same on a real store -----------------------------------------------------------------------


@pytest.mark.anyio
async def test_projections_load_from_the_store_with_snapshots_and_forks(store: EventStore, make: Any) -> None:
    log = StoryLog(make)
    play(log, [("commit", 1), ("config", 1), ("commit", 2), ("edit", 3), ("regen", 0), ("config", 2), ("delete", 5), ("commit", 0)])
    service = SessionService(store)
    sid = (await service.create("roleplay")).id
    half = len(log.events) // 2
    drafts = [EventDraft(e.type, e.payload) for e in log.events]
    await service.append(sid, drafts[:half], expected_seq=0)
    await write_snapshot(store, sid, state_projection)
    await service.append(sid, drafts[half:], expected_seq=half)
    stored = await service.events(sid)
    assert [e.payload for e in stored] == [e.payload for e in log.events]  # the service stamps the same seqs
    loaded = await load(store, sid, state_projection)
    assert loaded.from_snapshot_seq == half and loaded.state == roundtrip(log.tracker)
    activity = await load(store, sid, activity_projection)
    assert activity_document(activity.state) == activity_document(log.tracker)
    fork = await store.fork(sid, half)
    assert (await load(store, fork.id, state_projection)).state == roundtrip(fold_projection(state_projection, log.events[:half]))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(script=scripts)
@pytest.mark.anyio
async def test_store_backed_fold_equals_the_log_without_retracted_replies(
    store: EventStore, make: Any, script: list[tuple[str, int]]
) -> None:
    log = play(StoryLog(make), script)
    service = SessionService(store)
    full = (await service.create("roleplay")).id
    await service.append(full, [EventDraft(e.type, e.payload) for e in log.events], expected_seq=0)
    clean = (await service.create("roleplay")).id
    await service.append(clean, log.without_retracted(), expected_seq=0)
    a = (await load(store, full, state_projection)).state
    b = (await load(store, clean, state_projection)).state
    assert canonical_json(a["view"]) == canonical_json(b["view"])
