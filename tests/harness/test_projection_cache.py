"""The projection cache as the reads at a known head see it (issue 16): what it keeps, what it
evicts, which reads it saves, and that a read through it always equals a fresh fold."""

from __future__ import annotations

import asyncio
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roleplay.clock import CountingIds, FixedClock
from roleplay.harness.commands import commands_projection
from roleplay.harness.events import EventDraft
from roleplay.harness.projections import Projection, ProjectionCache, fold, roundtrip
from roleplay.harness.sessions import SessionService
from roleplay.harness.store import EventStore, open_store
from roleplay.harness.surface import surface_projection
from roleplay.harness.turns import turns_projection

from .test_projections import counter_projection, event_logs, user

READS = ("read", "iter_events", "load_snapshot", "head", "get_session")


def count_reads(store: EventStore) -> Counter[str]:
    """Counts the store's reads from now on (instance attributes shadow the methods)."""
    calls: Counter[str] = Counter()

    def counting(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return original(*args, **kwargs)

        return wrapper

    for name in READS:
        setattr(store, name, counting(name, getattr(store, name)))
    return calls


@pytest.mark.anyio
async def test_a_read_at_the_cached_head_does_not_touch_the_store(store: EventStore) -> None:
    counter = counter_projection()
    service = SessionService(store)
    service.projections.register(counter)
    rec = await service.create("p", seed=[user("u1"), user("u2")])
    calls = count_reads(store)
    # Created by this process: every registered projection (and the turns) is kept at its head.
    for projection in (surface_projection, commands_projection, counter, turns_projection):
        loaded = await service.projection_at(rec.id, projection, 2)
        assert loaded.upto_seq == 2 and loaded.folded == 0
    assert (await service.projection_at(rec.id, counter, 2)).state == {"n": 2, "last": 2}
    # Its own appends are folded in as made: the next read at the new head reads nothing either.
    await service.append(rec.id, [user("u3")], expected_seq=2)
    assert (await service.projection_at(rec.id, counter, 3)).state == {"n": 3, "last": 3}
    surface = await service.projection_at(rec.id, surface_projection, 3)
    assert [n["id"] for n in surface.state["nodes"]] == ["u1", "u2", "u3"]
    assert surface.state == roundtrip(fold(surface_projection, await store.read(rec.id)))
    assert calls == Counter({"read": 1})  # (the comparison's own read just above)


@pytest.mark.anyio
async def test_a_young_session_missing_from_the_cache_is_folded_without_a_snapshot_read(make_store) -> None:  # type: ignore[no-untyped-def]
    store = make_store()
    await store.migrate()
    try:
        rec = await store.create_session(preset="p", events=[user(f"m{i}") for i in range(4)])
        calls = count_reads(store)
        cache = ProjectionCache(snapshot_every=10)
        loaded = await cache.load_at(store, rec.id, surface_projection, 4)
        assert calls["load_snapshot"] == 0 and loaded.upto_seq == 4
        assert loaded.state == roundtrip(fold(surface_projection, await store.read(rec.id)))
        # Past the first snapshot's due point a snapshot may exist: it is looked for.
        await store.append(rec.id, 4, [user(f"n{i}") for i in range(8)])
        older = ProjectionCache(snapshot_every=10)
        again = await older.load_at(store, rec.id, surface_projection, 12)
        assert calls["load_snapshot"] == 1
        assert again.state == roundtrip(fold(surface_projection, await store.read(rec.id)))
    finally:
        await store.close()


@pytest.mark.anyio
async def test_retired_sessions_go_first_and_the_folded_events_are_bounded(store: EventStore) -> None:
    counter = counter_projection()
    story = await store.create_session(preset="p", events=[user(f"s{i}") for i in range(6)])
    child = await store.create_session(preset="c", events=[user("c1"), user("c2")])
    cache = ProjectionCache(max_entries=3, max_folded=100)
    await cache.load(store, child.id, surface_projection)
    await cache.load(store, child.id, counter)
    await cache.load(store, story.id, surface_projection)
    cache.retire(child.id)
    await cache.load(store, story.id, counter)  # one over: a retired entry goes, not the story's
    assert {(k[0], k[1]) for k in cache._entries} == {
        (child.id, counter.name),
        (story.id, surface_projection.name),
        (story.id, counter.name),
    }
    assert cache._folded == sum(e.upto_seq for e in cache._entries.values()) == 14
    # The events folded are bounded too; the entry just loaded stays, whatever its size.
    tight = ProjectionCache(max_folded=7)
    await tight.load(store, child.id, surface_projection)
    await tight.load(store, story.id, surface_projection)
    assert [k[0] for k in tight._entries] == [story.id] and tight._folded == 6
    await tight.load(store, child.id, surface_projection)
    assert [k[0] for k in tight._entries] == [child.id] and tight._folded == 2


# -- reads at the head always equal a fresh fold --------------------------------------------------


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    log=event_logs(),
    cuts=st.lists(st.integers(min_value=1, max_value=60), max_size=6),
    outside=st.lists(st.booleans(), min_size=8, max_size=8),
    max_entries=st.integers(min_value=1, max_value=6),
    max_folded=st.integers(min_value=1, max_value=80),
    snapshot_every=st.sampled_from([2, 5, 500]),
    fork_at=st.integers(min_value=0, max_value=80),
    max_live=st.integers(min_value=1, max_value=5),
)
def test_reads_at_the_head_through_the_cache_equal_a_fresh_fold(
    log: list[EventDraft],
    cuts: list[int],
    outside: list[bool],
    max_entries: int,
    max_folded: int,
    snapshot_every: int,
    fork_at: int,
    max_live: int,
) -> None:
    """A story with edits and forks, appended in batches by this process or another (whose appends
    this cache never sees), through a cache small enough to evict, retire, pack and snapshot: every
    ``projection_at`` at the head, every plain load, equals a fold of the log from scratch."""
    counter = counter_projection()
    # A projection reading the counter's state (``state_of``): cached and folded as the counter.
    alias = Projection("test/counter/view", 7, counter.initial, counter.apply, state_of=counter)
    projections = (surface_projection, commands_projection, counter, turns_projection, alias)

    async def check(service: SessionService, store: EventStore, sid: str) -> None:
        events = await store.read(sid)
        head = events[-1].seq if events else 0
        for projection in projections:
            at = await service.projection_at(sid, projection, head)
            assert at.upto_seq == head
            assert roundtrip(at.state) == roundtrip(fold(projection, events))
        plain = await service.projection(sid, surface_projection)
        assert roundtrip(plain.state) == roundtrip(fold(surface_projection, events))
        assert (await service.projection(sid, alias)).state == fold(counter, events)
        assert not any(key[1] == alias.name for key in service.cache._entries)

    async def run(path: Path) -> None:
        store = open_store(f"sqlite:///{path}", clock=FixedClock(), ids=CountingIds())
        await store.migrate()
        other = open_store(f"sqlite:///{path}", clock=FixedClock())
        service = SessionService(store)
        service.projections.register(counter)
        service.cache = ProjectionCache(max_entries=max_entries, snapshot_every=snapshot_every, max_folded=max_folded, max_live=max_live)
        try:
            rec = await service.create("p", seed=log[:1])
            await check(service, store, rec.id)
            done = min(1, len(log))
            bounds = sorted({min(c, len(log)) for c in cuts} | {len(log)})
            for i, cut in enumerate(bounds):
                if cut <= done:
                    continue
                if outside[i % len(outside)]:
                    await other.append(rec.id, done, log[done:cut])
                else:
                    await service.append(rec.id, log[done:cut], expected_seq=done)
                done = cut
                await check(service, store, rec.id)
                if i % 3 == 2:
                    service.cache.retire(rec.id)
            fork = await service.fork(rec.id, min(fork_at, done))
            await check(service, store, fork.id)
            await check(service, store, rec.id)
            assert service.cache._folded == sum(e.upto_seq for e in service.cache._entries.values())
        finally:
            await other.close()
            await store.close()

    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(run(Path(tmp) / "rp.db"))


@pytest.mark.anyio
async def test_only_a_few_retired_sessions_stay_kept(store: EventStore) -> None:
    # A server retires a Writer child every turn: kept until the cache is full, they would be a
    # large share of the heap every full collection walks. The newest few stay usable.
    from roleplay.harness import projections

    cache = ProjectionCache()
    children = [await store.create_session(preset="c", events=[user("c")]) for _ in range(projections._MAX_RETIRED + 3)]
    for child in children:
        await cache.load(store, child.id, surface_projection)
        cache.retire(child.id)
    kept = {k[0] for k in cache._entries}
    assert kept == {c.id for c in children[3:]}
    assert cache._folded == sum(e.upto_seq for e in cache._entries.values())
    assert set(cache._sessions) == kept


@pytest.mark.anyio
async def test_resting_states_are_packed_and_read_back_equal(store: EventStore, monkeypatch: pytest.MonkeyPatch) -> None:
    # A server keeps hundreds of stories' states: beyond the most recently used few they rest as
    # one bytes object each, which a full collection does not walk (issue 16).
    import gc

    from roleplay.harness import projections

    counter = counter_projection()
    stories = [await store.create_session(preset="p", events=[user(f"s{i}-{j}") for j in range(3)]) for i in range(4)]
    cache = ProjectionCache(max_live=2)
    handed = {}
    for rec in stories:
        for projection in (surface_projection, counter):
            handed[rec.id, projection.name] = (await cache.load(store, rec.id, projection)).state
    entries = cache._entries
    packed = [k for k, e in entries.items() if e.packed is not None]
    assert len(entries) == 8 and len(packed) == 6  # all but the two most recently used
    assert all(entries[k].state is None for k in packed) and not gc.is_tracked(entries[packed[0]].packed)
    # Read again (at the head, or after an append folded in by the cache): equal to a fresh fold.
    first = stories[0]
    again = await cache.load_at(store, first.id, surface_projection, 3)
    assert again.state == fold(surface_projection, await store.read(first.id)) == handed[first.id, surface_projection.name]
    await store.append(first.id, 3, [user("more")])
    grown = await cache.load(store, first.id, counter)
    assert grown.state == fold(counter, await store.read(first.id)) == {"n": 4, "last": 4}
    # It rested packed meanwhile: the fold went into the unpacked state, not the one handed out.
    assert handed[first.id, counter.name] == {"n": 3, "last": 3}
    assert cache._folded == sum(e.upto_seq for e in entries.values())
    # A large state stays an object: packing it would hold the loop for milliseconds.
    monkeypatch.setattr(projections, "PACK_MAX_SEQ", 3)
    big = ProjectionCache(max_live=1)
    await big.load(store, first.id, surface_projection)  # 4 events
    await big.load(store, stories[1].id, surface_projection)  # 3 events
    await big.load(store, stories[2].id, surface_projection)
    kinds = {k[0]: e.packed is not None for k, e in big._entries.items()}
    assert kinds == {first.id: False, stories[1].id: True, stories[2].id: False}


@pytest.mark.anyio
async def test_a_projection_read_as_another_is_folded_and_kept_once(store: EventStore) -> None:
    # rp/state/activity reads rp/state's tracker (issue 16): one entry, one fold per event, and
    # its loads give the same state object as the other's.
    counter = counter_projection()
    alias = Projection("test/counter/view", 3, counter.initial, counter.apply, state_of=counter)
    service = SessionService(store)
    service.projections.register(counter)
    service.projections.register(alias)
    rec = await service.create("p", seed=[user("u1"), user("u2")])
    await service.append(rec.id, [user("u3")], expected_seq=2)
    keys = [k for k in service.cache._entries if k[0] == rec.id and k[1].startswith("test/")]
    assert keys == [(rec.id, counter.name, counter.version)]
    via_alias = await service.projection_at(rec.id, alias, 3)
    assert via_alias.state == {"n": 3, "last": 3} and via_alias.state is (await service.projection_at(rec.id, counter, 3)).state
    # A fold from the store (with the other's snapshot) gives the same state too.
    from roleplay.harness.projections import load, write_snapshot

    await write_snapshot(store, rec.id, alias)
    assert await store.load_snapshot(rec.id, alias.name, alias.version) is None
    assert (await store.load_snapshot(rec.id, counter.name, counter.version)) is not None
    loaded = await load(store, rec.id, alias)
    assert loaded.state == {"n": 3, "last": 3} and loaded.from_snapshot_seq == 3


@pytest.mark.anyio
async def test_a_state_only_read_since_it_rested_goes_back_to_its_bytes(store: EventStore, monkeypatch: pytest.MonkeyPatch) -> None:
    # Repacking an unchanged state is dropping it: no marshal.dumps. A fold into it drops the
    # bytes, and the next rest marshals the new state.
    from roleplay.harness import projections

    counter = counter_projection()
    a = await store.create_session(preset="p", events=[user(f"a{j}") for j in range(2)])
    b = await store.create_session(preset="p", events=[user(f"b{j}") for j in range(2)])
    cache = ProjectionCache(max_live=1)
    await cache.load(store, a.id, counter)
    await cache.load(store, b.id, counter)  # a rests
    entry = cache._entries[a.id, counter.name, counter.version]
    rested = entry.packed
    assert rested is not None and entry.state is None
    dumps = []
    real = projections.marshal.dumps
    monkeypatch.setattr(projections.marshal, "dumps", lambda value: dumps.append(value) or real(value))
    assert (await cache.load_at(store, a.id, counter, 2)).state == {"n": 2, "last": 2}
    assert entry.clean is rested
    await cache.load_at(store, b.id, counter, 2)  # a rests again: the same bytes
    assert entry.packed is rested and entry.clean is None and len(dumps) == 1  # (b's)
    cache.advance(a.id, 2, [projections.Event(a.id, 3, "user/message", {"messageId": "a3", "content": []}, "t")])
    assert (await cache.load_at(store, a.id, counter, 3)).state == {"n": 3, "last": 3}
    assert entry.clean is None
    await cache.load_at(store, b.id, counter, 2)
    assert entry.packed is not None and entry.packed is not rested and projections.marshal.loads(entry.packed) == {"n": 3, "last": 3}


@pytest.mark.anyio
async def test_appends_to_a_resting_state_wait_with_it_until_it_is_used(store: EventStore, monkeypatch: pytest.MonkeyPatch) -> None:
    # An append does not unpack and repack the session's resting states: the events are kept
    # marshalled with the state and folded when it is next used (a few of them at most).
    from roleplay.harness import projections
    from roleplay.harness.sessions import fresh_copies

    counter = counter_projection()
    a = await store.create_session(preset="p", events=[user("a1")])
    b = await store.create_session(preset="p", events=[user("b1")])
    cache = ProjectionCache(max_live=1)
    await cache.load(store, a.id, counter)
    await cache.load(store, b.id, counter)  # a rests
    entry = cache._entries[a.id, counter.name, counter.version]
    rested = entry.packed
    monkeypatch.setattr(projections, "PENDING_MAX", 3)
    seq = 1
    for n in range(5):
        events = fresh_copies(await store.append(a.id, seq, [user(f"a{seq + 1}"), user(f"a{seq + 2}")]))
        cache.advance(a.id, seq, events)
        seq += 2
        assert entry.upto_seq == seq and cache._folded == sum(e.upto_seq for e in cache._entries.values())
        if n < 3:  # waiting, the state untouched
            assert entry.packed is rested and entry.state is None and len(entry.pending or ()) == n + 1
    # The fourth append found three waiting: all were folded then (the state live again, the
    # fifth folded as made).
    assert entry.packed is None and entry.pending is None and entry.state == {"n": 11, "last": 11}
    await cache.load_at(store, b.id, counter, 1)  # a rests again
    cache.advance(a.id, seq, fresh_copies(await store.append(a.id, seq, [user("last")])))
    assert entry.pending is not None and entry.state is None
    read = await cache.load_at(store, a.id, counter, seq + 1)
    assert read.state == fold(counter, await store.read(a.id)) == {"n": 12, "last": 12}
    assert entry.pending is None and entry.clean is None


def picky_projection() -> Projection:
    """The counter, whose fold raises on the message with id "bad"."""
    counter = counter_projection()

    def apply(state: dict[str, Any], ev: Any) -> dict[str, Any]:
        if ev.payload.get("messageId") == "bad":
            raise RuntimeError("bad event")
        return counter.apply(state, ev)

    return Projection("test/picky", 1, counter.initial, apply)


@pytest.mark.anyio
async def test_a_waiting_append_that_fails_to_fold_leaves_the_state_resting(store: EventStore) -> None:
    # Never a state short of the events its seq counts: the fold raises at each use instead.
    from roleplay.harness.sessions import fresh_copies

    picky = picky_projection()
    a = await store.create_session(preset="p", events=[user("a1")])
    b = await store.create_session(preset="p", events=[user("b1")])
    cache = ProjectionCache(max_live=1)
    await cache.load(store, a.id, picky)
    await cache.load(store, b.id, picky)  # a rests
    cache.advance(a.id, 1, fresh_copies(await store.append(a.id, 1, [user("bad")])))
    entry = cache._entries[a.id, picky.name, picky.version]
    rested, pending = entry.packed, entry.pending
    for _ in range(2):
        with pytest.raises(RuntimeError):
            await cache.load_at(store, a.id, picky, 2)
        assert entry.state is None and entry.packed is rested and entry.pending == pending and entry.upto_seq == 2


@pytest.mark.anyio
async def test_a_fold_that_fails_on_appended_events_fails_its_readers_not_the_append(store: EventStore) -> None:
    """Once events are in the log the append happened: a projection that cannot fold them (a
    plugin's bug) is dropped from the cache and raises to whoever reads it, from the log, at every
    read; the creation or append that wrote them succeeds, and every other state goes on."""
    picky = picky_projection()
    service = SessionService(store)
    service.projections.register(picky)
    created = await service.create("p", seed=[user("bad")])  # created, though the fold failed
    assert [e.payload["messageId"] for e in await store.read(created.id)] == ["bad"]
    other = await service.create("p", seed=[user("u1")])
    events = await service.append(other.id, [user("bad")], expected_seq=1)
    assert [e.seq for e in events] == [2] and await store.head(other.id) == 2
    for _ in range(2):  # from the log each time, never a half-folded state
        with pytest.raises(RuntimeError, match="bad event"):
            await service.projection_at(other.id, picky, 2)
    surface = await service.projection_at(other.id, surface_projection, 2)
    assert [n["id"] for n in surface.state["nodes"]] == ["u1", "bad"]
    await service.append(other.id, [user("u3")], expected_seq=2)  # appends go on
    assert (await service.projection_at(other.id, commands_projection, 3)).upto_seq == 3
