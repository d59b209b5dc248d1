"""The surface-owned entity folder: edit migrates, delete/regenerate retracts, compaction keeps,
and the incremental folder agrees with the batch form on random logs and on real stores."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roleplay.harness import entities as ent
from roleplay.harness.entities import KEPT, LIVE, RETIRED, Candidate, classify, effective_entities, owner_statuses
from roleplay.harness.events import Event, EventDraft
from roleplay.harness.projections import roundtrip
from roleplay.harness.sessions import SessionService
from roleplay.harness.store import EventStore
from roleplay.harness.surface import apply_surface, initial_surface, replaced_seqs


def text(t: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": t}] if t else []


class Log:
    """Builds events with seqs 1…n and ``sourceEventSeqs`` stamped exactly as the session
    service stamps them (same surface fold), so pure tests see realistic logs."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.surface = initial_surface()

    def add(self, type_: str, payload: dict[str, Any]) -> Event:
        op = payload.get("surfaceOp")
        if op:
            op["sourceEventSeqs"] = replaced_seqs(self.surface, op) or []
        if type_ == "compaction/checkpoint":
            payload["sourceEventSeqs"] = sorted(s for n in self.surface["nodes"] for s in [*n.get("replaces", []), n["seq"]])
        ev = Event("s", len(self.events) + 1, type_, payload, "t")
        apply_surface(self.surface, ev)
        self.events.append(ev)
        return ev

    def user(self, mid: str, t: str = "hi") -> Event:
        return self.add("user/message", {"messageId": mid, "content": text(t)})

    def assistant(self, mid: str, call: str | None = None, t: str = "ok") -> Event:
        payload: dict[str, Any] = {"messageId": mid, "content": text(t), "turnId": "t", "stepId": "s"}
        if call:
            payload["toolCalls"] = [{"id": call, "name": "f", "arguments": "{}"}]
        return self.add("assistant/message", payload)

    def result(self, call: str) -> Event:
        return self.add("tool/result", {"callId": call, "name": "f", "ok": True, "content": "done"})

    def replace(self, target: str, rng: str, t: str, role: str = "assistant") -> Event:
        mid = f"r{len(self.events) + 1}"
        op = {"op": "replace", "range": rng, "targetMessageId": target}
        return self.add(f"{role}/message", {"messageId": mid, "content": text(t), "surfaceOp": op})

    def checkpoint(self) -> Event:
        return self.add("compaction/checkpoint", {"checkpointId": f"cp{len(self.events) + 1}", "summary": "so far"})


def test_classify_names_the_three_kinds_of_replacement() -> None:
    log = Log()
    log.user("u1")
    a = log.assistant("a1")
    edit = log.replace("a1", "node", "better")
    assert classify(edit) == ("edit", [a.seq])
    empty_node = log.replace("a1", "node", "")
    assert classify(empty_node) == ("retract", [a.seq, edit.seq])
    log.assistant("a2")
    suffix = log.replace("u1", "suffix", "regenerated")
    assert classify(suffix)[0] == "retract"
    user_edit = log.replace("r" + str(suffix.seq), "node", "fixed", role="user")
    assert classify(user_edit)[0] == "edit"
    assert classify(log.checkpoint())[0] == "keep"
    assert classify(log.user("u9")) is None


def test_edit_migrates_then_delete_retracts_through_the_chain() -> None:
    log = Log()
    log.user("u1")
    owner = log.assistant("a1", call="c1")
    root = log.result("c1")
    log.replace("a1", "node", "edited once")
    log.replace("a1", "node", "edited twice")
    cand = [Candidate(root.seq, owner.seq, "x")]
    assert effective_entities(log.events, cand) == cand
    log.replace("u1", "suffix", "")  # delete from the user message: the whole reply goes
    assert effective_entities(log.events, cand) == []
    assert owner_statuses(log.events, [owner.seq]) == {owner.seq: RETIRED}


def test_delete_after_the_owner_keeps_it_and_empty_node_replacement_retracts() -> None:
    log = Log()
    log.user("u1")
    owner = log.assistant("a1", call="c1")
    root = log.result("c1")
    log.assistant("a2", t="the story goes on")
    cand = [Candidate(root.seq, owner.seq)]
    log.replace("a2", "suffix", "")  # deleting a later message does not touch the owner
    assert effective_entities(log.events, cand) == cand
    log.replace("a1", "node", "")  # removing exactly the owner node is a delete
    assert effective_entities(log.events, cand) == []


def test_compaction_keeps_owners_and_unowned_entities_are_permanent() -> None:
    log = Log()
    log.user("u1")
    owner = log.assistant("a1", call="c1")
    root = log.result("c1")
    log.checkpoint()
    log.user("u2")
    log.replace("u2", "suffix", "")
    cands = [Candidate(root.seq, owner.seq), Candidate(1, None, "bootstrap")]
    assert owner_statuses(log.events, [owner.seq]) == {owner.seq: KEPT}
    assert effective_entities(log.events, cands) == sorted(cands, key=lambda c: c.root_seq)


def test_an_owner_retired_before_its_root_is_born_retracted() -> None:
    log = Log()
    log.user("u1")
    owner = log.assistant("a1", call="c1")
    log.replace("u1", "suffix", "")
    root = log.result("c1")  # the result of a call whose reply was already deleted
    assert effective_entities(log.events, [Candidate(root.seq, owner.seq)]) == []
    state = ent.initial()
    for ev in log.events:
        ent.observe(state, ev)
        if ev.seq == root.seq:
            assert ent.add(state, root.seq, owner.seq, None) is False
        ent.settle(state, ev)
    assert state == {"v": 1, "calls": {}, "owners": {}, "entities": []}


def test_incremental_state_prunes_to_what_can_still_matter() -> None:
    log = Log()
    state = ent.initial()

    def feed(ev: Event, entity: bool = False) -> list[dict[str, Any]]:
        gone = ent.observe(state, ev)
        if entity:
            assert ent.add(state, ev.seq, state["calls"][ev.payload["callId"]]["seq"], {"n": ev.seq})
        ent.settle(state, ev)
        return gone

    feed(log.user("u1"))
    a1 = log.assistant("a1", call="c1")
    feed(a1)
    assert state["calls"]["c1"]["seq"] == a1.seq and state["owners"][str(a1.seq)]["status"] == LIVE
    r1 = log.result("c1")
    feed(r1, entity=True)
    assert state["calls"] == {} and [e["root"] for e in state["entities"]] == [r1.seq]
    feed(log.assistant("a2", t="plain reply"))  # no tool call: never tracked
    assert list(state["owners"]) == [str(a1.seq)]
    feed(log.checkpoint())
    assert ent.is_permanent(state, state["entities"][0])
    assert [e["root"] for e in ent.pop_permanent_prefix(state)] == [r1.seq]
    assert state["owners"] == {} and state["entities"] == []


# -- random logs: incremental == batch ------------------------------------------------------------


@st.composite
def scripts(draw: st.DrawFn) -> list[tuple[str, int]]:
    steps = draw(
        st.lists(
            st.tuples(st.sampled_from(["turn", "turn", "plain", "edit", "delete", "empty", "regen", "compact"]), st.integers(0, 50)),
            max_size=25,
        )
    )
    return steps


def build(script: list[tuple[str, int]]) -> tuple[Log, list[Candidate]]:
    log, cands = Log(), []
    live: list[tuple[str, str]] = []  # (message id, role) on the surface, a model for picking targets
    for n, (kind, pick) in enumerate(script):
        if kind in ("turn", "plain") or not live:
            log.user(f"u{n}")
            owner = log.assistant(f"a{n}", call=f"c{n}" if kind != "plain" else None)
            live += [(f"u{n}", "user"), (f"a{n}", "assistant")]
            if kind != "plain":
                cands.append(Candidate(log.result(f"c{n}").seq, owner.seq, n))
            continue
        mid, role = live[pick % len(live)]
        at = live.index((mid, role))
        if kind == "edit":
            log.replace(mid, "node", f"edit {n}", role=role)
        elif kind == "empty" and role == "assistant":
            log.replace(mid, "node", "")
            del live[at]
        elif kind in ("delete", "empty"):
            log.replace(mid, "suffix", "")
            del live[at:]
        elif kind == "regen":
            users = [i for i, (_, r) in enumerate(live) if r == "user"]
            target = live[users[-1]][0] if users else mid
            log.replace(target, "suffix", "")
            del live[live.index((target, "user")) if users else at :]
        else:
            log.checkpoint()
            live = []
    return log, cands


def incremental(log: Log, cands: list[Candidate], cuts: list[int]) -> list[int]:
    roots = {c.root_seq for c in cands}
    state = ent.initial()
    for ev in log.events:
        if ev.seq in cuts:
            state = roundtrip(state)  # a snapshot round trip must not change anything
        ent.observe(state, ev)
        if ev.seq in roots:
            ent.add(state, ev.seq, state["calls"][ev.payload["callId"]]["seq"], None)
        ent.settle(state, ev)
    return [e["root"] for e in state["entities"]]


@settings(max_examples=300, deadline=None)
@given(script=scripts(), cuts=st.lists(st.integers(1, 120), max_size=5))
def test_incremental_folder_equals_batch_on_random_logs(script: list[tuple[str, int]], cuts: list[int]) -> None:
    log, cands = build(script)
    assert incremental(log, cands, cuts) == [c.root_seq for c in effective_entities(log.events, cands)]


# -- a real store ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_stamped_source_seqs_from_the_store_drive_the_same_decisions(store: EventStore) -> None:
    """The harness stamps ``sourceEventSeqs``; the folder decides from exactly those."""
    service = SessionService(store)
    sid = (await service.create("roleplay")).id

    def msg(role: str, mid: str, t: str, op: dict[str, Any] | None = None, call: str | None = None) -> EventDraft:
        p: dict[str, Any] = {"messageId": mid, "content": text(t)}
        if call:
            p["toolCalls"] = [{"id": call, "name": "f", "arguments": "{}"}]
        if op:
            p["surfaceOp"] = op
        return EventDraft(f"{role}/message", p)

    res = lambda c: EventDraft("tool/result", {"callId": c, "name": "f", "ok": True, "content": "x"})  # noqa: E731
    events = await service.append(
        sid,
        [
            msg("user", "u1", "one"), msg("assistant", "a1", "", call="c1"), res("c1"),
            msg("user", "u2", "two"), msg("assistant", "a2", "", call="c2"), res("c2"),
            msg("assistant", "e1", "edited", {"op": "replace", "range": "node", "targetMessageId": "a1"}),
        ],
        expected_seq=0,
    )  # fmt: skip
    cands = [Candidate(events[2].seq, events[1].seq, "first"), Candidate(events[5].seq, events[4].seq, "second")]
    await service.append(sid, [msg("assistant", "x", "", {"op": "replace", "range": "suffix", "targetMessageId": "u2"})], expected_seq=7)
    logged = await service.events(sid)
    assert logged[-1].payload["surfaceOp"]["sourceEventSeqs"] == [4, 5, 6]
    assert [c.data for c in effective_entities(logged, cands)] == ["first"]
    # Deleting from u1 now reaches the edited owner through its chain (1 → 7).
    await service.append(sid, [msg("assistant", "y", "", {"op": "replace", "range": "suffix", "targetMessageId": "u1"})], expected_seq=8)
    logged = await service.events(sid)
    assert logged[-1].payload["surfaceOp"]["sourceEventSeqs"] == [1, 2, 3, 7]
    assert effective_entities(logged, cands) == []


@settings(max_examples=200, deadline=None)
@given(script=scripts(), reuse=st.booleans())
def test_settling_a_call_prunes_exactly_what_a_full_prune_would(script: list[tuple[str, int]], reuse: bool) -> None:
    """``settle`` checks only the answered call's owner, not every entity: after each event the
    owners kept must be exactly those a full ``_prune`` keeps (call ids reused across messages too)."""
    import copy

    log, cands = build(script)
    roots = {c.root_seq for c in cands}
    state = ent.initial()
    for ev in log.events:
        if reuse and ev.type == "assistant/message" and ev.payload.get("toolCalls"):
            ev = dataclasses.replace(ev, payload={**ev.payload, "toolCalls": [{**c, "id": "same"} for c in ev.payload["toolCalls"]]})
        if reuse and ev.type in ("tool/result", "tool/call"):
            ev = dataclasses.replace(ev, payload={**ev.payload, "callId": "same"})
        ent.observe(state, ev)
        # Every other call makes an entity: the others' owners must go once they are answered.
        if ev.seq in roots and ev.seq % 2 and ev.payload["callId"] in state["calls"]:
            ent.add(state, ev.seq, state["calls"][ev.payload["callId"]]["seq"], None)
        ent.settle(state, ev)
        pruned = copy.deepcopy(state)
        ent._prune(pruned)
        assert state == pruned
