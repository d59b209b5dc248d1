"""The shared asset store: cards, lorebooks, personas, presets and writing styles, in the same
database as the event log, in tables of its own (``assets/migrations.py``).

One commit path. Every write (create, CAS update, delete, blob put, default change, seeding,
imports) is one transaction run through :meth:`AssetStore.write`:

* SQLite: on the event store's single writer thread (``execute_write``) inside ``BEGIN
  IMMEDIATE``, so writers in one process queue and writers in other processes wait on the file
  lock (``busy_timeout``). Transactions are therefore fully serialised.
* PostgreSQL: one pooled connection, one transaction. A CAS update is a conditional ``UPDATE …
  WHERE revision = expected`` that takes the row lock, so a racing writer re-checks against the
  committed revision and loses cleanly; duplicate imports and seeds are stopped by unique indexes
  (the losing transaction rolls back and the body is retried, now seeing the winner's rows).

Transaction bodies are written once, as ``async def body(tx: AssetTx)``, for both dialects. On
SQLite the connection calls are synchronous, so the coroutine never suspends and is driven to
completion on the writer thread with a single ``send`` (see ``_drive``); on PostgreSQL it is
awaited normally. This keeps the two backends from drifting apart.

Revisions start at 1 and grow by one with every change to an asset (data, blobs, trust flag).
``update`` and ``delete`` take ``expected_revision``; a stale one raises
``asset.revision_conflict`` and writes nothing. Deletes are hard deletes (see ``assets/migrations.py``).
"""

from __future__ import annotations

import builtins
import hashlib
import json
import re
import sqlite3
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from roleplay.errors import ConflictError, NotFoundError, RpError, ValidationError
from roleplay.harness.store import EventStore

from .kinds import DEFAULT_KINDS, check_kind, validate_asset_data
from .migrations import ASSET_MIGRATIONS, OWNER
from .schema import apply_pending, check_sequence, is_ready, mark_ready
from .seeding import SeedMarker, content_hash

T = TypeVar("T")

MAX_DATA_BYTES = 32 * 1024 * 1024
MAX_BLOB_BYTES = 32 * 1024 * 1024
MAX_PAGE = 500
ID_PREFIX = "ast_"
_IN_BATCH = 500  # ids per `IN (…)` list: under SQLite's bound-parameter limit
# Blob roles the store's own services write; the public ``put_blob`` refuses them so that, e.g.,
# the isolated-prompt trust flag can only change through the user-side trust API.
RESERVED_ROLES = frozenset({"isolated-prompts", "source", "migration-report"})
_ROLE_RE = re.compile(r"^[a-z][a-z0-9-]{0,39}$")
_MEDIA_RE = re.compile(r"^[a-z]+/[A-Za-z0-9.+-]{1,100}$")
_COLS = "id, kind, revision, name, data, content_hash, import_hash, source_character_id, seed_key, created_at, updated_at"
_SEED_LOCK = 0x52505F5345454453  # PostgreSQL advisory lock serialising seeding across processes


@dataclass(frozen=True)
class AssetRecord:
    id: str
    kind: str
    revision: int
    name: str
    data: dict[str, Any]
    content_hash: str
    import_hash: str | None = None
    source_character_id: str | None = None
    seed_key: str | None = None
    created_at: str = ""
    updated_at: str = ""

    def to_dict(self, *, with_data: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "kind": self.kind,
            "revision": self.revision,
            "name": self.name,
            "contentHash": self.content_hash,
            "sourceCharacterId": self.source_character_id,
            "seedKey": self.seed_key,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
        }
        if with_data:
            out["data"] = self.data
        return out


@dataclass(frozen=True)
class AssetPage:
    items: list[AssetRecord]
    total: int
    limit: int
    offset: int


@dataclass(frozen=True)
class Blob:
    asset_id: str
    role: str
    media_type: str
    data: bytes
    sha256: str

    @property
    def size(self) -> int:
        return len(self.data)


@dataclass(frozen=True)
class BlobInfo:
    role: str
    media_type: str
    size: int
    sha256: str


class UniqueViolation(Exception):
    """A unique index refused a row: another transaction got there first."""


def not_found(asset_id: str) -> NotFoundError:
    return NotFoundError("asset.not_found", f"no asset {asset_id!r}", details={"assetId": asset_id})


def wrong_kind(record: "AssetRecord", expected: str) -> NotFoundError:
    """The id exists but names another kind: same code as a missing asset (there is no such
    ``expected``), but the message and details say what the id really is."""
    return NotFoundError(
        "asset.not_found",
        f"asset {record.id!r} is a {record.kind} ({record.name!r}), not a {expected}",
        details={"assetId": record.id, "kind": record.kind, "expected": expected},
    )


def revision_conflict(asset_id: str, expected: int, current: int) -> ConflictError:
    return ConflictError(
        "asset.revision_conflict",
        f"asset {asset_id} is at revision {current}, not at the expected revision {expected}; re-read and retry",
        details={"assetId": asset_id, "expectedRevision": expected, "currentRevision": current},
    )


def check_revision(value: Any, *, optional: bool = False) -> int | None:
    if value is None and optional:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValidationError("asset.invalid_revision", "expected_revision must be an integer ≥ 1", pointer="/expectedRevision")
    return value


def dump_data(data: dict[str, Any]) -> str:
    """Serialise once; the text is what gets stored (key order kept: lorebooks rely on it)."""
    try:
        text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (ValueError, TypeError, RecursionError) as exc:
        raise ValidationError("asset.invalid_json", f"asset data is not storable JSON: {exc}", pointer="/data") from None
    if len(text.encode("utf-8")) > MAX_DATA_BYTES:
        raise ValidationError("asset.too_large", f"asset data exceeds {MAX_DATA_BYTES} bytes", pointer="/data")
    return text


def _column_name(name: str) -> str:
    # Listing text only; PostgreSQL text cannot hold NUL at all.
    return name.replace("\x00", "")


def _record(row: tuple[Any, ...]) -> AssetRecord:
    return AssetRecord(
        id=row[0],
        kind=row[1],
        revision=int(row[2]),
        name=row[3],
        data=json.loads(row[4]),
        content_hash=row[5],
        import_hash=row[6],
        source_character_id=row[7],
        seed_key=row[8],
        created_at=row[9],
        updated_at=row[10],
    )


# -- dialect adapters -----------------------------------------------------------------------------


class _SqliteConn:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    async def execute(self, sql: str, args: tuple[Any, ...] = ()) -> int:
        try:
            return self._conn.execute(sql, args).rowcount
        except sqlite3.IntegrityError as exc:
            if "UNIQUE" in str(exc) or "PRIMARY KEY" in str(exc):
                raise UniqueViolation(str(exc)) from exc
            raise

    async def fetchone(self, sql: str, args: tuple[Any, ...] = ()) -> tuple[Any, ...] | None:
        return self._conn.execute(sql, args).fetchone()

    async def fetchall(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return self._conn.execute(sql, args).fetchall()

    async def lock(self, key: int) -> None:
        return None  # BEGIN IMMEDIATE already serialises every writer


class _PgConn:
    def __init__(self, conn: Any) -> None:
        self._conn = conn

    async def execute(self, sql: str, args: tuple[Any, ...] = ()) -> int:
        import psycopg

        try:
            cur = await self._conn.execute(sql.replace("?", "%s"), args)
        except psycopg.errors.UniqueViolation as exc:
            raise UniqueViolation(str(exc)) from exc
        return cur.rowcount

    async def fetchone(self, sql: str, args: tuple[Any, ...] = ()) -> tuple[Any, ...] | None:
        cur = await self._conn.execute(sql.replace("?", "%s"), args)
        return await cur.fetchone()

    async def fetchall(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        cur = await self._conn.execute(sql.replace("?", "%s"), args)
        return await cur.fetchall()

    async def lock(self, key: int) -> None:
        await self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (key,))


def _drive(coro: Awaitable[T]) -> T:
    """Run a coroutine that never suspends (SQLite bodies) to completion, synchronously."""
    try:
        coro.send(None)  # type: ignore[attr-defined]
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    coro.close()  # type: ignore[attr-defined]
    raise RuntimeError("an asset transaction body awaited something other than the database")


# -- the transaction API ----------------------------------------------------------------------------


class AssetTx:
    """Row-level operations inside one transaction. Used by the store and its services (seeding,
    imports); callers validate data *before* the transaction so a failure writes nothing."""

    def __init__(self, conn: _SqliteConn | _PgConn, now: str, dialect: str) -> None:
        self.conn = conn
        self.now = now
        self.dialect = dialect

    def _flag(self, value: bool) -> Any:
        return value if self.dialect == "postgresql" else int(value)

    def _lock_suffix(self, for_update: bool) -> str:
        # SQLite's BEGIN IMMEDIATE already holds the write lock; PostgreSQL locks the row so the
        # read-check-write below cannot interleave with another writer.
        return " FOR UPDATE" if for_update and self.dialect == "postgresql" else ""

    async def get(self, asset_id: str, *, for_update: bool = False) -> AssetRecord | None:
        row = await self.conn.fetchone(f"SELECT {_COLS} FROM assets WHERE id=?{self._lock_suffix(for_update)}", (asset_id,))
        return _record(row) if row else None

    async def revisions(self, asset_ids: Iterable[str]) -> dict[str, int]:
        """The current revision of each of these assets that exists (a missing id is left out).
        Reads the revision column only: a big lorebook's data is megabytes."""
        ids = sorted(set(asset_ids))
        found: dict[str, int] = {}
        for start in range(0, len(ids), _IN_BATCH):
            batch = ids[start : start + _IN_BATCH]
            marks = ",".join("?" * len(batch))
            for asset_id, revision in await self.conn.fetchall(f"SELECT id, revision FROM assets WHERE id IN ({marks})", tuple(batch)):
                found[asset_id] = int(revision)
        return found

    async def revisions_and_blobs(self, asset_ids: Iterable[str], kind: str, role: str) -> tuple[dict[str, int], dict[str, Blob]]:
        """``revisions`` and, in the same statement, the ``role`` blob of those of the assets that
        are of ``kind`` and have one (one round trip for both on PostgreSQL)."""
        ids = sorted(set(asset_ids))
        found: dict[str, int] = {}
        blobs: dict[str, Blob] = {}
        for start in range(0, len(ids), _IN_BATCH):
            batch = ids[start : start + _IN_BATCH]
            marks = ",".join("?" * len(batch))
            rows = await self.conn.fetchall(
                "SELECT a.id, a.revision, b.media_type, b.bytes, b.sha256 FROM assets a "
                f"LEFT JOIN asset_blobs b ON b.asset_id = a.id AND b.role = ? AND a.kind = ? WHERE a.id IN ({marks})",
                (role, kind, *batch),
            )
            for asset_id, revision, media_type, data, digest in rows:
                found[asset_id] = int(revision)
                if data is not None:
                    blobs[asset_id] = Blob(asset_id, role, media_type, bytes(data), digest)
        return found, blobs

    async def by_seed_key(self, seed_key: str) -> AssetRecord | None:
        row = await self.conn.fetchone(f"SELECT {_COLS} FROM assets WHERE seed_key=?", (seed_key,))
        return _record(row) if row else None

    async def by_import_hash(self, kind: str, import_hash: str) -> AssetRecord | None:
        row = await self.conn.fetchone(f"SELECT {_COLS} FROM assets WHERE kind=? AND import_hash=?", (kind, import_hash))
        return _record(row) if row else None

    async def linked_lorebooks(self, card_id: str) -> list[AssetRecord]:
        rows = await self.conn.fetchall(
            f"SELECT {_COLS} FROM assets WHERE kind='lorebook' AND source_character_id=? ORDER BY created_at, id",
            (card_id,),
        )
        return [_record(r) for r in rows]

    async def insert(
        self,
        asset_id: str,
        kind: str,
        data: dict[str, Any],
        name: str,
        *,
        import_hash: str | None = None,
        source_character_id: str | None = None,
        seed_key: str | None = None,
    ) -> AssetRecord:
        text = dump_data(data)
        stored = json.loads(text)
        record = AssetRecord(
            asset_id,
            kind,
            1,
            _column_name(name),
            stored,
            content_hash(stored),
            import_hash,
            source_character_id,
            seed_key,
            self.now,
            self.now,
        )
        await self.conn.execute(
            f"INSERT INTO assets({_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (record.id, kind, 1, record.name, text, record.content_hash, import_hash, source_character_id, seed_key, self.now, self.now),
        )
        return record

    async def _current_revision(self, asset_id: str) -> int:
        row = await self.conn.fetchone(f"SELECT revision FROM assets WHERE id=?{self._lock_suffix(True)}", (asset_id,))
        if row is None:
            raise not_found(asset_id)
        return int(row[0])

    async def bump(
        self, asset_id: str, expected_revision: int | None, *, data: dict[str, Any] | None = None, name: str | None = None
    ) -> AssetRecord:
        """CAS: move the asset to the next revision (optionally with new data), or raise."""
        current = await self._current_revision(asset_id)
        if expected_revision is not None and current != expected_revision:
            raise revision_conflict(asset_id, expected_revision, current)
        if data is None:
            changed = await self.conn.execute(
                "UPDATE assets SET revision=revision+1, updated_at=? WHERE id=? AND revision=?",
                (self.now, asset_id, current),
            )
        else:
            text = dump_data(data)
            changed = await self.conn.execute(
                "UPDATE assets SET revision=revision+1, data=?, name=?, content_hash=?, updated_at=? WHERE id=? AND revision=?",
                (text, _column_name(name or ""), content_hash(json.loads(text)), self.now, asset_id, current),
            )
        if changed != 1:  # guard only: the row is locked (PostgreSQL) or the database is (SQLite)
            raise revision_conflict(asset_id, expected_revision or current, await self._current_revision(asset_id))
        record = await self.get(asset_id)
        assert record is not None
        return record

    async def delete(self, asset_id: str, expected_revision: int | None) -> AssetRecord:
        record = await self.get(asset_id, for_update=True)
        if record is None:
            raise not_found(asset_id)
        if expected_revision is not None and record.revision != expected_revision:
            raise revision_conflict(asset_id, expected_revision, record.revision)
        await self.conn.execute("DELETE FROM asset_blobs WHERE asset_id=?", (asset_id,))
        await self.conn.execute("DELETE FROM asset_defaults WHERE asset_id=?", (asset_id,))
        changed = await self.conn.execute("DELETE FROM assets WHERE id=? AND revision=?", (asset_id, record.revision))
        if changed != 1:
            raise revision_conflict(asset_id, record.revision, await self._current_revision(asset_id))
        if record.seed_key is not None:
            # The marker outlives the asset: a deleted built-in must never be recreated.
            await self.conn.execute(
                "UPDATE asset_seed_markers SET deleted=?, updated_at=? WHERE seed_key=?", (self._flag(True), self.now, record.seed_key)
            )
        return record

    # blobs
    async def put_blob(self, asset_id: str, role: str, media_type: str, data: bytes) -> None:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        await self.conn.execute("DELETE FROM asset_blobs WHERE asset_id=? AND role=?", (asset_id, role))
        await self.conn.execute(
            "INSERT INTO asset_blobs(asset_id, role, media_type, sha256, size, bytes, created_at) VALUES (?,?,?,?,?,?,?)",
            (asset_id, role, media_type, digest, len(data), data, self.now),
        )

    async def blob(self, asset_id: str, role: str) -> Blob | None:
        row = await self.conn.fetchone("SELECT media_type, bytes, sha256 FROM asset_blobs WHERE asset_id=? AND role=?", (asset_id, role))
        return Blob(asset_id, role, row[0], bytes(row[1]), row[2]) if row else None

    async def blobs(self, asset_id: str) -> list[BlobInfo]:
        rows = await self.conn.fetchall(
            "SELECT role, media_type, size, sha256 FROM asset_blobs WHERE asset_id=? ORDER BY role", (asset_id,)
        )
        return [BlobInfo(r[0], r[1], int(r[2]), r[3]) for r in rows]

    # defaults
    async def default_id(self, kind: str) -> str | None:
        row = await self.conn.fetchone("SELECT asset_id FROM asset_defaults WHERE kind=?", (kind,))
        return row[0] if row else None

    async def set_default(self, kind: str, asset_id: str) -> None:
        await self.conn.execute("DELETE FROM asset_defaults WHERE kind=?", (kind,))
        await self.conn.execute("INSERT INTO asset_defaults(kind, asset_id, updated_at) VALUES (?,?,?)", (kind, asset_id, self.now))

    # seed markers
    async def lock_seeds(self) -> None:
        await self.conn.lock(_SEED_LOCK)

    async def marker(self, seed_key: str) -> SeedMarker | None:
        row = await self.conn.fetchone(
            "SELECT seed_key, kind, version, content_hash, asset_id FROM asset_seed_markers WHERE seed_key=?", (seed_key,)
        )
        return SeedMarker(row[0], row[1], int(row[2]), row[3], row[4]) if row else None

    async def put_marker(self, marker: SeedMarker) -> None:
        await self.conn.execute("DELETE FROM asset_seed_markers WHERE seed_key=?", (marker.key,))
        await self.conn.execute(
            "INSERT INTO asset_seed_markers(seed_key, kind, version, content_hash, asset_id, deleted, updated_at) VALUES (?,?,?,?,?,?,?)",
            (marker.key, marker.kind, marker.version, marker.content_hash, marker.asset_id, self._flag(False), self.now),
        )


Body = Callable[[AssetTx], Awaitable[T]]


class AssetStore:
    """Async CRUD over the asset tables of an opened event store. The tables are the asset
    store's own (``assets/migrations.py``): the first read or write through a store applies them
    if needed (``assets/schema.py``), so a harness-migrated store is enough."""

    def __init__(self, events: EventStore) -> None:
        if events.dialect not in ("sqlite", "postgresql"):
            raise RpError("asset.unsupported_store", f"assets need a SQLite or PostgreSQL store, not {events.dialect!r}")
        self.events = events

    # -- owned tables -----------------------------------------------------------------------------
    async def migrate(self, plan: Mapping[str, Sequence[Any]]) -> list[tuple[str, int]]:
        """Apply every pending migration of ``plan`` (owner → its migrations, see
        ``assets/schema.py``); return the (owner, number) pairs applied now, in order."""
        for owner, migrations in plan.items():
            check_sequence(owner, migrations)
        applied: list[tuple[str, int]] = []
        for owner, migrations in plan.items():
            if not migrations or is_ready(self.events, owner, migrations):
                continue

            async def body(tx: AssetTx, owner: str = owner, migrations: Sequence[Any] = migrations) -> list[int]:
                return await apply_pending(tx, owner, migrations)

            numbers = await self._run_write(body, retry_on_unique=True)
            mark_ready(self.events, owner, migrations)
            applied += [(owner, n) for n in numbers]
        return applied

    async def ensure(self, owner: str, migrations: Sequence[Any]) -> None:
        """``owner``'s tables exist on this store (one read per store and owner, then nothing)."""
        if not is_ready(self.events, owner, migrations):
            await self.migrate({owner: migrations})

    async def _own_tables(self) -> None:
        if not is_ready(self.events, OWNER, ASSET_MIGRATIONS):
            await self.migrate({OWNER: ASSET_MIGRATIONS})

    def new_id(self) -> str:
        return self.events.ids(ID_PREFIX)

    # -- the one commit path --------------------------------------------------------------------
    async def write(self, body: Body[T], *, retry_on_unique: bool = False) -> T:
        """Run ``body`` in one write transaction. With ``retry_on_unique`` a body that lost a race
        on a unique index is run again (it must re-read and find the winner's rows)."""
        await self._own_tables()
        return await self._run_write(body, retry_on_unique=retry_on_unique)

    async def _run_write(self, body: Body[T], *, retry_on_unique: bool = False) -> T:
        attempts = 3 if retry_on_unique else 1
        for attempt in range(attempts):
            try:
                return await self._write_once(body)
            except UniqueViolation as exc:
                if attempt + 1 == attempts:
                    raise ConflictError("asset.write_conflict", f"a concurrent write won: {exc}") from None
        raise AssertionError("unreachable")

    async def _write_once(self, body: Body[T]) -> T:
        now = self.events.now()
        if self.events.dialect == "sqlite":

            def run(conn: sqlite3.Connection) -> T:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    result = _drive(body(AssetTx(_SqliteConn(conn), now, "sqlite")))
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
                return result

            return await self.events.execute_write(run)  # type: ignore[attr-defined,no-any-return]
        async with self.events.connection() as conn:  # type: ignore[attr-defined]
            async with conn.transaction():
                return await body(AssetTx(_PgConn(conn), now, "postgresql"))

    async def read(self, body: Body[T]) -> T:
        await self._own_tables()
        now = self.events.now()
        if self.events.dialect == "sqlite":
            return await self.events.execute_read(  # type: ignore[attr-defined,no-any-return]
                lambda conn: _drive(body(AssetTx(_SqliteConn(conn), now, "sqlite")))
            )
        # No BEGIN/COMMIT around a read (two round trips saved; a turn makes about ten reads): the
        # pool's connections autocommit, and at READ COMMITTED, the store's isolation level, every
        # statement takes its own snapshot inside a transaction too, so a read body sees exactly
        # what it would have seen in one. Read bodies take no locks (``lock``, ``FOR UPDATE``
        # belong to ``write``).
        async with self.events.connection() as conn:  # type: ignore[attr-defined]
            return await body(AssetTx(_PgConn(conn), now, "postgresql"))

    # -- reads ----------------------------------------------------------------------------------
    async def revisions(self, asset_ids: Iterable[str]) -> dict[str, int]:
        """``{id: current revision}`` for those of ``asset_ids`` that exist, in one read."""
        ids = list(asset_ids)
        return await self.read(lambda tx: tx.revisions(ids)) if ids else {}

    async def get(self, asset_id: str, *, kind: str | None = None) -> AssetRecord:
        record = await self.read(lambda tx: tx.get(asset_id))
        if record is None:
            raise not_found(asset_id)
        if kind is not None and record.kind != kind:
            raise wrong_kind(record, kind)
        return record

    async def list(self, kind: str, *, limit: int = 50, offset: int = 0, source_character_id: str | None = None) -> AssetPage:
        """One page of ``kind``, oldest first (ids are sortable, so creation order is stable)."""
        check_kind(kind)
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_PAGE:
            raise ValidationError("asset.invalid_page", f"limit must be 1..{MAX_PAGE}", pointer="/limit")
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise ValidationError("asset.invalid_page", "offset must be an integer ≥ 0", pointer="/offset")
        where, args = "kind=?", [kind]
        if source_character_id is not None:
            where += " AND source_character_id=?"
            args.append(source_character_id)

        async def body(tx: AssetTx) -> AssetPage:
            total = await tx.conn.fetchone(f"SELECT count(*) FROM assets WHERE {where}", tuple(args))
            rows = await tx.conn.fetchall(
                f"SELECT {_COLS} FROM assets WHERE {where} ORDER BY created_at, id LIMIT ? OFFSET ?",
                (*args, limit, offset),
            )
            return AssetPage([_record(r) for r in rows], int(total[0]) if total else 0, limit, offset)

        return await self.read(body)

    # -- writes ---------------------------------------------------------------------------------
    async def create(self, kind: str, data: Any, *, source_character_id: str | None = None) -> AssetRecord:
        valid = validate_asset_data(kind, data)
        if source_character_id is not None and kind != "lorebook":
            raise ValidationError(
                "asset.source_character_not_allowed", "only lorebooks can name a source character", pointer="/sourceCharacterId"
            )
        asset_id = self.new_id()
        return await self.write(lambda tx: tx.insert(asset_id, kind, valid.data, valid.name, source_character_id=source_character_id))

    async def update(self, asset_id: str, data: Any, *, expected_revision: int) -> AssetRecord:
        """Replace the data of an asset, if it is still at ``expected_revision``."""
        check_revision(expected_revision)
        current = await self.get(asset_id)  # the kind never changes, so validating against it is safe
        valid = validate_asset_data(current.kind, data)
        return await self.write(lambda tx: tx.bump(asset_id, expected_revision, data=valid.data, name=valid.name))

    async def delete(self, asset_id: str, *, expected_revision: int | None = None) -> AssetRecord:
        """Hard delete (blobs and default row go with it); returns what was deleted."""
        check_revision(expected_revision, optional=True)
        return await self.write(lambda tx: tx.delete(asset_id, expected_revision))

    # -- blobs ----------------------------------------------------------------------------------
    async def put_blob(
        self, asset_id: str, role: str, data: bytes, *, media_type: str, expected_revision: int | None = None
    ) -> AssetRecord:
        """Store a blob and bump the asset's revision. ``avatar`` blobs are images: they are
        re-encoded as a metadata-free PNG first (card text chunks, EXIF and C2PA never persist)."""
        check_revision(expected_revision, optional=True)
        if not isinstance(role, str) or not _ROLE_RE.match(role):
            raise ValidationError("asset.blob_invalid_role", "blob role must be lowercase letters, digits and '-'", pointer="/role")
        if role in RESERVED_ROLES:
            raise ValidationError("asset.blob_reserved", f"blob role {role!r} is managed by the asset services", pointer="/role")
        if not isinstance(media_type, str) or not _MEDIA_RE.match(media_type):
            raise ValidationError("asset.blob_invalid_media_type", "media type must look like type/subtype", pointer="/mediaType")
        if not isinstance(data, (bytes, bytearray)) or len(data) > MAX_BLOB_BYTES:
            raise ValidationError("asset.blob_too_large", f"blobs are bytes of at most {MAX_BLOB_BYTES} bytes", pointer="/data")
        payload = bytes(data)
        if role == "avatar":
            from .cards import sanitize_avatar

            payload, media_type = sanitize_avatar(payload), "image/png"

        async def body(tx: AssetTx) -> AssetRecord:
            record = await tx.bump(asset_id, expected_revision)
            await tx.put_blob(asset_id, role, media_type, payload)
            return record

        return await self.write(body)

    async def get_blob(self, asset_id: str, role: str) -> Blob:
        async def body(tx: AssetTx) -> tuple[bool, Blob | None]:
            return (await tx.get(asset_id)) is not None, await tx.blob(asset_id, role)

        exists, blob = await self.read(body)
        if not exists:
            raise not_found(asset_id)
        if blob is None:
            raise NotFoundError(
                "asset.blob_not_found", f"asset {asset_id} has no {role!r} blob", details={"assetId": asset_id, "role": role}
            )
        return blob

    async def list_blobs(self, asset_id: str) -> builtins.list[BlobInfo]:  # `list` here is the method
        await self.get(asset_id)
        return await self.read(lambda tx: tx.blobs(asset_id))

    # -- defaults -------------------------------------------------------------------------------
    @staticmethod
    def _check_default_kind(kind: str) -> None:
        check_kind(kind)
        if kind not in DEFAULT_KINDS:
            raise ValidationError(
                "asset.default_unsupported", f"{kind} assets have no default; only {', '.join(DEFAULT_KINDS)} do", pointer="/kind"
            )

    async def get_default(self, kind: str) -> AssetRecord | None:
        """The default asset of ``kind``, or None (none set, or the default was deleted)."""
        self._check_default_kind(kind)

        async def body(tx: AssetTx) -> AssetRecord | None:
            asset_id = await tx.default_id(kind)
            return await tx.get(asset_id) if asset_id else None

        return await self.read(body)

    async def set_default(self, kind: str, asset_id: str) -> AssetRecord:
        self._check_default_kind(kind)

        async def body(tx: AssetTx) -> AssetRecord:
            record = await tx.get(asset_id)
            if record is None:
                raise not_found(asset_id)
            if record.kind != kind:
                raise ValidationError(
                    "asset.kind_mismatch",
                    f"asset {asset_id} is a {record.kind}, not a {kind}",
                    pointer="/assetId",
                    details={"assetId": asset_id, "kind": record.kind},
                )
            await tx.set_default(kind, asset_id)
            return record

        return await self.write(body)

    # -- diagnostics ----------------------------------------------------------------------------
    async def dump(self) -> builtins.list[tuple[Any, ...]]:
        """Every row of the asset tables in a stable order (byte-identity tests)."""

        async def body(tx: AssetTx) -> list[tuple[Any, ...]]:
            rows = [("asset", *r) for r in await tx.conn.fetchall(f"SELECT {_COLS} FROM assets ORDER BY id")]
            rows += [
                ("blob", r[0], r[1], r[2], r[3], bytes(r[4]))
                for r in await tx.conn.fetchall("SELECT asset_id, role, media_type, sha256, bytes FROM asset_blobs ORDER BY asset_id, role")
            ]
            rows += [
                ("marker", *r[:5], bool(r[5]))
                for r in await tx.conn.fetchall(
                    "SELECT seed_key, kind, version, content_hash, asset_id, deleted FROM asset_seed_markers ORDER BY seed_key"
                )
            ]
            rows += [("default", *r) for r in await tx.conn.fetchall("SELECT kind, asset_id FROM asset_defaults ORDER BY kind")]
            return rows

        return await self.read(body)


__all__ = [
    "AssetPage",
    "AssetRecord",
    "AssetStore",
    "AssetTx",
    "Blob",
    "BlobInfo",
    "MAX_BLOB_BYTES",
    "MAX_DATA_BYTES",
    "RESERVED_ROLES",
    "UniqueViolation",
    "check_revision",
    "dump_data",
    "not_found",
    "revision_conflict",
]
