"""Projections: registry, snapshot loading, and the rebuild-equals-incremental property."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roleplay.clock import CountingIds, FixedClock
from roleplay.errors import NotFoundError, ValidationError
from roleplay.harness.commands import commands_projection
from roleplay.harness.events import Event, EventDraft
from roleplay.harness.projections import Projection, ProjectionRegistry, fold, load, roundtrip, snapshot_due, write_snapshot
from roleplay.harness.sessions import SessionService
from roleplay.harness.store import EventStore, open_store
from roleplay.harness.surface import surface_projection

PROJECTIONS = [surface_projection, commands_projection]


# -- random logs ----------------------------------------------------------------------------------


@st.composite
def event_logs(draw: st.DrawFn) -> list[EventDraft]:
    """Plausible logs: messages, edits, deletes/regenerates (possibly empty), tool traffic,
    commands with and without their done, compaction checkpoints."""
    n = draw(st.integers(min_value=1, max_value=40))
    drafts: list[EventDraft] = []
    live: list[str] = []  # message ids currently on the surface (approximately: a model of it)
    counter = 0
    for _ in range(n):
        counter += 1
        kind = draw(st.sampled_from(["user", "assistant", "edit", "suffix", "empty", "tool", "command", "checkpoint"]))
        text = draw(st.sampled_from(["", "hi", "你好", "a longer line of text"]))
        if kind in ("user", "assistant") or (kind in ("edit", "suffix", "empty") and not live):
            role = "user" if kind == "user" else "assistant"
            mid = f"m{counter}"
            drafts.append(EventDraft(f"{role}/message", {"messageId": mid, "content": [{"type": "text", "text": text or "x"}]}))
            live.append(mid)
        elif kind in ("edit", "suffix", "empty"):
            target = draw(st.sampled_from(live))
            rng = "node" if kind == "edit" else draw(st.sampled_from(["node", "suffix"]))
            content = [] if kind == "empty" else [{"type": "text", "text": text or "y"}]
            mid = f"r{counter}"
            drafts.append(
                EventDraft(
                    "assistant/message",
                    {"messageId": mid, "content": content, "surfaceOp": {"op": "replace", "range": rng, "targetMessageId": target}},
                )
            )
            at = live.index(target)
            if rng == "suffix":
                del live[at:]
                if content:
                    live.append(mid)
            elif not content:
                del live[at]
        elif kind == "tool":
            cid = f"c{counter}"
            drafts.append(EventDraft("tool/call", {"callId": cid, "name": "f", "arguments": "{}"}))
            drafts.append(EventDraft("tool/result", {"callId": cid, "name": "f", "ok": draw(st.booleans()), "content": text}))
        elif kind == "command":
            cid = f"k{counter}"
            drafts.append(EventDraft("command/run", {"commandId": cid, "name": "x", "args": {"t": text}}))
            outcome = draw(st.sampled_from(["success", "error", None]))
            if outcome == "success":
                drafts.append(EventDraft("command/done", {"commandId": cid, "kind": "success", "result": {"t": text}}))
            elif outcome == "error":
                drafts.append(EventDraft("command/done", {"commandId": cid, "kind": "error", "error": {"code": "e", "message": "m"}}))
        else:
            drafts.append(EventDraft("compaction/checkpoint", {"checkpointId": f"cp{counter}", "summary": text or "summary"}))
            live = []  # the summary node is not a replace target
    return drafts


def as_events(drafts: list[EventDraft]) -> list[Event]:
    return [Event("s", i + 1, d.type, d.payload, "t") for i, d in enumerate(drafts)]


@settings(max_examples=200, deadline=None)
@given(log=event_logs(), cuts=st.lists(st.integers(min_value=0, max_value=60), max_size=4))
def test_incremental_fold_through_snapshots_equals_rebuild(log: list[EventDraft], cuts: list[int]) -> None:
    events = as_events(log)
    for proj in PROJECTIONS:
        rebuilt = fold(proj, events)
        state, start = None, 0
        for cut in sorted({min(c, len(events)) for c in cuts} | {len(events)}):
            state = roundtrip(fold(proj, events[start:cut], state))  # what a stored snapshot gives back
            start = cut
        assert state == roundtrip(rebuilt)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(log=event_logs(), snap_at=st.integers(min_value=0, max_value=80), fork_at=st.integers(min_value=0, max_value=80))
def test_store_backed_loading_equals_rebuild_with_snapshots_and_forks(log: list[EventDraft], snap_at: int, fork_at: int) -> None:
    async def run(path: Path) -> None:
        store = open_store(f"sqlite:///{path}", clock=FixedClock(), ids=CountingIds())
        await store.migrate()
        service = SessionService(store)
        try:
            rec = await service.create("p")
            split = min(snap_at, len(log))
            if split:
                await service.append(rec.id, log[:split], expected_seq=0)
            for proj in PROJECTIONS:
                await write_snapshot(store, rec.id, proj)
            if split < len(log):
                await service.append(rec.id, log[split:], expected_seq=split)
            events = await store.read(rec.id)
            at = min(fork_at, len(events))
            fork = await store.fork(rec.id, at)
            for proj in PROJECTIONS:
                loaded = await load(store, rec.id, proj)
                assert loaded.from_snapshot_seq == split
                assert loaded.state == roundtrip(fold(proj, events))
                no_snap = await load(store, rec.id, proj, use_snapshot=False)
                assert no_snap.state == loaded.state and no_snap.from_snapshot_seq == 0
                forked = await load(store, fork.id, proj)
                assert forked.state == roundtrip(fold(proj, events[:at]))
        finally:
            await store.close()

    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(run(Path(tmp) / "rp.db"))


# -- loader behaviour -------------------------------------------------------------------------------


def counter_projection(version: int = 1) -> Projection:
    def apply(state: dict[str, Any], ev: Event) -> dict[str, Any]:
        state["n"] += 1
        state["last"] = ev.seq
        return state

    return Projection("test/counter", version, lambda: {"n": 0, "last": 0}, apply)


def user(mid: str) -> EventDraft:
    return EventDraft("user/message", {"messageId": mid, "content": [{"type": "text", "text": mid}]})


@pytest.mark.anyio
async def test_loader_writes_a_snapshot_past_the_threshold_and_reuses_it(store: EventStore) -> None:
    proj = counter_projection()
    rec = await store.create_session(preset="p", events=[user(f"m{i}") for i in range(30)])
    first = await load(store, rec.id, proj, snapshot_every=10)
    assert (first.state, first.from_snapshot_seq, first.folded) == ({"n": 30, "last": 30}, 0, 30)
    await store.append(rec.id, 30, [user("x"), user("y")])
    second = await load(store, rec.id, proj, snapshot_every=10)
    assert (second.state, second.from_snapshot_seq, second.folded) == ({"n": 32, "last": 32}, 30, 2)
    # A new fold version ignores the old snapshot entirely.
    v2 = await load(store, rec.id, counter_projection(2), snapshot_every=None)
    assert (v2.from_snapshot_seq, v2.folded) == (0, 32)
    prefix = await load(store, rec.id, proj, until_seq=12)
    assert prefix.state == {"n": 12, "last": 12} and prefix.from_snapshot_seq == 0


def test_snapshots_come_at_intervals_that_grow_with_the_log() -> None:
    """``snapshot_every`` events past the last snapshot, and a quarter of its seq once that is
    more: a snapshot's cost (the whole state) is spread over more events as the state grows."""
    assert not snapshot_due(10**9, 0, None)
    assert [snapshot_due(n, 0, 500) for n in (499, 500)] == [False, True]
    assert [snapshot_due(n, 1_000, 500) for n in (499, 500)] == [False, True]
    assert [snapshot_due(n, 20_000, 500) for n in (4_999, 5_000)] == [False, True]
    seqs, last = [], 0
    for seq in range(1, 40_001):
        if snapshot_due(seq - last, last, 500):
            seqs.append(last := seq)
    assert seqs[:5] == [500, 1_000, 1_500, 2_000, 2_500] and len(seqs) < 20  # every 500 events: 80
    assert all(b - a <= max(500, a // 4) for a, b in zip(seqs, seqs[1:]))


@pytest.mark.anyio
async def test_the_cache_writes_snapshots_at_growing_intervals(store: EventStore) -> None:
    from roleplay.harness.projections import ProjectionCache

    rec = await store.create_session(preset="p", events=[user(f"m{i}") for i in range(40)])
    cache = ProjectionCache(snapshot_every=3)
    written = []
    head = 40
    for i in range(20):
        await cache.load(store, rec.id, counter_projection())
        snap = await store.load_snapshot(rec.id, "test/counter", 1)
        assert snap is not None
        if not written or snap.upto_seq != written[-1]:
            written.append(snap.upto_seq)
        await store.append(rec.id, head, [user(f"x{i}"), user(f"y{i}")])
        head += 2
    # Written by the first load (40 events), then once 10 more were folded (a quarter of 40),
    # then 12 (a quarter of 50): never every 3 events.
    assert written == [40, 50, 62, 78]
    loaded = await cache.load(store, rec.id, counter_projection())
    assert loaded.state == {"n": head, "last": head}


@pytest.mark.anyio
async def test_loading_an_unknown_session_is_a_clear_error(store: EventStore) -> None:
    with pytest.raises(NotFoundError) as exc:
        await load(store, "ses_missing", counter_projection())
    assert exc.value.code == "session.not_found"


def test_registry() -> None:
    reg = ProjectionRegistry([surface_projection])
    assert reg.get("harness/surface") is surface_projection
    with pytest.raises(NotFoundError) as exc:
        reg.get("nope")
    assert exc.value.code == "projection.not_found"
    with pytest.raises(ValidationError):
        reg.register(Projection("harness/surface", 9, dict, lambda s, e: s))


@pytest.mark.anyio
async def test_projection_cache_folds_only_new_events_and_sees_other_writers(make_store) -> None:  # type: ignore[no-untyped-def]
    from roleplay.harness.projections import ProjectionCache

    store = make_store()
    await store.migrate()
    other = make_store()  # another store object on the same database: another process, in effect
    try:
        rec = await store.create_session(preset="p", events=[user(f"m{i}") for i in range(5)])
        cache = ProjectionCache(snapshot_every=3)
        first = await cache.load(store, rec.id, surface_projection)
        assert [n["id"] for n in first.state["nodes"]] == [f"m{i}" for i in range(5)]
        await other.append(rec.id, 5, [user("x1"), user("x2"), user("x3")])
        second = await cache.load(store, rec.id, surface_projection)
        assert second.folded == 3 and second.upto_seq == 8
        assert second.state == roundtrip(fold(surface_projection, await store.read(rec.id)))
        snap = await store.load_snapshot(rec.id, surface_projection.name, surface_projection.version)
        assert snap is not None and snap.upto_seq == 8  # written once 3 new events were folded
        third = await cache.load(store, rec.id, surface_projection)
        assert third.folded == 0 and third.state is second.state  # nothing new: no fold at all
    finally:
        await other.close()
        await store.close()


@pytest.mark.anyio
async def test_validation_never_mutates_the_cached_surface(store: EventStore) -> None:
    service = SessionService(store)
    rec = await service.create("p", seed=[user("u1"), user("u2")])
    cached = await service.projection(rec.id, "harness/surface")
    before = roundtrip(cached.state)
    with pytest.raises(Exception):
        # The first draft is valid and is applied to the validation copy; the second fails.
        await service.append(
            rec.id,
            [
                user("u3"),
                EventDraft(
                    "assistant/message",
                    {"messageId": "x", "content": [], "surfaceOp": {"op": "replace", "range": "suffix", "targetMessageId": "ghost"}},
                ),
            ],
            expected_seq=2,
        )
    assert roundtrip((await service.projection(rec.id, "harness/surface")).state) == before


@pytest.mark.anyio
async def test_a_new_empty_session_is_seeded_with_what_a_load_folds(make_store) -> None:  # type: ignore[no-untyped-def]
    """``SessionService.create`` keeps an empty child's initial surface and turns states: equal to
    a fresh load at seq 0, and a plain load still folds another process's appends."""
    from roleplay.harness.turns import turns_projection

    store = make_store()
    await store.migrate()
    other = make_store()
    try:
        service = SessionService(store)
        parent = await service.create("p", seed=[user("u1")])
        child = await service.create("c", parent_id=parent.id)
        for projection in (surface_projection, turns_projection):
            seeded = await service.projection_at(child.id, projection, 0)
            assert seeded.upto_seq == 0
            assert seeded.state == roundtrip((await load(store, child.id, projection)).state)
        await other.append(child.id, 0, [user("x1")])
        after = await service.projection(child.id, surface_projection)
        assert after.upto_seq == 1
        assert after.state == roundtrip(fold(surface_projection, await store.read(child.id)))
        with pytest.raises(NotFoundError):
            await service.create("c", parent_id="ses_missing")
    finally:
        await other.close()
        await store.close()
