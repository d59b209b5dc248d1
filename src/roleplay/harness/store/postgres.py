"""PostgreSQL event store (psycopg 3, async pool), for many stateless app processes.

The append is the same compare-and-swap as on SQLite: a conditional ``UPDATE sessions … WHERE
head_seq = expected`` takes the session row lock, so concurrent writers in any number of
processes serialise per session and the loser sees a conflict instead of a gap.

Live notifications cross processes through ``NOTIFY`` sent inside the append transaction (so it
is delivered exactly when the rows become visible). The payload names the session and seq range,
never the event itself (NOTIFY payloads are capped at 8000 bytes); listeners read the rows. Each
store tags its notifications with a random origin so it ignores its own echo, having already
published locally. Transient chunk deltas cross only to sessions another process may be
streaming (``pg_watchers.py``).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
import json
import re
import secrets
from collections.abc import Mapping
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

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
from .faults import postgres_fault
from .pg_leases import LeaseConnection
from .pg_parts import encoded_parts as _encoded_parts, store_parts as _store_parts
from .pg_pool import KeptConnections
from .pg_watchers import WATCH_DELAY
from .pg_statements import (
    APPEND_PARTS,
    AT_HEAD,
    CAS_HEAD,
    INSERT_HEAD,
    INSERT_SESSION,
    LOCK_NEW,
    NOT_APPENDED_MARK,
    append_params,
    append_sql,
)
from .migrations import MIGRATIONS, MIGRATIONS_TABLE_POSTGRES
from .texts import PART_IDS_KEPT, Externalised, compress, event_rows, part_ids, texts_column, texts_column_pieces

try:  # the driver is the optional ``postgres`` extra
    import psycopg
    from psycopg_pool import AsyncConnectionPool
except ImportError:  # pragma: no cover - exercised only without the extra
    psycopg = None  # type: ignore[assignment]
    AsyncConnectionPool = None  # type: ignore[assignment,misc]

_MIGRATION_LOCK = 0x52505F4D4947  # any constant: serialises concurrent `migrate` calls
NOTIFY_LIMIT = 7000
PART_BYTES_KEPT = 32 << 20
# Where a notification's origin ends at the latest: ``{"o": "`` or json_build_object's ``{"o" : "``
# and 16 hex digits.
_ORIGIN_WITHIN = 32
_DECODE_ON_LOOP = 16  # events a page may hold and still be decoded on the loop (a thread hop costs more)


class _NotAppended(Exception):
    """The head did not move: the transaction that inserted new parts is rolled back."""

    def __init__(self, row: tuple[Any, ...]) -> None:
        super().__init__("not appended")
        self.row = row


@asynccontextmanager
async def _no_transaction() -> AsyncIterator[None]:
    yield


class PostgresStore(EventStore):
    dialect = "postgresql"

    def __init__(
        self,
        url: str,
        *,
        clock: Clock = system_clock,
        ids: IdGenerator = ulid_ids,
        min_size: int = 1,
        max_size: int = 8,
    ) -> None:
        if psycopg is None:
            raise RpError(
                "store.driver_missing",
                "PostgreSQL support needs the 'postgres' extra: pip install 'roleplay[postgres]'",
            )
        super().__init__(clock=clock, ids=ids)
        self.url = url
        # Autocommit: a read is one round trip, not BEGIN, the query and COMMIT; what must be atomic
        # is one statement or runs in an explicit ``conn.transaction()`` (issue 12: PostgreSQL
        # made about 150 round trips per turn).
        self._pool = AsyncConnectionPool(url, min_size=min_size, max_size=max_size, open=False, kwargs={"autocommit": True})
        # Write-lock waiters park on these, never on the main pool, so a holder always gets a
        # connection for its own reads and append however many writers queue behind it.
        self._lock_pool = AsyncConnectionPool(url, min_size=0, max_size=max(2, max_size // 2), open=False, kwargs={"autocommit": True})
        self._kept = KeptConnections(self._pool)  # the main pool's idle connections, at hand (pg_pool.py)
        # Run leases (session-level advisory locks) all live on one kept connection of their own,
        # however many turns run at once (pg_leases.py).
        self.leases = LeaseConnection(url)
        self.broker.on_watch_change = self._watch_changed
        # Text parts are immutable and never deleted: their ids, and the bytes of the recent ones,
        # are kept so that an append whose parts are known is one statement and a read of a
        # recent prompt needs no second query.
        self._part_ids: dict[str, int] = {}
        self._part_data: dict[int, bytes] = {}
        self._part_data_bytes = 0
        self._opened = False
        self._open_lock: asyncio.Lock | None = None
        self._origin = secrets.token_hex(8)  # not replayed: identifies this process's notifications
        self._channel: str | None = None
        self._listener: asyncio.Task[None] | None = None
        self._listening: asyncio.Event | None = None
        self._watch_later: asyncio.TimerHandle | None = None
        # Chunk notifications waiting to be sent, and the task sending them (publish_chunk).
        self._chunks: list[str] = []
        self._chunk_sender: asyncio.Task[None] | None = None
        self._chunk_error: BaseException | None = None
        self._chunk_count = 0

    async def _ensure_open(self) -> None:
        if self._opened:
            return
        if self._open_lock is None:
            self._open_lock = asyncio.Lock()
        async with self._open_lock:
            if not self._opened:
                try:
                    await self._pool.open(wait=True, timeout=15)
                except Exception as exc:  # noqa: BLE001 - any connection failure gets one clear code
                    raise RpError("store.unavailable", f"cannot connect to PostgreSQL: {exc}") from exc
                async with self._pool.connection() as conn:
                    cur = await conn.execute("SELECT current_schema()")
                    found = await cur.fetchone()
                    schema = (found[0] if found else None) or "public"
                self._channel = "rp_events_" + re.sub(r"[^a-z0-9_]", "_", schema.lower())[:40]
                await self._lock_pool.open(wait=False)
                self._opened = True

    @asynccontextmanager
    async def _connection(self, pool: Any = None) -> AsyncIterator[Any]:
        """A pooled connection whose disk, read-only and connection faults surface as ``store.*``
        errors, so callers that handle RpError handle them too."""
        await self._ensure_open()
        try:
            if pool is None:
                conn = await self._kept.get()
                try:
                    yield conn
                finally:
                    await self._kept.put(conn)
            else:
                async with pool.connection() as conn:
                    yield conn
        except RpError:
            raise
        except Exception as exc:  # noqa: BLE001 - only faults are translated; the rest re-raised
            fault = postgres_fault(exc)
            if fault is None:
                raise
            raise fault from exc

    @asynccontextmanager
    async def _on(self, conn: Any) -> AsyncIterator[Any]:
        """``conn`` when the caller holds one, else a pooled connection."""
        if conn is not None:
            yield conn
            return
        async with self._connection() as pooled:
            yield pooled

    def connection(self) -> Any:
        """``async with store.connection() as conn`` — a pooled connection for feature tables
        (assets, settings) that live in the same database."""
        return _PooledConnection(self)

    async def close(self) -> None:
        await self._chunks_sent()
        if self._watch_later is not None:
            self._watch_later.cancel()
            self._watch_later = None
        if self._listener is not None:
            self._listener.cancel()
            try:
                await self._listener
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - shutting down
                pass
            self._listener = None
        if self._opened:
            await self.leases.close()
            await self._lock_pool.close()
            await self._kept.close()
            await self._pool.close()
            self._opened = False

    async def _fetchone(self, sql: str, args: tuple[Any, ...] = ()) -> tuple[Any, ...] | None:
        async with self._connection() as conn:
            cur = await conn.execute(sql, args)
            return await cur.fetchone()

    async def _fetchall(self, sql: str, args: tuple[Any, ...] | list[Any] = ()) -> list[tuple[Any, ...]]:
        async with self._connection() as conn:
            cur = await conn.execute(sql, args)
            return await cur.fetchall()

    # -- migrations ------------------------------------------------------------------------------
    async def migrate(self) -> list[int]:
        now = self.now()
        applied: list[int] = []
        async with self._connection() as conn:
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
                await conn.execute(MIGRATIONS_TABLE_POSTGRES)
                cur = await conn.execute("SELECT number FROM _migrations")
                done = {r[0] for r in await cur.fetchall()}
                for m in MIGRATIONS:
                    if m.number in done:
                        continue
                    for stmt in m.postgres:
                        await conn.execute(stmt)
                    await conn.execute("INSERT INTO _migrations(number, name, applied_at) VALUES (%s,%s,%s)", (m.number, m.name, now))
                    applied.append(m.number)
        return applied

    async def schema_version(self) -> int:
        row = await self._fetchone("SELECT to_regclass('_migrations') IS NOT NULL")
        if not row or not row[0]:
            return 0
        row = await self._fetchone("SELECT coalesce(max(number), 0) FROM _migrations")
        return int(row[0]) if row else 0

    # -- sessions --------------------------------------------------------------------------------
    insert_checks_parent = True  # the parent_id foreign key: one round trip less per child session

    async def _insert_session(self, record: SessionRecord, events: list[PreparedEvent], now: str, *, leased: bool = False) -> None:
        sql = INSERT_SESSION
        row = replace(record, created_at=now, updated_at=now).to_row()
        try:
            if leased:
                # On the lease connection, locked in the same statement (pg_leases.py); with its
                # first events, as an append whose head is the insert.
                await self._ensure_open()
                if not events:
                    await self.leases.create_locked(record.id, sql, row)
                    return
                lock = (record.id, record.parent_id, record.parent_id)
                note = self._note(record.id, 1, len(events))

                async def statement(conn: Any) -> bool:
                    got = await self._append_statement(INSERT_HEAD, row, record.id, None, events, now, note, conn=conn, lock=lock)
                    return bool(got[4])

                await self.leases.create_with(record.id, statement, head=len(events))
                return
            async with self._connection() as conn:
                async with conn.transaction() if events else _no_transaction():
                    await conn.execute(sql, row)
                    ids = await self._insert_events(conn, record.id, 0, events, now, self._part_ids) if events else {}
                    if events:
                        await self._notify(conn, record.id, 1, len(events))
                self._remember_parts(events, ids)
        except psycopg.errors.UniqueViolation as exc:
            raise RpError("session.exists", f"session {record.id!r} already exists") from exc
        except psycopg.errors.ForeignKeyViolation as exc:
            if record.parent_id is not None and exc.diag.constraint_name == "sessions_parent_id_fkey":
                raise session_not_found(record.parent_id) from None
            raise

    async def get_session(self, session_id: str) -> SessionRecord:
        row = await self._fetchone(f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id=%s", (session_id,))
        if row is None:
            raise session_not_found(session_id)
        return SessionRecord.from_row(row)

    async def head(self, session_id: str) -> int:
        known = self.leases.heads.get(session_id)
        return known if known is not None else await super().head(session_id)  # leased here: known (pg_leases.py)

    async def list_sessions(self, flt: SessionFilter | None = None) -> list[SessionRecord]:
        sql, args = session_listing_sql(flt or SessionFilter(), "%s")
        return [SessionRecord.from_row(r) for r in await self._fetchall(sql, args)]

    async def _set_archived(self, session_id: str, archived: bool, now: str) -> None:
        async with self._connection() as conn:
            await conn.execute("UPDATE sessions SET archived=%s, updated_at=%s WHERE id=%s", (archived, now, session_id))

    async def _fork(self, source: SessionRecord, record: SessionRecord, at_seq: int) -> None:
        async with self._connection() as conn:
            async with conn.transaction():
                await conn.execute(INSERT_SESSION, replace(record, archived=False, head_seq=at_seq).to_row())
                await conn.execute(
                    "INSERT INTO events(session_id, seq, type, v, payload, texts, created_at, payload_z) "
                    "SELECT %s, seq, type, v, payload, texts, created_at, payload_z FROM events WHERE session_id=%s AND seq<=%s ORDER BY seq",
                    (record.id, source.id, at_seq),
                )
                await conn.execute(
                    "INSERT INTO snapshots(session_id, name, version, upto_seq, state, texts) "
                    "SELECT %s, name, version, upto_seq, state, texts FROM snapshots WHERE session_id=%s AND upto_seq<=%s",
                    (record.id, source.id, at_seq),
                )

    # -- events ----------------------------------------------------------------------------------
    async def _append_rows(self, session_id: str, expected_seq: int, events: list[PreparedEvent], now: str) -> None:
        first, last = expected_seq + 1, expected_seq + len(events)
        args = (len(events), now, session_id, expected_seq)
        row = await self._append_statement(CAS_HEAD, args, session_id, expected_seq, events, now, self._note(session_id, first, last))
        if row[0] is not None:
            self.leases.moved(session_id, int(row[0]))
        else:
            self.leases.forget(session_id)
            if row[1] is None:
                raise session_not_found(session_id)
            # The row's head as this statement's snapshot saw it may be the expected one that a
            # concurrent writer has just moved: read it again for the message.
            head = (
                row[1]
                if row[1] != expected_seq
                else (await self._fetchone("SELECT head_seq FROM sessions WHERE id=%s", (session_id,)) or (row[1],))[0]
            )
            raise conflict(session_id, expected_seq, head)

    async def _append_rows_at_head(self, session_id: str, events: list[PreparedEvent], now: str) -> int:
        # The UPDATE takes the session row lock and, under READ COMMITTED, re-reads a head that
        # moved while it waited, so concurrent writers queue on the row instead of failing a
        # compare-and-swap. The seqs and the notification follow from the head it returns.
        args = (len(events), now, session_id)
        row = await self._append_statement(AT_HEAD, args, session_id, None, events, now, None)
        if row[0] is None:
            raise session_not_found(session_id)
        self.leases.moved(session_id, int(row[0]))
        return int(row[0]) - len(events)

    async def _append_statement(
        self,
        head_sql: str,
        head_args: tuple[Any, ...],
        session_id: str,
        expected_seq: int | None,
        events: list[PreparedEvent],
        now: str,
        note: str | None,
        *,
        conn: Any = None,
        lock: tuple[Any, ...] = (),
    ) -> tuple[Any, ...]:
        """One statement moves the head, inserts the rows and notifies (one round trip). Text
        parts this store has not seen yet are inserted first, in the same transaction. ``conn``:
        run there instead of on a pooled connection; ``lock``: the arguments of ``LOCK_NEW``,
        whose answer is the row's fifth column (else NULL)."""
        await self._chunks_sent()  # a turn's chunks reach other processes before its events
        externals = [e.external for e in events if e.external is not None]
        known = self._known_parts(externals)
        n = len(events)
        # Seqs relative to the new head: ``expected_seq`` may be unknown (append at head).
        offsets = [i - n + 1 for i in range(n)]
        if known is None:
            row = await self._append_with_parts(head_sql, head_args, session_id, events, offsets, now, note, conn, lock)
            if row is not None:
                return row
        async with self._on(conn) as conn:
            try:
                async with conn.transaction() if known is None else _no_transaction():
                    ids = known if known is not None else await _store_parts(conn, externals, self._part_ids)
                    rows = [
                        (o, e.type, e.version, e.stored_json, texts_column(e.external.texts, ids) if e.external else None, e.compressed)
                        for o, e in zip(offsets, events, strict=True)
                    ]
                    cur = await conn.execute(
                        append_sql(head_sql, n, LOCK_NEW if lock else "NULL"),
                        (
                            *head_args,
                            session_id,
                            now,
                            *append_params(rows),
                            self._channel,
                            note,
                            self._origin,
                            session_id,
                            n,
                            session_id,
                            *lock,
                        ),
                    )
                    row = await cur.fetchone()
                    if row[0] is None and known is None:
                        # Nothing appended: roll the new parts back with it (a failed append stores
                        # nothing), then report.
                        raise _NotAppended(row)
            except _NotAppended as exc:
                return exc.row
        if known is None:
            self._remember_parts(events, ids)
        return row

    async def _append_with_parts(
        self,
        head_sql: str,
        head_args: tuple[Any, ...],
        session_id: str,
        events: list[PreparedEvent],
        offsets: list[int],
        now: str,
        note: str | None,
        conn: Any = None,
        lock: tuple[Any, ...] = (),
    ) -> tuple[Any, ...] | None:
        """An append that brings new text parts in one statement; None when it appended nothing
        (a conflict, no session, a part another writer was inserting): the caller then runs the
        transaction that tells which, and stores nothing either way."""
        found: dict[str, int] = {}
        new: dict[str, str] = {}
        for ext in (e.external for e in events if e.external is not None):
            for digest, text in ext.parts.items():
                pid = self._part_ids.get(digest)
                if pid is not None:
                    found[digest] = pid
                else:
                    new[digest] = text
        order = sorted(new)
        keys = [bytes.fromhex(h) for h in order]
        columns: list[str | None] = []
        piece_ev: list[int] = []
        piece_lit: list[str | None] = []
        piece_ref: list[bytes | None] = []
        for offset, e in zip(offsets, events, strict=True):
            if e.external is None:
                columns.append(None)
            elif all(h in found for t in e.external.texts for h in t.parts):
                columns.append(texts_column(e.external.texts, found))
            else:
                columns.append(None)
                for lit, ref in texts_column_pieces(e.external.texts, found):
                    piece_ev.append(offset)
                    piece_lit.append(lit)
                    piece_ref.append(None if ref is None else bytes.fromhex(ref))
        n = len(events)
        sizes, data = await _encoded_parts(new, order)
        await self._ensure_open()  # the channel name is learnt on opening
        args = (
            keys,
            sizes,
            data,
            keys,
            *head_args,
            len(order),
            piece_ev,
            piece_lit,
            piece_ref,
            session_id,
            now,
            offsets,
            [e.type for e in events],
            [e.version for e in events],
            [e.stored_json for e in events],
            columns,
            [e.compressed for e in events],
            self._channel,
            note,
            self._origin,
            session_id,
            n,
            NOT_APPENDED_MARK,
            *lock,
        )
        sql = APPEND_PARTS.format(head=head_sql.removesuffix(" RETURNING head_seq"), lock=LOCK_NEW if lock else "NULL")
        async with self._on(conn) as conn:
            try:
                cur = await conn.execute(sql, args)
            except psycopg.errors.InvalidTextRepresentation as exc:
                if NOT_APPENDED_MARK in str(exc):
                    return None
                raise
            row = await cur.fetchone()
        ids = {**found, **{bytes(h).hex(): pid for h, pid in zip(row[3], row[4], strict=True)}}
        self._remember_parts(events, ids, dict(zip(order, data, strict=True)))
        # The shape ``APPEND`` returns: the head, then (unused once appended) the row's head.
        return (row[0], row[0], row[1], row[2], row[6])

    @asynccontextmanager
    async def _cross_process_write_lock(self, session_id: str) -> AsyncIterator[None]:
        # A transaction-level advisory lock, so a crashed holder's lock goes with its connection.
        # Keyed like the run leases (schema-qualified), with its own prefix.
        async with self._connection(self._lock_pool) as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(current_schema() || ':append:' || %s, 0))", (session_id,))
            yield

    @staticmethod
    async def _insert_events(
        conn: Any, session_id: str, start: int, events: list[PreparedEvent], now: str, known: Mapping[str, int]
    ) -> dict[str, int]:
        ids = await _store_parts(conn, [e.external for e in events if e.external is not None], known)
        # One INSERT … unnest instead of executemany: pipeline mode turns a constraint violation
        # into noisy "pipeline aborted" warnings (stack.md §3.2).
        await conn.execute(
            "INSERT INTO events(session_id, seq, type, v, payload, texts, created_at, payload_z) "
            "SELECT %s, s, t, v, p::json, x, %s, z FROM unnest(%b::bigint[], %b::text[], %b::int[], %b::text[], %b::text[], %b::bytea[]) "
            "AS u(s, t, v, p, x, z)",
            (
                session_id,
                now,
                [start + i + 1 for i in range(len(events))],
                [e.type for e in events],
                [e.version for e in events],
                [e.stored_json for e in events],
                [texts_column(e.external.texts, ids) if e.external else None for e in events],
                [e.compressed for e in events],
            ),
        )
        return ids

    async def read(self, session_id: str, *, after_seq: int = 0, until_seq: int | None = None, limit: int | None = None) -> list[Event]:
        check_page_args(after_seq, until_seq, limit)
        head = self.leases.heads.get(session_id)
        if head is not None and after_seq >= head:
            return []  # leased here: nothing was appended past the head it knows (pg_leases.py)
        # One round trip: no row at all means no session; a row of NULLs, no events in range.
        inner = "SELECT seq, type, v, payload, created_at, texts, payload_z FROM events WHERE session_id = s.id AND seq > %s"
        args: list[Any] = [after_seq]
        if until_seq is not None:
            inner += " AND seq <= %s"
            args.append(until_seq)
        inner += " ORDER BY seq"
        if limit is not None:
            inner += " LIMIT %s"
            args.append(limit)
        sql = (
            "SELECT e.seq, e.type, e.v, e.payload::text, e.created_at, e.texts, e.payload_z FROM sessions s "
            f"LEFT JOIN LATERAL ({inner}) e ON true WHERE s.id = %s ORDER BY e.seq"
        )
        rows = await self._fetchall(sql, [*args, session_id])
        if not rows:
            raise session_not_found(session_id)
        rows = [r for r in rows if r[0] is not None]
        parts = await self._parts({i for r in rows for i in part_ids(r[5])})
        if len(rows) > _DECODE_ON_LOOP:  # decoding is pure; a long page would hold the event loop
            return await asyncio.to_thread(event_rows, session_id, rows, parts)
        return event_rows(session_id, rows, parts)

    async def _parts(self, wanted: set[int]) -> dict[int, bytes]:
        """The compressed bytes of these parts: the recent ones from memory, the rest read."""
        parts = {i: self._part_data[i] for i in wanted if i in self._part_data}
        missing = sorted(wanted - parts.keys())
        if missing:
            for pid, data in await self._fetchall("SELECT id, data FROM text_parts WHERE id = ANY(%b)", (missing,)):
                parts[pid] = bytes(data)
                self._keep_part(pid, bytes(data))
        return parts

    def _known_parts(self, externals: list[Externalised]) -> dict[str, int] | None:
        """The ids of every part these texts use, when all are known; else None."""
        ids: dict[str, int] = {}
        for ext in externals:
            for digest in ext.parts:
                pid = self._part_ids.get(digest)
                if pid is None:
                    return None
                ids[digest] = pid
        return ids

    def _remember_parts(
        self, events: list[PreparedEvent], ids: dict[str, int] | None = None, compressed: Mapping[str, bytes] | None = None
    ) -> None:
        """After a commit: the parts' ids (and the new parts' bytes) for the next append or read.
        ``compressed``: the bytes of the parts the append sent, not compressed a second time."""
        if ids is None:
            return
        if len(self._part_ids) + len(ids) > PART_IDS_KEPT:
            self._part_ids.clear()
        self._part_ids.update(ids)
        for e in events:
            if e.external is not None:
                for digest, text in e.external.parts.items():
                    pid = ids.get(digest)
                    if pid is not None and pid not in self._part_data:
                        known = compressed.get(digest) if compressed is not None else None
                        self._keep_part(pid, known if known is not None else compress(text))

    def _keep_part(self, pid: int, data: bytes) -> None:
        if self._part_data_bytes + len(data) > PART_BYTES_KEPT:
            self._part_data.clear()
            self._part_data_bytes = 0
        self._part_data[pid] = data
        self._part_data_bytes += len(data)

    async def dump(self) -> list[tuple[Any, ...]]:
        ev = await self._fetchall(
            "SELECT 'event', session_id, seq, type, v, payload::text, texts, created_at, payload_z FROM events ORDER BY global_pos"
        )
        ses = await self._fetchall(f"SELECT 'session', {SESSION_COLUMNS} FROM sessions ORDER BY id")
        parts = await self._fetchall("SELECT 'text_part', id, sha256, size, data FROM text_parts ORDER BY id")
        return ev + ses + [(r[0], r[1], bytes(r[2]), r[3], bytes(r[4])) for r in parts]

    # -- snapshots -------------------------------------------------------------------------------
    async def save_snapshot(self, snapshot: Snapshot) -> None:
        stored, external = await prepare_snapshot(snapshot)
        ids: dict[str, int] = {}
        async with self._connection() as conn, conn.transaction():
            texts = None
            if external is not None:
                ids = await _store_parts(conn, [external], self._part_ids)
                texts = texts_column(external.texts, ids)
            await conn.execute(snapshot_upsert_sql("%s"), snapshot_row(snapshot, stored, texts))
        self._remember_parts([], ids)

    async def load_snapshot(self, session_id: str, name: str, version: int) -> Snapshot | None:
        row = await self._fetchone(
            "SELECT upto_seq, state, texts FROM snapshots WHERE session_id=%s AND name=%s AND version=%s",
            (session_id, name, version),
        )
        if row is None:
            return None
        parts: dict[int, bytes] = {}
        if row[2]:
            wanted = sorted(part_ids(row[2]))
            parts = {
                pid: bytes(data) for pid, data in await self._fetchall("SELECT id, data FROM text_parts WHERE id = ANY(%b)", (wanted,))
            }
        where = f"snapshot {name} of {session_id}"
        # A large one is decoded on a thread: a long story's surface is a tenth of a second of
        # decompressing, verifying and parsing (issue 16).
        state = (
            await asyncio.to_thread(snapshot_state, row[1], row[2], parts, where=where)
            if row[2]
            else snapshot_state(row[1], row[2], parts, where=where)
        )
        return Snapshot(session_id, name, version, row[0], state)

    async def delete_snapshots(self, session_id: str | None = None) -> int:
        async with self._connection() as conn:
            if session_id is None:
                cur = await conn.execute("DELETE FROM snapshots")
            else:
                cur = await conn.execute("DELETE FROM snapshots WHERE session_id=%s", (session_id,))
            return cur.rowcount

    # -- live notifications across processes -----------------------------------------------------
    def _note(self, session_id: str, first: int, last: int) -> str:
        return json.dumps({"o": self._origin, "k": "e", "s": session_id, "f": first, "l": last})

    async def _notify(self, conn: Any, session_id: str, first: int, last: int) -> None:
        await conn.execute("SELECT pg_notify(%s, %s)", (self._channel, self._note(session_id, first, last)))

    async def publish_chunk(self, session_id: str, data: dict[str, Any]) -> None:
        """Publish in this process now; unless no other process streams the session (pg_watchers.py),
        queue the NOTIFY for a sender task, which sends all the
        chunks queued meanwhile in one statement, in order. A model streaming without pause (the
        demo, a burst of deltas) then costs one round trip, not one per delta, and the stream is
        never held up waiting for PostgreSQL. Every append (and ``close``) first waits for the
        queued chunks, so other processes still see chunks and events in the order they were made.
        A failed send is raised by the next ``publish_chunk``."""
        self.broker.publish_chunk(session_id, data)
        await self._ensure_open()
        if self._chunk_error is not None:
            error, self._chunk_error = self._chunk_error, None
            raise error
        if not self.leases.watchers.watched(session_id):
            return
        for part in _split_chunk(data):
            # "n" numbers the chunks: PostgreSQL delivers one of several identical payloads sent
            # in one transaction (the equal parts of a split chunk, two "." deltas).
            self._chunk_count += 1
            self._chunks.append(
                json.dumps({"o": self._origin, "k": "c", "s": session_id, "n": self._chunk_count, "d": part}, ensure_ascii=False)
            )
        if self._chunk_sender is None or self._chunk_sender.done():
            self._chunk_sender = asyncio.create_task(self._send_chunks(), name="rp-pg-chunks")

    async def _send_chunks(self) -> None:
        while self._chunks:
            batch, self._chunks = self._chunks, []
            try:
                async with self._connection() as conn:
                    # A function scan yields the array in order, and NOTIFYs of one transaction
                    # are delivered in the order they were sent.
                    await conn.execute("SELECT pg_notify(%s, p) FROM unnest(%b::text[]) WITH ORDINALITY AS u(p, n)", (self._channel, batch))
            except Exception as exc:  # noqa: BLE001 - kept for the next publish_chunk to raise
                self._chunk_error = exc

    async def _chunks_sent(self) -> None:
        sender = self._chunk_sender
        if sender is not None and not sender.done():
            # Shielded: a caller cancelled while it waits does not cancel chunks already queued.
            await asyncio.shield(sender)

    async def _remote_listen(self) -> None:
        """Start (once) the LISTEN task and wait until it is listening, so a subscriber that reads
        the head right after this returns cannot miss a notification in between."""
        await self._ensure_open()
        if self._listener is None:
            self._listening = asyncio.Event()
            self._listener = asyncio.create_task(self._listen_loop(), name="rp-pg-listener")
        assert self._listening is not None
        done, _ = await asyncio.wait({asyncio.ensure_future(self._listening.wait()), self._listener}, return_when=asyncio.FIRST_COMPLETED)
        if self._listener.done() and self._listener.exception() is not None:
            raise RpError("store.listen_failed", f"cannot LISTEN on PostgreSQL: {self._listener.exception()}")

    def _watch_changed(self) -> None:
        """The broker's sessions with subscribers changed: the watch locks follow (pg_watchers.py),
        a moment later, all the changes made meanwhile in one statement. A subscriber that comes
        and goes within it costs nothing: the one a run's start takes to learn its turn id
        (web/runs.py) would otherwise cost two statements a turn."""
        if self._watch_later is None and self._opened:
            self._watch_later = asyncio.get_running_loop().call_later(WATCH_DELAY, self._watch_now)

    def _watch_now(self) -> None:
        self._watch_later = None
        if self._opened and self._channel is not None:
            self.leases.watch(self.broker.sessions, self._channel, self._watch_note)

    def _watch_note(self, session_id: str) -> str:
        return json.dumps({"o": self._origin, "k": "w", "s": session_id})

    async def _listen_loop(self) -> None:
        assert self._listening is not None
        watchers = self.leases.watchers
        conn = await psycopg.AsyncConnection.connect(self.url, autocommit=True)
        try:
            await conn.execute(f'LISTEN "{self._channel}"')
            watchers.started()
            self._listening.set()
            origin = self._origin
            async for note in conn.notifies():
                payload = note.payload
                # This process's own notifications (its appends' events) come back too: every
                # payload starts with its origin, so they are known before any decoding.
                if origin in payload[:_ORIGIN_WITHIN]:
                    continue
                try:
                    msg = json.loads(payload)
                except ValueError:
                    continue
                session_id = msg.get("s")
                if not isinstance(session_id, str):
                    continue
                kind = msg.get("k")
                if kind == "e":  # another process appended: a lease here no longer knows the head
                    self.leases.forget(session_id)
                if kind == "w":
                    watchers.heard(session_id)
                elif not self.broker.has_subscribers(session_id):
                    continue
                elif kind == "c":
                    self.broker.publish_chunk(session_id, msg.get("d") or {})
                elif kind == "e":
                    events = await self.read(session_id, after_seq=int(msg["f"]) - 1, until_seq=int(msg["l"]))
                    self.broker.publish_events(session_id, events)
        finally:
            watchers.stopped()
            await conn.close()


class _PooledConnection:
    def __init__(self, store: PostgresStore) -> None:
        self._store = store
        self._conn: Any = None

    async def __aenter__(self) -> Any:
        await self._store._ensure_open()
        self._conn = await self._store._kept.get()
        return self._conn

    async def __aexit__(self, *exc: Any) -> None:
        conn, self._conn = self._conn, None
        await self._store._kept.put(conn)


def _split_chunk(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Keep each NOTIFY under PostgreSQL's 8000-byte payload cap by splitting a long ``text``."""
    encoded = json.dumps(data, ensure_ascii=False)
    if len(encoded.encode("utf-8")) <= NOTIFY_LIMIT:
        return [data]
    text = data.get("text")
    if not isinstance(text, str):
        raise RpError("event.chunk_too_large", "a chunk without a splittable 'text' field exceeds the notify limit")
    overhead = len(json.dumps({**data, "text": ""}, ensure_ascii=False).encode("utf-8"))
    step = max(1, (NOTIFY_LIMIT - overhead) // 6)  # worst case: a control char escapes to 6 bytes
    return [{**data, "text": text[i : i + step]} for i in range(0, len(text), step)]
