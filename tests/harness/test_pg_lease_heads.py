"""A PostgreSQL store knows the head of each session it holds the run lease on (pg_leases.py): a
read past it costs no round trip, and whatever may have moved the log sends reads back to the
database."""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator

import pytest

from roleplay.clock import FixedClock
from roleplay.harness.events import EventDraft
from roleplay.harness.leases import created_session_lease, run_lease
from roleplay.harness.store import open_store
from roleplay.harness.store.postgres import PostgresStore

pytestmark = pytest.mark.anyio


def _msg(text: str) -> list[EventDraft]:
    return [EventDraft("user/message", {"messageId": f"m-{text}", "content": [{"type": "text", "text": text}]})]


@pytest.fixture
async def two(pg_url: str) -> AsyncIterator[tuple[PostgresStore, PostgresStore]]:
    """Two stores on one schema: two processes, as far as the database can tell."""
    a = open_store(pg_url, clock=FixedClock())
    b = open_store(pg_url, clock=FixedClock())
    assert isinstance(a, PostgresStore) and isinstance(b, PostgresStore)
    await a.migrate()
    try:
        yield a, b
    finally:
        await a.close()
        await b.close()


def _count_reads(store: PostgresStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    fetchall = store._fetchall

    async def counting(sql: str, args: Any = ()) -> list[tuple[Any, ...]]:
        seen.append(sql)
        return await fetchall(sql, args)

    fetchone = store._fetchone

    async def counting_one(sql: str, args: Any = ()) -> tuple[Any, ...] | None:
        seen.append(sql)
        return await fetchone(sql, args)

    monkeypatch.setattr(store, "_fetchall", counting)
    monkeypatch.setattr(store, "_fetchone", counting_one)
    return seen


async def test_a_read_past_a_leased_sessions_head_is_answered_without_a_round_trip(
    two: tuple[PostgresStore, PostgresStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, _ = two
    sid = (await a.create_session(preset="p", events=_msg("one"))).id
    reads = _count_reads(a, monkeypatch)
    async with run_lease(a, sid) as lease:
        assert lease.record is not None and lease.record.head_seq == 1
        assert await a.read(sid, after_seq=1) == [] and await a.read(sid, after_seq=5, limit=3) == []
        assert reads == []
        await a.append(sid, 1, _msg("two"))
        assert await a.read(sid, after_seq=2) == [] and reads == []  # its own append moved the head it knows
        assert [e.seq for e in await a.read(sid, after_seq=1)] == [2] and len(reads) == 1  # before it: read
        await a.append_at_head(sid, _msg("three"))
        assert await a.read(sid, after_seq=3) == [] and len(reads) == 1
        assert await a.head(sid) == 3 and len(reads) == 1
    assert await a.read(sid, after_seq=3) == [] and len(reads) == 2  # released: read again
    assert await a.head(sid) == 3 and len(reads) == 3


async def test_a_created_sessions_lease_knows_its_first_events(
    two: tuple[PostgresStore, PostgresStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, _ = two
    parent = (await a.create_session(preset="p")).id
    reads = _count_reads(a, monkeypatch)

    async def create() -> Any:
        return await a.create_session(preset="c", parent_id=parent, events=_msg("hi"), leased=True)

    async with run_lease(a, parent):
        async with created_session_lease(a, create) as (child, _lease):
            assert await a.read(child.id, after_seq=1) == [] and reads == []
            assert [e.seq for e in await a.read(child.id)] == [1]


async def test_a_lease_knows_the_head_its_previous_holder_left(two: tuple[PostgresStore, PostgresStore]) -> None:
    """The head comes from after the lock was taken, so the previous holder's last append, made
    just before its unlock, is never missed."""
    a, b = two
    sid = (await a.create_session(preset="p")).id
    for n in range(3):
        async with run_lease(b, sid):
            await b.append(sid, n, _msg(str(n)))
        async with run_lease(a, sid) as lease:
            assert lease.record is not None and lease.record.head_seq == n + 1
            assert [e.seq for e in await a.read(sid, after_seq=n)] == [n + 1]
            assert await a.read(sid, after_seq=n + 1) == []


async def test_a_conflict_or_another_process_notification_forgets_the_head(two: tuple[PostgresStore, PostgresStore]) -> None:
    """Every writer of a session's log takes its lease, so another process does not append under
    one; if one does anyway, the conflict it causes, or its notification, sends reads back to the
    database."""
    a, b = two
    sid = (await a.create_session(preset="p")).id
    async with run_lease(a, sid):
        await b.append(sid, 0, _msg("outside"))  # no lease: against the rule
        with pytest.raises(Exception) as exc:
            await a.append(sid, 0, _msg("mine"))
        assert getattr(exc.value, "code", None) == "event.seq_conflict"
        assert [e.seq for e in await a.read(sid)] == [1]
        assert await a.read(sid, after_seq=1) == []  # not known any more: asked
    async with a.subscribe(sid, after_seq=1) as sub:  # the listener runs from here on
        async with run_lease(a, sid):
            assert sid in a.leases.heads
            await b.append(sid, 1, _msg("outside again"))
            got = await asyncio.wait_for(sub.__anext__(), 10)
            assert got.event is not None and got.event.seq == 2
            assert sid not in a.leases.heads
            assert [e.seq for e in await a.read(sid, after_seq=1)] == [2]
