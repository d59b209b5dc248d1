"""SQLite event store: one file, WAL mode, one writer thread per process (datasette's pattern).

Writes are queued to a dedicated thread that owns the only write connection, so within a process
they never contend; across processes ``BEGIN IMMEDIATE`` plus ``busy_timeout`` serialises them
and the conditional head update makes the append a compare-and-swap. Reads run on worker threads
with their own connections, which WAL lets proceed while a write is in flight.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
import os
import queue
import sqlite3
import threading
import time
from itertools import filterfalse
from pathlib import Path
from typing import Any, Callable, Mapping, TypeVar

from roleplay.clock import Clock, IdGenerator, system_clock, ulid_ids
from roleplay.errors import RpError

from ..events import Event
from .base import (
    SESSION_COLUMNS,
    EventStore,
    PreparedEvent,
    SessionFilter,
    SessionRecord,
    Snapshot,
    check_page_args,
    conflict,
    prepare_snapshot,
    session_listing_sql,
    snapshot_row,
    snapshot_state,
    snapshot_upsert_sql,
    session_not_found,
)
from .faults import sqlite_fault
from .migrations import MIGRATIONS, MIGRATIONS_TABLE_SQLITE
from .texts import PART_IDS_KEPT, Externalised, compress, event_rows, part_ids, texts_column

T = TypeVar("T")
READER_THREADS = 4
WAL_CHECKPOINT_PAGES = 256
WAL_SIZE_LIMIT = 1 << 20


class SQLiteStore(EventStore):
    dialect = "sqlite"

    def __init__(self, path: str | Path, *, clock: Clock = system_clock, ids: IdGenerator = ulid_ids) -> None:
        super().__init__(clock=clock, ids=ids)
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            _enable_wal(self.path)
            self._identity = _identity(os.stat(self.path))
        except (OSError, sqlite3.Error) as exc:
            fault = sqlite_fault(exc, self.path)
            if fault is None and isinstance(exc, OSError):
                # Whatever else stops the file being opened (a data directory under a regular
                # file, say) is about the database too.
                fault = RpError("store.unavailable", f"cannot open the database {self.path}: {exc}", details={"path": str(self.path)})
            raise fault or exc from exc
        # SimpleQueue: C, no lock and condition of its own to take for every write (issue 16).
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        # Reads go to this store's own reader threads, each with its own connection, started as
        # concurrent reads need them: a turn makes tens of small reads, and handing one to
        # ``asyncio.to_thread`` (a context copy, a concurrent future chained to an asyncio one, the
        # executor's locks) cost twice the CPU of a queue and one callback (issue 16).
        self._reads: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._reader_threads: list[threading.Thread] = []
        self._reads_waiting = 0  # only the event loop's thread counts them
        # The ids of text parts this store's writes used, by sha256, so that a turn's append looks
        # up only the parts of its Writer prompt it has not stored before, not all of them (issue
        # 12). Only the writer thread touches it, only after a commit: every id in it is a row of
        # the file the writer connection holds, and parts are never deleted (append-only
        # triggers). Another process's parts are a miss, looked up in the file as before.
        self._part_ids: dict[str, int] = {}
        self._writer = threading.Thread(target=self._writer_loop, name=f"rp-sqlite-writer:{self.path.name}", daemon=True)
        self._writer.start()
        self._closed = False

    # -- connections -----------------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        # mode=rw: a connection opened after the file was deleted must fail, not create a new,
        # empty database in its place (issue 18).
        uri = self.path.absolute().as_uri() + "?mode=rw"
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False, timeout=30)
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA busy_timeout=30000")
        # The WAL file otherwise keeps the size of its largest burst (a snapshot, a long story's
        # turn) for good: checkpoint every 256 pages (1 MiB) and cut it back to 1 MiB after each.
        conn.execute(f"PRAGMA wal_autocheckpoint={WAL_CHECKPOINT_PAGES}")
        conn.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")
        conn.execute("PRAGMA foreign_keys=ON")
        return conn

    def _check_file(self) -> None:
        """Stop if the file at ``path`` is no longer the one opened: writes would go to an unlinked
        file (lost on close) or beside a database someone put in its place. One ``stat`` per
        transaction (bench/eventlog.py measures the cost)."""
        try:
            now = _identity(os.stat(self.path))
        except FileNotFoundError:
            raise RpError(
                "store.deleted",
                f"the database {self.path} was deleted or moved while it was open; stopping so that "
                "nothing more is written to a file no one can read",
                details={"path": str(self.path)},
            ) from None
        if now != self._identity:
            raise RpError(
                "store.replaced",
                f"the database {self.path} was replaced by another file while it was open; stopping "
                "so that nothing is written to the old one (run the command again to use the new file)",
                details={"path": str(self.path)},
            )

    def _run_checked(self, fn: Callable[[sqlite3.Connection], T], conn: sqlite3.Connection) -> T:
        self._check_file()
        try:
            return fn(conn)
        except (OSError, sqlite3.OperationalError, sqlite3.DatabaseError) as exc:
            fault = sqlite_fault(exc, self.path)
            if fault is None:
                raise
            raise fault from exc

    def _writer_loop(self) -> None:
        try:
            conn: sqlite3.Connection | None = self._connect()
            broken: BaseException | None = None
        except (OSError, sqlite3.Error) as exc:
            # Keep serving the queue, each write failing with the reason, rather than leaving
            # its callers waiting forever on a thread that died.
            conn, broken = None, sqlite_fault(exc, self.path) or exc
        try:
            while True:
                item = self._queue.get()
                if item is None:
                    return
                fn, loop, fut = item
                outcome: tuple[bool, Any]
                if conn is None:
                    outcome = (False, broken)
                else:
                    try:
                        outcome = (True, self._run_checked(fn, conn))
                    except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
                        _rollback(conn)
                        outcome = (False, exc)
                try:
                    loop.call_soon_threadsafe(_settle, fut, outcome)
                except RuntimeError:
                    pass  # the awaiting loop is gone; nothing to deliver to
        finally:
            if conn is not None:
                conn.close()

    async def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self._closed:
            raise RpError("store.closed", "the store is closed")
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[T] = loop.create_future()
        self._queue.put((fn, loop, fut))
        return await fut

    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self._closed:
            raise RpError("store.closed", "the store is closed")
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[T] = loop.create_future()
        self._reads_waiting += 1
        try:
            if self._reads_waiting > len(self._reader_threads) and len(self._reader_threads) < READER_THREADS:
                reader = threading.Thread(target=self._reader_loop, name=f"rp-sqlite-reader:{self.path.name}", daemon=True)
                reader.start()
                self._reader_threads.append(reader)
            self._reads.put((fn, loop, fut))
            return await fut
        finally:
            self._reads_waiting -= 1

    def _reader_loop(self) -> None:
        conn: sqlite3.Connection | None = None
        try:
            while True:
                item = self._reads.get()
                if item is None:
                    return
                fn, loop, fut = item
                outcome: tuple[bool, Any]
                try:
                    if conn is None:
                        conn = self._open_reader()
                    outcome = (True, self._run_checked(fn, conn))
                except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
                    outcome = (False, exc)
                try:
                    loop.call_soon_threadsafe(_settle, fut, outcome)
                except RuntimeError:
                    pass  # the awaiting loop is gone; nothing to deliver to
                del item, fn, loop, fut, outcome  # a page read is not kept until the next read
        finally:
            if conn is not None:
                conn.close()

    def _open_reader(self) -> sqlite3.Connection:
        try:
            return self._connect()
        except (OSError, sqlite3.Error) as exc:
            self._check_file()
            raise sqlite_fault(exc, self.path) or exc from exc

    # Feature tables (assets, settings) live in the same file and must go through the same single
    # writer, or concurrent writers in one process would contend on the SQLite lock.
    async def execute_write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` on the writer thread; ``fn`` manages its own transaction."""
        return await self._write(fn)

    async def execute_read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` on a reader connection."""
        return await self._read(fn)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._queue.put(None)
        readers, self._reader_threads = self._reader_threads, []
        for _ in readers:
            self._reads.put(None)  # after the reads already queued: those are answered first

        def join() -> None:
            for thread in (self._writer, *readers):
                thread.join()

        await asyncio.to_thread(join)
        # A file deleted after the last write still took this command's events with it.
        self._check_file()

    # -- migrations ------------------------------------------------------------------------------
    async def migrate(self) -> list[int]:
        now = self.now()

        def run(conn: sqlite3.Connection) -> list[int]:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(MIGRATIONS_TABLE_SQLITE)
            done = {r[0] for r in conn.execute("SELECT number FROM _migrations")}
            applied = []
            for m in MIGRATIONS:
                if m.number in done:
                    continue
                for stmt in m.sqlite:
                    conn.execute(stmt)
                conn.execute("INSERT INTO _migrations(number, name, applied_at) VALUES (?,?,?)", (m.number, m.name, now))
                applied.append(m.number)
            conn.execute("COMMIT")
            return applied

        return await self._write(run)

    async def schema_version(self) -> int:
        def run(conn: sqlite3.Connection) -> int:
            exists = conn.execute("SELECT 1 FROM sqlite_master WHERE name='_migrations'").fetchone()
            if not exists:
                return 0
            return conn.execute("SELECT coalesce(max(number), 0) FROM _migrations").fetchone()[0]

        return await self._read(run)

    # -- sessions --------------------------------------------------------------------------------
    async def _insert_session(self, record: SessionRecord, events: list[PreparedEvent], now: str, *, leased: bool = False) -> None:
        # ``leased`` changes nothing here: the run's file lock is local, taken after the insert.
        def run(conn: sqlite3.Connection) -> None:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(_INSERT_SESSION, replace(record, created_at=now, updated_at=now).to_row())
            ids = _insert_events(conn, record.id, 0, events, now, self._part_ids)
            conn.execute("COMMIT")
            self._remember_parts(ids)

        try:
            await self._write(run)
        except sqlite3.IntegrityError as exc:
            raise RpError("session.exists", f"session {record.id!r} already exists") from exc

    async def get_session(self, session_id: str) -> SessionRecord:
        row = await self._read(lambda c: c.execute(f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id=?", (session_id,)).fetchone())
        if row is None:
            raise session_not_found(session_id)
        return SessionRecord.from_row(row)

    async def list_sessions(self, flt: SessionFilter | None = None) -> list[SessionRecord]:
        sql, args = session_listing_sql(flt or SessionFilter(), "?", int)
        rows = await self._read(lambda c: c.execute(sql, args).fetchall())
        return [SessionRecord.from_row(r) for r in rows]

    async def _set_archived(self, session_id: str, archived: bool, now: str) -> None:
        def run(conn: sqlite3.Connection) -> None:
            conn.execute("UPDATE sessions SET archived=?, updated_at=? WHERE id=?", (int(archived), now, session_id))

        await self._write(run)

    async def _fork(self, source: SessionRecord, record: SessionRecord, at_seq: int) -> None:
        def run(conn: sqlite3.Connection) -> None:
            conn.execute("BEGIN IMMEDIATE")
            head = conn.execute("SELECT head_seq FROM sessions WHERE id=?", (source.id,)).fetchone()
            if head is None:
                raise session_not_found(source.id)
            conn.execute(_INSERT_SESSION, replace(record, archived=False, head_seq=at_seq).to_row())
            conn.execute(
                "INSERT INTO events(session_id, seq, type, v, payload, texts, created_at, payload_z) "
                "SELECT ?, seq, type, v, payload, texts, created_at, payload_z FROM events WHERE session_id=? AND seq<=? ORDER BY seq",
                (record.id, source.id, at_seq),
            )
            # A snapshot of the source that covers only the shared prefix is valid for the fork too.
            conn.execute(
                "INSERT INTO snapshots(session_id, name, version, upto_seq, state, texts) "
                "SELECT ?, name, version, upto_seq, state, texts FROM snapshots WHERE session_id=? AND upto_seq<=?",
                (record.id, source.id, at_seq),
            )
            conn.execute("COMMIT")

        await self._write(run)

    # -- events ----------------------------------------------------------------------------------
    async def _append_rows(self, session_id: str, expected_seq: int, events: list[PreparedEvent], now: str) -> None:
        def run(conn: sqlite3.Connection) -> None:
            conn.execute("BEGIN IMMEDIATE")
            row = conn.execute("SELECT head_seq FROM sessions WHERE id=?", (session_id,)).fetchone()
            if row is None:
                raise session_not_found(session_id)
            if row[0] != expected_seq:
                raise conflict(session_id, expected_seq, row[0])
            ids = _insert_events(conn, session_id, expected_seq, events, now, self._part_ids)
            conn.execute(
                "UPDATE sessions SET head_seq=?, updated_at=? WHERE id=? AND head_seq=?",
                (expected_seq + len(events), now, session_id, expected_seq),
            )
            conn.execute("COMMIT")
            self._remember_parts(ids)

        await self._write(run)

    async def _append_rows_at_head(self, session_id: str, events: list[PreparedEvent], now: str) -> int:
        def run(conn: sqlite3.Connection) -> int:
            # BEGIN IMMEDIATE takes the write lock before the head is read: no one moves it under us.
            conn.execute("BEGIN IMMEDIATE")
            row = conn.execute("SELECT head_seq FROM sessions WHERE id=?", (session_id,)).fetchone()
            if row is None:
                raise session_not_found(session_id)
            head = row[0]
            ids = _insert_events(conn, session_id, head, events, now, self._part_ids)
            conn.execute("UPDATE sessions SET head_seq=?, updated_at=? WHERE id=?", (head + len(events), now, session_id))
            conn.execute("COMMIT")
            self._remember_parts(ids)
            return head

        return await self._write(run)

    async def read(self, session_id: str, *, after_seq: int = 0, until_seq: int | None = None, limit: int | None = None) -> list[Event]:
        check_page_args(after_seq, until_seq, limit)

        def run(conn: sqlite3.Connection) -> tuple[bool, list[Event]]:
            sql = "SELECT seq, type, v, payload, created_at, texts, payload_z FROM events WHERE session_id=? AND seq>?"
            args: list[Any] = [session_id, after_seq]
            if until_seq is not None:
                sql += " AND seq<=?"
                args.append(until_seq)
            sql += " ORDER BY seq"
            if limit is not None:
                sql += " LIMIT ?"
                args.append(limit)
            rows = conn.execute(sql, args).fetchall()
            exists = bool(rows) or conn.execute("SELECT 1 FROM sessions WHERE id=?", (session_id,)).fetchone() is not None
            # Decoding (zlib, JSON, the Event objects) is pure, so it runs here on the reader thread
            # rather than on the event loop, where a long page held every other session's step.
            return exists, event_rows(session_id, rows, _load_parts(conn, {i for r in rows for i in part_ids(r[5])}))

        exists, events = await self._read(run)
        if not exists:
            raise session_not_found(session_id)
        return events

    async def dump(self) -> list[tuple[Any, ...]]:
        def run(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
            ev = conn.execute(
                "SELECT 'event', session_id, seq, type, v, payload, texts, created_at, payload_z FROM events ORDER BY global_pos"
            ).fetchall()
            ses = conn.execute(f"SELECT 'session', {SESSION_COLUMNS} FROM sessions ORDER BY id").fetchall()
            parts = conn.execute("SELECT 'text_part', id, sha256, size, data FROM text_parts ORDER BY id").fetchall()
            return ev + ses + parts

        return await self._read(run)

    def _remember_parts(self, ids: dict[str, int]) -> None:
        """After a commit, on the writer thread: the ids of the parts it used, for the next write."""
        if len(self._part_ids) + len(ids) > PART_IDS_KEPT:
            self._part_ids.clear()
        self._part_ids.update(ids)

    # -- snapshots -------------------------------------------------------------------------------
    async def save_snapshot(self, snapshot: Snapshot) -> None:
        stored, external = await prepare_snapshot(snapshot)

        def run(conn: sqlite3.Connection) -> None:
            conn.execute("BEGIN IMMEDIATE")
            texts, ids = None, {}
            if external is not None:
                ids = _store_parts(conn, [external], self._part_ids)
                texts = texts_column(external.texts, ids)
            conn.execute(snapshot_upsert_sql("?"), snapshot_row(snapshot, stored, texts))
            conn.execute("COMMIT")
            self._remember_parts(ids)

        await self._write(run)

    async def load_snapshot(self, session_id: str, name: str, version: int) -> Snapshot | None:
        def run(conn: sqlite3.Connection) -> Snapshot | None:
            row = conn.execute(
                "SELECT upto_seq, state, texts FROM snapshots WHERE session_id=? AND name=? AND version=?",
                (session_id, name, version),
            ).fetchone()
            if row is None:
                return None
            parts = _load_parts(conn, part_ids(row[2]))
            # Decoded here on the reader thread, not on the event loop: a long story's surface is
            # a tenth of a second of decompressing, verifying and parsing (issue 16).
            state = snapshot_state(row[1], row[2], parts, where=f"snapshot {name} of {session_id}")
            return Snapshot(session_id, name, version, row[0], state)

        return await self._read(run)

    async def delete_snapshots(self, session_id: str | None = None) -> int:
        def run(conn: sqlite3.Connection) -> int:
            if session_id is None:
                return conn.execute("DELETE FROM snapshots").rowcount
            return conn.execute("DELETE FROM snapshots WHERE session_id=?", (session_id,)).rowcount

        return await self._write(run)


def _identity(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


def _rollback(conn: sqlite3.Connection) -> None:
    """Roll back what a failed write left open. SQLite may already have rolled back by itself
    (after an I/O error or a full disk); a failing ROLLBACK must not kill the writer thread."""
    if conn.in_transaction:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass


def _enable_wal(path: Path) -> None:
    """WAL is a property of the file, set once. Switching needs an exclusive lock that SQLite
    does not wait for through the busy handler, so several processes opening a new file at the
    same moment retry here instead of failing."""
    for attempt in range(200):
        conn = sqlite3.connect(path, isolation_level=None, timeout=30)
        try:
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() == "wal":
                return
        except sqlite3.OperationalError as exc:
            if not getattr(exc, "sqlite_errorname", "SQLITE_BUSY").startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
                raise  # a read-only or damaged file will not get better by waiting
        finally:
            conn.close()
        time.sleep(0.01 * (1 + attempt % 10))
    raise RpError("store.unavailable", f"cannot switch {path} to WAL mode: the database stays locked")


def _insert_events(
    conn: sqlite3.Connection, session_id: str, start: int, events: list[PreparedEvent], now: str, known: Mapping[str, int]
) -> dict[str, int]:
    """Insert the events (and their new text parts); the ids of the parts they use."""
    ids = _store_parts(conn, [e.external for e in events if e.external is not None], known)
    conn.executemany(
        "INSERT INTO events(session_id, seq, type, v, payload, texts, created_at, payload_z) VALUES (?,?,?,?,?,?,?,?)",
        [
            (
                session_id,
                start + i + 1,
                e.type,
                e.version,
                e.stored_json,
                texts_column(e.external.texts, ids) if e.external else None,
                now,
                e.compressed,
            )
            for i, e in enumerate(events)
        ],
    )
    return ids


_INSERT_SESSION = f"INSERT INTO sessions({SESSION_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)"
_BATCH = 500  # host parameters per IN (…), well under SQLite's limit


def _store_parts(conn: sqlite3.Connection, externals: list[Externalised], known: Mapping[str, int]) -> dict[str, int]:
    """The id of every part referenced, inserting (compressed) only the new ones. Runs inside the
    writer's transaction, so parts and the rows that use them commit together. ``known``: ids
    already stored in this file (``SQLiteStore._part_ids``); only the other parts are looked up."""
    # C calls over the parts, not a Python step for each: a long story's Writer prompt is a
    # thousand parts, nearly all of them known (issue 12).
    texts: dict[str, str] = {}
    for x in externals:
        texts.update(x.parts)
    present = list(filter(known.__contains__, texts))
    ids = dict(zip(present, map(known.__getitem__, present)))
    keys = list(filterfalse(known.__contains__, texts))
    for i in range(0, len(keys), _BATCH):
        batch = [bytes.fromhex(h) for h in keys[i : i + _BATCH]]
        sql = f"SELECT sha256, id FROM text_parts WHERE sha256 IN ({','.join('?' * len(batch))})"
        ids.update((bytes(digest).hex(), pid) for digest, pid in conn.execute(sql, batch))
    for digest in keys:
        if digest not in ids:
            raw = texts[digest]
            cur = conn.execute(
                "INSERT INTO text_parts(sha256, size, data) VALUES (?,?,?)",
                (bytes.fromhex(digest), len(raw.encode("utf-8")), compress(raw)),
            )
            ids[digest] = int(cur.lastrowid or 0)
    return ids


def _load_parts(conn: sqlite3.Connection, wanted: set[int]) -> dict[int, bytes]:
    parts: dict[int, bytes] = {}
    keys = sorted(wanted)
    for i in range(0, len(keys), _BATCH):
        batch = keys[i : i + _BATCH]
        sql = f"SELECT id, data FROM text_parts WHERE id IN ({','.join('?' * len(batch))})"
        parts.update((pid, bytes(data)) for pid, data in conn.execute(sql, batch))
    return parts


def _settle(fut: asyncio.Future[Any], outcome: tuple[bool, Any]) -> None:
    if fut.cancelled():
        return
    ok, value = outcome
    if ok:
        fut.set_result(value)
    else:
        fut.set_exception(value)
