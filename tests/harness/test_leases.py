"""One active run per session, across processes; the lease dies with its holder."""

from __future__ import annotations

import asyncio
import contextvars
import multiprocessing
import os
import secrets
import signal
from typing import Awaitable, Callable

import pytest

from roleplay.errors import ConflictError, NotFoundError, RpError
from roleplay.harness.leases import check_lease, created_session_lease, held_lease, lease_taken, run_lease, session_lease
from roleplay.harness.events import EventDraft
from roleplay.harness.store import EventStore, open_store
from roleplay.harness.store.base import SessionRecord

pytestmark = pytest.mark.anyio


def _hold(url: str, session_id: str, ready: "multiprocessing.synchronize.Event", release: "multiprocessing.synchronize.Event") -> None:
    async def run() -> None:
        store = open_store(url)
        try:
            async with run_lease(store, session_id):
                ready.set()
                while not release.is_set():
                    await asyncio.sleep(0.02)
        finally:
            await store.close()

    asyncio.run(run())


async def _wait(event: "multiprocessing.synchronize.Event") -> None:
    assert await asyncio.get_running_loop().run_in_executor(None, event.wait, 60)


async def test_lease_held_in_another_process_refuses_and_is_released(store: EventStore, store_url: str) -> None:
    sid = (await store.create_session(preset="chat")).id
    ctx = multiprocessing.get_context("spawn")
    ready, release = ctx.Event(), ctx.Event()
    proc = ctx.Process(target=_hold, args=(store_url, sid, ready, release))
    proc.start()
    try:
        await _wait(ready)
        with pytest.raises(ConflictError) as exc:
            async with run_lease(store, sid):
                pass
        assert exc.value.code == "run.busy" and exc.value.details == {"sessionId": sid}
        release.set()
        await asyncio.get_running_loop().run_in_executor(None, proc.join, 30)
        async with run_lease(store, sid):
            pass  # free again once the holder let go
    finally:
        release.set()
        proc.join(5)


async def test_lease_taken_asks_without_taking(store: EventStore, store_url: str) -> None:
    sid, other = (await store.create_session(preset="chat")).id, (await store.create_session(preset="chat")).id
    assert not await lease_taken(store, sid)
    async with run_lease(store, sid):  # this process holds it
        assert await lease_taken(store, sid) and not await lease_taken(store, other)
    assert not await lease_taken(store, sid)
    ctx = multiprocessing.get_context("spawn")
    ready, release = ctx.Event(), ctx.Event()
    proc = ctx.Process(target=_hold, args=(store_url, sid, ready, release))
    proc.start()
    try:
        await _wait(ready)
        for _ in range(3):  # asking again and again never takes it: the holder keeps it throughout
            assert await lease_taken(store, sid) and not await lease_taken(store, other)
        with pytest.raises(ConflictError):
            async with run_lease(store, sid):
                pass
        release.set()
        await asyncio.get_running_loop().run_in_executor(None, proc.join, 30)
        assert not await lease_taken(store, sid)
        async with run_lease(store, sid):  # and asking never left it taken
            pass
    finally:
        release.set()
        proc.join(5)


async def test_a_crashed_holder_does_not_lock_the_session_forever(store: EventStore, store_url: str) -> None:
    sid = (await store.create_session(preset="chat")).id
    ctx = multiprocessing.get_context("spawn")
    ready, release = ctx.Event(), ctx.Event()
    proc = ctx.Process(target=_hold, args=(store_url, sid, ready, release))
    proc.start()
    await _wait(ready)
    os.kill(proc.pid, signal.SIGKILL)  # type: ignore[arg-type]
    await asyncio.get_running_loop().run_in_executor(None, proc.join, 30)
    for _ in range(50):  # PostgreSQL notices the dead connection shortly after the kill
        try:
            async with run_lease(store, sid):
                return
        except ConflictError:
            await asyncio.sleep(0.1)
    pytest.fail("the lease of a killed process was never released")


async def test_a_lease_brings_the_session_record_read_with_its_lock(store: EventStore) -> None:
    """PostgreSQL reads it in the lock's own statement, SQLite just before the lock: a run that
    needs the record (is the story playable?) reads it no second time."""
    sid = (await store.create_session(preset="chat", title="T")).id
    async with run_lease(store, sid) as lease:
        assert lease.record == await store.get_session(sid)
        async with session_lease(store, sid) as nested:
            assert nested.record is None  # the holder has it


async def test_same_process_second_lease_is_refused(store: EventStore) -> None:
    sid = (await store.create_session(preset="chat")).id
    async with run_lease(store, sid):
        with pytest.raises(ConflictError):
            async with run_lease(store, sid):
                pass


async def test_session_lease_reuses_the_lease_this_context_holds_and_nothing_else(store: EventStore) -> None:
    sid = (await store.create_session(preset="chat")).id
    assert held_lease(store, sid) is None
    async with run_lease(store, sid) as lease:
        assert held_lease(store, sid) is lease and not lease.nested
        async with session_lease(store, sid) as inner:  # the holder's own work (a tool of its run)
            assert inner.nested and inner.holds(store, sid)
        assert not inner.holds(store, sid)  # a reused lease is not a token to keep after its scope

        async def child_task() -> bool:
            async with session_lease(store, sid) as reused:
                return reused.nested

        assert await asyncio.ensure_future(child_task())  # tasks the holder starts share its lease

        async def stranger() -> None:
            async with session_lease(store, sid):
                pass

        with pytest.raises(ConflictError) as exc:  # a task from elsewhere (a UI request) does not
            await asyncio.create_task(stranger(), context=contextvars.Context())
        assert exc.value.code == "run.busy"
    assert held_lease(store, sid) is None and not lease.active
    async with session_lease(store, sid) as fresh:
        assert not fresh.nested


async def test_a_created_session_is_leased_from_its_insert_and_given_back_with_its_creators_lease(store: EventStore) -> None:
    """A session a run creates to run at once (a Writer's child) is never seen unleased; on
    PostgreSQL its lease goes back with the creating run's (one unlock for both), on SQLite when
    its own scope ends. Outside any run it goes back with its own scope on both."""
    parent = (await store.create_session(preset="roleplay")).id

    def make(name: str) -> Callable[[], Awaitable[SessionRecord]]:
        return lambda: store.create_session(preset="rp-writer", parent_id=parent, title=name, leased=True)

    async with run_lease(store, parent):
        async with created_session_lease(store, make("child")) as (child, lease):
            assert child.parent_id == parent and (await store.get_session(child.id)).title == "child"
            assert held_lease(store, child.id) is lease and lease.holds(store, child.id) and lease.record == child
            assert await lease_taken(store, child.id)
            with pytest.raises(ConflictError):
                async with run_lease(store, child.id):
                    pass
        assert held_lease(store, child.id) is None and not lease.active
        # Until the parent's lease goes, the child's stays taken on PostgreSQL.
        assert await lease_taken(store, child.id) == (store.dialect == "postgresql")
    assert not await lease_taken(store, child.id) and not await lease_taken(store, parent)
    async with run_lease(store, child.id), run_lease(store, parent):
        pass  # both free again

    async with created_session_lease(store, make("alone")) as (alone, _):
        assert await lease_taken(store, alone.id)
    assert not await lease_taken(store, alone.id)

    with pytest.raises(NotFoundError):  # the parent must exist: nothing is created, nothing held
        async with created_session_lease(
            store, lambda: store.create_session(preset="w", parent_id="ses_nope", session_id="ses_orphan", leased=True)
        ):
            pass
    assert not await lease_taken(store, "ses_orphan")  # a session-level lock would outlive the failed insert
    if store.dialect == "postgresql":  # and one a failed insert took anyway is given back
        conn = store.leases  # type: ignore[attr-defined]
        await (
            await conn._conn.execute("SELECT pg_advisory_lock(hashtextextended(current_schema() || ':run:' || 'ses_orphan', 0))")
        ).fetchall()
        assert await lease_taken(store, "ses_orphan")
        await conn._unlock_if_held(conn._conn, "ses_orphan")
        await conn._unlock_if_held(conn._conn, "ses_orphan")  # not held: nothing happens
        assert not await lease_taken(store, "ses_orphan")
    first = [
        EventDraft("turn/start", {"turnId": "t1"}),
        EventDraft("user/message", {"messageId": "m1", "content": [{"type": "text", "text": "x" * 9000}]}),
    ]
    with pytest.raises(NotFoundError):  # the same with first events (one statement on PostgreSQL)
        async with created_session_lease(
            store, lambda: store.create_session(preset="w", parent_id="ses_nope", session_id="ses_orphan2", events=first, leased=True)
        ):
            pass
    assert not await lease_taken(store, "ses_orphan2")
    async with run_lease(store, parent):
        async with created_session_lease(store, lambda: store.create_session(preset="w", parent_id=parent, events=first, leased=True)) as (
            started,
            lease,
        ):
            assert started.head_seq == 2 and await lease_taken(store, started.id) and lease.record == started
            assert [e.type for e in await store.read(started.id)] == ["turn/start", "user/message"]
            assert (await store.read(started.id))[1].payload["content"][0]["text"] == "x" * 9000
            with pytest.raises(ConflictError):
                async with run_lease(store, started.id):
                    pass
    assert not await lease_taken(store, started.id)

    taken = await store.create_session(preset="w")
    with pytest.raises(RpError) as exists:
        async with created_session_lease(store, lambda: store.create_session(preset="w", session_id=taken.id, leased=True)):
            pass
    assert exists.value.code == "session.exists"
    async with run_lease(store, taken.id):  # the refused insert left no lock behind
        pass


async def test_a_run_keeps_a_bounded_number_of_its_childrens_leases(store: EventStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past ``DEFERRED_MAX`` a finished child's lease goes back at once (PostgreSQL's lock table
    is shared and finite)."""
    if store.dialect != "postgresql":
        pytest.skip("SQLite gives a child's lease back when its scope ends")
    from roleplay.harness import leases

    monkeypatch.setattr(leases, "DEFERRED_MAX", 2)
    parent = (await store.create_session(preset="roleplay")).id
    children = []
    async with run_lease(store, parent) as lease:
        for _ in range(3):
            async with created_session_lease(store, lambda: store.create_session(preset="w", parent_id=parent, leased=True)) as (c, _):
                children.append(c.id)
        assert [await lease_taken(store, c) for c in children] == [True, True, False]
        assert [sid for sid, _ in lease.deferred] == children[:2]
    assert not any([await lease_taken(store, c) for c in [*children, parent]])


async def test_leases_on_many_sessions_leave_at_most_one_lock_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = open_store(f"sqlite:///{tmp_path / 'rp.db'}")
    await store.migrate()
    try:
        for _ in range(25):  # a story of 25 turns: a Writer child per turn
            sid = (await store.create_session(preset="rp-writer")).id
            async with run_lease(store, sid):
                pass
        assert [p.name for p in (tmp_path / "locks").iterdir()] == ["leases.lock"]
    finally:
        await store.close()


async def test_releasing_one_lease_keeps_the_others_of_the_process(store: EventStore, store_url: str) -> None:
    """Record locks belong to the process: closing a descriptor of the file would drop them all."""
    a, b = [(await store.create_session(preset="chat")).id for _ in range(2)]
    ctx = multiprocessing.get_context("spawn")
    async with run_lease(store, b):
        async with run_lease(store, a):
            pass
        ready, release = ctx.Event(), ctx.Event()
        proc = ctx.Process(target=_hold, args=(store_url, b, ready, release))
        proc.start()
        try:
            await asyncio.get_running_loop().run_in_executor(None, proc.join, 60)
            assert proc.exitcode != 0 and not ready.is_set()  # the other process got run.busy on b
        finally:
            release.set()
            proc.join(5)
        async with run_lease(store, a):  # a is free again, b still held here
            with pytest.raises(ConflictError):
                async with run_lease(store, b):
                    pass


async def test_postgres_leases_reuse_one_kept_connection(store: EventStore) -> None:
    """A run lease opens no connection of its own: turn after turn, the store's one lease
    connection takes and releases the lock; an unknown session is refused in the same query."""
    if store.dialect != "postgresql":
        pytest.skip("the lease connection is PostgreSQL's")
    rec = await store.create_session(preset="p")
    pids = set()
    for _ in range(5):
        async with run_lease(store, rec.id):
            with pytest.raises(ConflictError) as busy:
                async with run_lease(store, rec.id):
                    pass
            assert busy.value.code == "run.busy"
            pids.add(store.leases.backend_pid)  # type: ignore[attr-defined]
    assert len(pids) == 1 and None not in pids
    with pytest.raises(NotFoundError):
        async with run_lease(store, "ses_nope"):
            pass
    async with run_lease(store, rec.id):  # the refusals left nothing held
        pass


def _named(url: str, app: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}application_name={app}"


async def _sql(sql: str, *args: object) -> list[tuple[object, ...]]:
    import psycopg

    from tests_support import postgres_url_or_skip

    async with await psycopg.AsyncConnection.connect(postgres_url_or_skip(), autocommit=True) as conn:
        cur = await conn.execute(sql, args)
        return await cur.fetchall()


_RUN_LOCKS = (
    "SELECT count(*), count(DISTINCT l.pid) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
    " WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 AND a.application_name = %s"
)


async def test_fifty_concurrent_postgres_leases_share_one_connection(pg_url: str) -> None:
    """Fifty turns at once in one process, each holding its session's lease: all get it, on one
    backend, and the process's connections stay bounded (a lease used to hold a pooled connection
    each, so the ninth waited 30 s and failed with store.unavailable)."""
    app = "rp_leases_" + secrets.token_hex(4)
    store, other = open_store(_named(pg_url, app)), open_store(pg_url)  # other: a second process
    await store.migrate()
    try:
        sids = [(await store.create_session(preset="chat")).id for _ in range(50)]
        holding, done = asyncio.Barrier(51), asyncio.Event()

        async def turn(sid: str) -> None:
            async with run_lease(store, sid):
                await holding.wait()
                await done.wait()

        tasks = [asyncio.create_task(turn(sid)) for sid in sids]
        await asyncio.wait_for(holding.wait(), 30)  # all fifty held at the same time
        ((locks, lock_pids),) = await _sql(_RUN_LOCKS, app)
        assert (locks, lock_pids) == (50, 1)
        ((backends,),) = await _sql("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", app)
        assert backends <= 1 + 8 + 4, backends  # the lease connection + the main and lock pools' caps
        for sid in sids[:3]:  # held as far as everyone else is concerned
            assert await lease_taken(other, sid)
            with pytest.raises(ConflictError) as busy:
                async with run_lease(other, sid):
                    pass
            assert busy.value.code == "run.busy"
        done.set()
        await asyncio.gather(*tasks)
        ((locks, _),) = await _sql(_RUN_LOCKS, app)
        assert locks == 0
        async with run_lease(other, sids[0]):
            pass
    finally:
        await store.close()
        await other.close()


async def test_a_killed_lease_connection_loses_its_leases_cleanly_and_the_next_lease_works(pg_url: str) -> None:
    """The lease connection ends (a restarted database, an administrator's kill): its locks are
    released, so another process may start on those sessions; the runs that held them here fail
    their next check with store.lease_lost instead of writing on, and a new lease reconnects."""
    store, other = open_store(pg_url), open_store(pg_url)
    await store.migrate()
    try:
        a, b = [(await store.create_session(preset="chat")).id for _ in range(2)]
        async with run_lease(store, a) as lease_a:
            async with run_lease(store, b) as lease_b:
                lease_a.check()
                check_lease(store, b)
                pid = store.leases.backend_pid  # type: ignore[attr-defined]
                assert (await _sql("SELECT pg_terminate_backend(%s)", pid)) == [(True,)]
                for _ in range(50):  # the other process gets the lease once the backend is gone
                    try:
                        async with run_lease(other, a):
                            break
                    except ConflictError:
                        await asyncio.sleep(0.05)
                else:
                    pytest.fail("the killed connection's lock was never released")
                with pytest.raises(RpError) as lost:
                    check_lease(store, a)
                assert lost.value.code == "store.lease_lost" and lost.value.details == {"sessionId": a}
                with pytest.raises(RpError) as lost:
                    lease_b.check()
                assert lost.value.code == "store.lease_lost"
            # leaving a lost lease unlocks nothing and raises nothing
        async with run_lease(store, a):  # reconnected, and really held again
            assert store.leases.backend_pid not in (None, pid)  # type: ignore[attr-defined]
            with pytest.raises(ConflictError):
                async with run_lease(other, a):
                    pass
            async with run_lease(store, b):
                pass
    finally:
        await store.close()
        await other.close()


async def test_a_cancelled_postgres_lease_start_leaves_nothing_held(pg_url: str) -> None:
    """A start cancelled while its lock statement is in flight (a client that went away): the
    statement finishes on the shared connection, and a lock it took is given back at once."""
    store, other = open_store(pg_url), open_store(pg_url)
    await store.migrate()
    try:
        sid = (await store.create_session(preset="chat")).id
        async with run_lease(store, sid):  # connected: from here a start is one statement
            pass
        for ticks in range(6):

            async def start() -> None:
                async with run_lease(store, sid):
                    await asyncio.sleep(30)

            task = asyncio.create_task(start())
            for _ in range(ticks):
                await asyncio.sleep(0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # The statement goes on in the background and may take the lock after the cancel: a
            # poll of the lock could see it before it is taken (then it is taken and undone).
            await store.leases.settled()  # type: ignore[attr-defined]
            assert not await lease_taken(other, sid)
            async with run_lease(other, sid):  # released everywhere
                pass
            async with run_lease(store, sid):  # and not left marked as held in this process
                pass
    finally:
        await store.close()
        await other.close()
