"""Every run lease of a PostgreSQL store on one kept connection (issue 16).

A run lease is a session-level advisory lock, so it must stay on one backend for the whole turn.
Holding a pooled connection per lease capped a process at its pool size in concurrent turns (8):
a ninth waited 30 s and failed ``store.unavailable``. Advisory locks on different keys coexist on
one backend, so all the leases of a store share one dedicated connection, used only for the short
lock and unlock statements, one at a time (an asyncio lock; psycopg runs one statement per
connection anyway). ``pg_try_advisory_lock`` never waits, so a busy lease is still refused at once.

Two consequences of sharing:

- Advisory locks are re-entrant within a backend, so PostgreSQL would grant this process a second
  lease on a session it already holds. The sessions held here are therefore tracked, and a second
  lease is refused locally, as ``run.busy``.
- A session created to be run at once (a Writer's child) is inserted *on this connection*, in the
  statement that locks it (:meth:`LeaseConnection.create_locked`): no other process can see it
  unleased, and the lock costs no round trip of its own. Unlocks may be sent together
  (:meth:`LeaseConnection.release` with ``also``): a run releases its children's leases with its
  own (``leases.run_lease``).
- The watch locks that tell other processes which sessions this one streams live here too
  (pg_watchers.py): :meth:`LeaseConnection.watch`.
- While a lease is held here, the session's head is known (:attr:`LeaseConnection.heads`): the
  lock statement reads it once the lock is taken, and this store's appends move it. Everything
  that writes a session's log takes its lease (``harness/leases.py``), so no other writer moves it
  meanwhile, and a read past that head is answered without a round trip (a run's read of what is
  new at its start and at each commit attempt). A conflict on the session, another process's
  notification of an append to it, the release and a lost connection forget it.
- When the connection ends, every lease on it is gone at once (that is also what frees a crashed
  process's sessions). Each lease remembers the connection's *generation*; a dead connection bumps
  it, so the affected leases report themselves lost (:meth:`LeaseConnection.alive`), their
  unlocks do nothing, and the next lease connects afresh. A death is noticed when a statement on the
  connection fails, or by :meth:`alive`, which reads whatever the server sent without a round trip
  (a terminated backend sends a FATAL message and closes the socket).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any, Awaitable, Callable, Iterable

from roleplay.errors import ConflictError, RpError

from .base import SESSION_COLUMNS, SessionRecord, session_not_found
from .faults import postgres_fault
from .pg_watchers import WATCH_SQL, WATCHED_SQL, Watchers, bucket

_KEY = "hashtextextended(current_schema() || ':run:' || %s, 0)"
# The session's row comes with the lock, read by the same statement (so as of just before the
# lock was taken, like a read before it): a run that needs the record reads it no second time.
# So does whether another process streams the session (pg_watchers.py). The first column is NULL
# when the lock is refused, else the head as committed once it was taken (``rp_session_head``,
# migration 7, a fresh snapshot: the statement's own could predate the previous holder's last
# append, committed just before its unlock); CASE evaluates its condition first.
LOCK_SQL = (
    f"SELECT CASE WHEN pg_try_advisory_lock({_KEY}) THEN rp_session_head(id) END, {WATCHED_SQL}, {SESSION_COLUMNS} "
    "FROM sessions WHERE id = %s"
)
UNLOCK_SQL = f"SELECT pg_advisory_unlock({_KEY})"
# Several at once, in the order given (the function scan yields the array in order).
UNLOCK_MANY_SQL = "SELECT pg_advisory_unlock(hashtextextended(current_schema() || ':run:' || u.id, 0)) FROM unnest(%b::text[]) AS u(id)"
# Insert the session and lock it in one statement; the lock's key is the same as LOCK_SQL's. A
# session-level lock outlives a failed statement, so it is taken only when the parent's foreign
# key, checked at the statement's end, will hold (sessions are never deleted).
CREATE_LOCKED_SQL = (
    "WITH s AS ({insert} RETURNING id, parent_id) SELECT pg_try_advisory_lock(hashtextextended(current_schema() || ':run:' || s.id, 0)) "
    "FROM s WHERE s.parent_id IS NULL OR EXISTS (SELECT 1 FROM sessions p WHERE p.id = s.parent_id)"
)
# After a creation failed anyway: give back the lock if the statement took it.
UNLOCK_IF_HELD_SQL = (
    f"SELECT pg_advisory_unlock(h.k) FROM (SELECT {_KEY} AS k) h WHERE EXISTS (SELECT 1 FROM pg_locks l"
    " WHERE l.locktype = 'advisory' AND l.pid = pg_backend_pid() AND l.granted AND l.objsubid = 1"
    " AND l.classid::bigint = ((h.k >> 32) & 4294967295) AND l.objid::bigint = (h.k & 4294967295))"
)
CONNECT_TIMEOUT = 15.0


def lease_busy(session_id: str) -> ConflictError:
    return ConflictError(
        "run.busy",
        f"session {session_id} already has an active run; wait for it to finish or abort it",
        details={"sessionId": session_id},
    )


def lease_lost(session_id: str) -> RpError:
    return RpError(
        "store.lease_lost",
        f"the run lease on session {session_id} was lost with its PostgreSQL connection; nothing more"
        " is written for this run (the next one closes its turn as interrupted)",
        details={"sessionId": session_id},
    )


class LeaseConnection:
    """The one connection a store holds its run leases on, reconnected when it dies."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._conn: Any = None
        self._generation = 0
        self._held: dict[str, int] = {}  # session id -> generation it was locked in
        self._stale = False  # the current connection died; the next lease replaces it
        self._lock: asyncio.Lock | None = None
        self._pending: set[asyncio.Task[Any]] = set()  # unlocks of acquisitions whose caller was cancelled
        # The watch locks of this process's subscribers live here too (pg_watchers.py).
        self.watchers = Watchers()
        self._watching: dict[int, int] = {}  # bucket -> how many of the watched sessions are in it
        self._watched: set[str] = set()
        self._watch_args: tuple[Any, ...] | None = None  # the last watch(), redone on a new connection
        # The head of each session leased here (module docstring): what a read past it would find is nothing.
        self.heads: dict[str, int] = {}

    @property
    def backend_pid(self) -> int | None:
        return None if self._conn is None else int(self._conn.info.backend_pid)

    async def acquire(self, session_id: str) -> tuple[int, SessionRecord]:
        """Lock the session's lease; the answer is the generation to hand back to :meth:`release`
        and :meth:`alive`, and the session's record. ``run.busy`` when held (here or elsewhere),
        not found when the session does not exist. The statement is shielded from cancellation,
        so the connection is never left mid-protocol, and a lock taken for a caller that was
        cancelled meanwhile is undone."""
        generation, row = await self._shielded(session_id, self._acquire(session_id))
        return generation, replace(SessionRecord.from_row(row[1:]), head_seq=row[0])

    def moved(self, session_id: str, head: int) -> None:
        """This store appended to the session up to ``head`` (committed)."""
        known = self.heads.get(session_id)
        if known is not None and head > known:
            self.heads[session_id] = head

    def forget(self, session_id: str) -> None:
        """Someone else moved the session's log (a conflict, another process's notification):
        its reads go to the database again until its next lease."""
        self.heads.pop(session_id, None)

    async def create_locked(self, session_id: str, insert_sql: str, args: tuple[Any, ...]) -> int:
        """Run ``insert_sql`` (an ``INSERT INTO sessions …`` of ``session_id``, without RETURNING)
        and lock the new session's lease in the same statement; the generation, as :meth:`acquire`.
        The insert's own errors (a unique or foreign key violation) are raised as psycopg's."""

        async def run(conn: Any) -> tuple[Any, ...] | None:
            cur = await conn.execute(CREATE_LOCKED_SQL.format(insert=insert_sql), args)
            return await cur.fetchone()  # type: ignore[no-any-return]

        generation, _ = await self._shielded(session_id, self._acquire(session_id, run=run))
        return generation

    async def create_with(self, session_id: str, statement: Callable[[Any], Awaitable[bool]], head: int = 0) -> int:
        """Run ``statement`` on this connection: it inserts the session (with its first events, up
        to ``head``) and answers whether it took the session's lock, which it must take only once
        nothing can fail any more (a session-level lock outlives a failed statement; one taken
        anyway is given back). The generation, as :meth:`acquire`."""

        async def run(conn: Any) -> tuple[Any, ...]:
            return (await statement(conn),)

        generation, _ = await self._shielded(session_id, self._acquire(session_id, run=run, head=head))
        return generation

    def adopt(self, session_id: str) -> int:
        """The generation of a lease :meth:`create_locked` took, for the run that now holds it;
        ``store.lease_lost`` when it went with its connection meanwhile."""
        generation = self._held.get(session_id)
        if generation is None or generation != self._generation:
            raise lease_lost(session_id)
        return generation

    async def release(self, session_id: str, generation: int, also: list[tuple[str, int]] | None = None) -> None:
        """Unlock, unless the lease was lost with its connection (then there is nothing to unlock).
        ``also``: other leases (session, generation) to unlock in the same statement."""
        task = asyncio.ensure_future(self._release([(session_id, generation), *(also or [])]))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)
        await asyncio.shield(task)

    def alive(self, session_id: str, generation: int) -> bool:
        """Whether the lease taken in ``generation`` is still held. No round trip: a statement in
        flight will notice a dead connection itself; otherwise the socket is read without waiting."""
        if self._held.get(session_id) != generation or generation != self._generation or self._conn is None:
            return False
        if self._lock is not None and self._lock.locked():
            return True
        try:
            for _ in range(2):  # the first read may only bring the server's FATAL message, the next its close
                self._conn.pgconn.consume_input()
        except Exception:  # noqa: BLE001 - any failure to read means the connection is gone
            self._lost()
            return False
        if self._conn.closed or self._conn.broken:
            self._lost()
            return False
        return True

    def watch(self, sessions: Callable[[], Iterable[str]], channel: str, note: Callable[[str], str]) -> "asyncio.Task[None]":
        """Bring the watch locks in line with ``sessions()`` (read when the statement is made, so
        one statement serves every change made meanwhile), announcing each newly watched session
        with ``note(session_id)`` on ``channel`` (pg_watchers.py). A task that never fails: a
        failure leaves things as they were for the next call to mend (chunks are cosmetic)."""
        self._watch_args = (sessions, channel, note)
        task = asyncio.ensure_future(self._watch(sessions, channel, note))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)
        return task

    async def settled(self) -> None:
        """Wait until the statements left running in the background are done: a cancelled
        acquisition's (shielded, it may still take its lock) and the release that undoes it."""
        while self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)
            await asyncio.sleep(0)  # an acquisition's done-callback adds its undo

    async def close(self) -> None:
        for task in list(self._pending):
            try:
                await task
            except Exception:  # noqa: BLE001 - shutting down: the locks go with the connection
                pass
        await self._close_lost()

    # -- internals -------------------------------------------------------------------------------
    def _guard(self) -> asyncio.Lock:
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    async def _shielded(self, session_id: str, acquisition: Any) -> tuple[int, tuple[Any, ...]]:
        """The statement is shielded from cancellation, so the connection is never left
        mid-protocol, and a lock taken for a caller that was cancelled meanwhile is undone."""
        task = asyncio.ensure_future(acquisition)
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            self._pending.add(task)
            task.add_done_callback(lambda t: self._undo(session_id, t))
            raise

    async def _acquire(
        self, session_id: str, run: Callable[[Any], Awaitable[tuple[Any, ...] | None]] | None = None, head: int = 0
    ) -> tuple[int, tuple[Any, ...]]:
        """Lock ``session_id`` with LOCK_SQL (the answer: the head, then the session's row), or
        with ``run`` (a creation of a session whose head is ``head``: its row's first column says
        whether it took the lock)."""
        async with self._guard():
            if session_id in self._held:
                raise lease_busy(session_id)
            conn = await self._connected()
            stamp = self.watchers.stamp()
            try:
                if run is None:
                    cur = await conn.execute(LOCK_SQL, (session_id, bucket(session_id), session_id))
                    row = await cur.fetchone()
                else:
                    row = await run(conn)
            except Exception as exc:  # noqa: BLE001 - faults become store.*; the rest re-raised
                if conn.closed or conn.broken:
                    self._lost()
                elif run is not None:
                    await self._unlock_if_held(conn, session_id)
                fault = postgres_fault(exc)
                if fault is None:
                    raise
                raise fault from exc
            if row is None:
                raise session_not_found(session_id)
            if row[0] is None or row[0] is False:
                raise lease_busy(session_id)
            self._held[session_id] = self._generation
            if run is not None:  # a session just made: no other process has streamed it yet
                self.watchers.checked(session_id, False, stamp)
                self.heads[session_id] = head
                return self._generation, ()
            self.watchers.checked(session_id, bool(row[1]), stamp)
            self.heads[session_id] = int(row[0])
            return self._generation, (int(row[0]), *row[2:])

    async def _watch(self, sessions: Callable[[], Iterable[str]], channel: str, note: Callable[[str], str]) -> None:
        async with self._guard():
            if set(sessions()) == self._watched:
                return
            try:
                conn = await self._connected()  # a lost connection forgets its locks: all are new
            except RpError:
                return
            want = set(sessions())
            new, gone = sorted(want - self._watched), self._watched - want
            counts = dict(self._watching)
            unlock, lock = [], []
            for sid in gone:
                b = bucket(sid)
                counts[b] -= 1
                if not counts[b]:
                    del counts[b]
                    unlock.append(b)
            for sid in new:
                b = bucket(sid)
                if b not in counts:
                    lock.append(b)
                counts[b] = counts.get(b, 0) + 1
            generation = self._generation
            try:
                await (await conn.execute(WATCH_SQL, (unlock, lock, [note(sid) for sid in new], channel))).fetchall()
            except Exception:  # noqa: BLE001 - see watch()
                if conn.closed or conn.broken:
                    self._lost()  # once more, on a new connection (a failure to connect ends it)
                    self.watch(sessions, channel, note)
                return
            if generation == self._generation:
                self._watching, self._watched = counts, want

    async def _unlock_if_held(self, conn: Any, session_id: str) -> None:
        try:
            await (await conn.execute(UNLOCK_IF_HELD_SQL, (session_id,))).fetchall()
        except Exception:  # noqa: BLE001 - a connection that cannot unlock is closed, which unlocks
            await self._close_lost()

    async def _release(self, leases: list[tuple[str, int]]) -> None:
        async with self._guard():
            # Those lost with their connection are skipped; a newer lease on the session is not ours to drop.
            held = [sid for sid, generation in leases if self._held.get(sid) == generation == self._generation]
            if not held:
                return
            for sid in held:
                del self._held[sid]
                self.heads.pop(sid, None)
            conn = self._conn
            try:
                if len(held) == 1:
                    cur = await conn.execute(UNLOCK_SQL, (held[0],))
                else:
                    cur = await conn.execute(UNLOCK_MANY_SQL, (held,))
                await cur.fetchall()  # false only if the lock was not held: nothing left to release
            except Exception:  # noqa: BLE001 - a connection that cannot unlock is closed, which unlocks
                await self._close_lost()

    def _undo(self, session_id: str, task: asyncio.Task[tuple[int, tuple[Any, ...]]]) -> None:
        self._pending.discard(task)
        if task.cancelled() or task.exception() is not None:
            return
        undo = asyncio.ensure_future(self._release([(session_id, task.result()[0])]))
        self._pending.add(undo)
        undo.add_done_callback(self._pending.discard)

    async def _connected(self) -> Any:
        conn = self._conn
        if conn is not None and not self._stale and not (conn.closed or conn.broken):
            return conn
        if conn is not None:
            await self._close_lost()
        import psycopg

        try:
            self._conn = await asyncio.wait_for(psycopg.AsyncConnection.connect(self.url, autocommit=True), CONNECT_TIMEOUT)
        except Exception as exc:  # noqa: BLE001 - a database that cannot be reached is an unavailable store
            raise RpError("store.unavailable", f"cannot connect to PostgreSQL for a run lease: {exc}") from exc
        if conn is not None and self._watch_args is not None:
            self.watch(*self._watch_args)  # the lost connection's watch locks went with it
        return self._conn

    def _lost(self) -> None:
        """Every lease on the current connection is gone: forget them and start a new generation.
        The dead connection itself is closed by the next statement (:meth:`_close_lost`)."""
        self._generation += 1
        self._held.clear()
        self.heads.clear()
        self._watching.clear()
        self._watched = set()
        self._stale = self._conn is not None

    async def _close_lost(self) -> None:
        conn, self._conn = self._conn, None
        self._lost()
        if conn is not None:
            try:
                await conn.close()
            except Exception:  # noqa: BLE001 - it is already gone
                pass
