"""One active run per session, across processes.

The lease must vanish by itself when its holder dies, or a crashed process would lock a story
forever. So it is held by the operating system or the database, never written as a row:

- SQLite: a one-byte POSIX record lock (``lockf``) in the single file ``<data dir>/locks/leases.lock``,
  at an offset hashed from the session id (2^62 offsets, so two sessions never share one in
  practice). The kernel drops it when the process dies. One file for every session: a file per
  session left one file behind per Writer child, i.e. per turn (issue 12). Record locks belong to
  the process, not the descriptor, and closing any descriptor of the file drops them all, so each
  process opens the file once and keeps it, and refuses a second lease on an offset it already
  holds itself. (Homes from before this keep their old ``<hash>.lock`` files; nothing reads them
  and they may be deleted.)
- PostgreSQL: a session-level ``pg_try_advisory_lock`` keyed by the schema and the session id,
  released by an unlock or when the connection ends. Every lease of a store lives on the store's
  one lease connection (``store/pg_leases.py``), so concurrent turns cost no connection each. If
  that connection dies its leases are gone: :func:`check_lease` then fails the affected run with
  ``store.lease_lost`` before its next write, and the next lease reconnects.

A second start while a lease is held is refused at once with ``run.busy``.

A session a run creates to run at once (a Writer's child) is leased from birth
(:func:`created_session_lease`): on PostgreSQL the insert and the lock are one statement, so no
other process ever sees it unleased. Its lease is then given back with the creating run's own
(one unlock statement for both, PostgreSQL): nothing but that run writes it in between, and
whoever asks meanwhile sees it taken, as it is while the run goes on.

Everything that writes a session's log outside a run (message actions, profile changes) takes the
same lease, so nothing moves the log under a run, and a run never starts on a snapshot read
before another writer finished. Work that belongs to the holder (a tool of the run binding an
asset) reuses its lease through :func:`session_lease`: the holder is recorded in a context
variable, which asyncio copies into the tasks the holder starts. :func:`run_lease` itself stays
strict: a second acquisition, even in the same task, is ``run.busy``.

:func:`lease_taken` asks whether anyone (this process or another) holds a session's lease without
taking it (``F_GETLK`` / ``pg_locks``), so a view that shows "a run is active" never makes a run
that starts at that moment fail with ``run.busy``.
"""

from __future__ import annotations

import errno
import hashlib
import os
import threading
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable

from roleplay.errors import ConflictError

from .store.base import EventStore, SessionRecord
from .store.pg_leases import lease_busy, lease_lost


def busy(session_id: str) -> ConflictError:
    return lease_busy(session_id)


@dataclass(eq=False)
class Lease:
    """A held run lease. ``nested`` is true when :func:`session_lease` reused a lease that this
    context already held (the caller runs inside someone else's run)."""

    store: EventStore
    session_id: str
    nested: bool = False
    active: bool = True
    alive: Callable[[], bool] | None = None  # PostgreSQL: false once the lock went with its connection
    # The session's record as read with the lock (PostgreSQL, same statement) or just before it;
    # None for a nested lease.
    record: SessionRecord | None = None
    # PostgreSQL: leases of sessions this run created, (session, generation), unlocked with this one.
    deferred: list[tuple[str, int]] = field(default_factory=list)
    releasing: bool = False

    def holds(self, store: EventStore, session_id: str) -> bool:
        return self.active and self.store is store and self.session_id == session_id

    def check(self) -> None:
        """``store.lease_lost`` when the lock is no longer held (no round trip)."""
        if self.alive is not None and not self.alive():
            raise lease_lost(self.session_id)


_HELD: ContextVar[tuple[Lease, ...]] = ContextVar("rp_run_leases", default=())


def held_lease(store: EventStore, session_id: str) -> Lease | None:
    """The lease on ``session_id`` that this context (or the task that started it) holds."""
    return next((lease for lease in _HELD.get() if lease.holds(store, session_id)), None)


@asynccontextmanager
async def run_lease(store: EventStore, session_id: str) -> AsyncIterator[Lease]:
    """Take the session's lease or fail at once with ``run.busy``."""
    async with _lease(store, session_id, created=None) as lease:
        yield lease


@asynccontextmanager
async def created_session_lease(
    store: EventStore, create: Callable[[], Awaitable[SessionRecord]]
) -> AsyncIterator[tuple[SessionRecord, Lease]]:
    """Create a session with ``create`` (which must call ``create_session(…, leased=True)``) and
    hold its lease from that moment. When this context runs inside another run's lease on the
    same store, the new session's lease is given back with that run's (PostgreSQL: one statement
    for both; the caller's own unlock costs no round trip)."""
    record = await create()
    # Nothing suspends between the insert and the adoption below, so a cancellation cannot leave
    # the lease taken with nobody holding it.
    async with _lease(store, record.id, created=record) as lease:
        yield record, lease


@asynccontextmanager
async def _lease(store: EventStore, session_id: str, *, created: SessionRecord | None) -> AsyncIterator[Lease]:
    record = created
    if store.dialect != "postgresql" and record is None:
        record = await store.get_session(session_id)  # PostgreSQL reads it with the lock, in one query
    owner = _owner(store) if created is not None else None
    lease = Lease(store, session_id, record=record)
    token = _HELD.set((*_HELD.get(), lease))
    try:
        if store.dialect == "postgresql":
            async with _pg_lease(store, lease, owner, created is not None) as alive:
                lease.alive = alive
                yield lease
        else:
            with _file_lease(Path(getattr(store, "path")), session_id):
                yield lease
    finally:
        lease.active = False
        _HELD.reset(token)


def _owner(store: EventStore) -> Lease | None:
    """The run lease this context holds on ``store`` (the innermost), if any."""
    return next((lease for lease in reversed(_HELD.get()) if lease.store is store and lease.active and not lease.nested), None)


def check_lease(store: EventStore, session_id: str) -> None:
    """Before a write of a run: fail with ``store.lease_lost`` if the lease this context holds on the
    session was lost (its PostgreSQL connection died, so another run may already have started).
    Nothing to check without a held lease, or on SQLite (a record lock lasts as long as the process)."""
    lease = held_lease(store, session_id)
    if lease is not None:
        lease.check()


@asynccontextmanager
async def session_lease(store: EventStore, session_id: str) -> AsyncIterator[Lease]:
    """The lease this context already holds on the session (``nested``), else a new one."""
    held = held_lease(store, session_id)
    if held is not None:
        nested = Lease(store, session_id, nested=True)
        try:
            yield nested
        finally:
            nested.active = False
        return
    async with run_lease(store, session_id) as lease:
        yield lease


# Children's leases a run keeps until its own goes (PostgreSQL's lock table is shared and finite:
# an Agent turn spawning many sub-agents gives the ones past this back at once).
DEFERRED_MAX = 32
LEASE_FILE = "leases.lock"
_OFFSETS = 1 << 62  # start + length stays inside off_t


def lease_offset(session_id: str) -> int:
    return int.from_bytes(hashlib.sha256(session_id.encode("utf-8")).digest()[:8], "big") % _OFFSETS


class _LeaseFile:
    """This process's one descriptor on a lease file and the offsets it holds there."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None
        self.held: set[int] = set()
        self.lock = threading.Lock()

    def acquire(self, offset: int, session_id: str) -> None:
        import fcntl

        with self.lock:
            if offset in self.held:
                raise busy(session_id)
            self._open()
            assert self.fd is not None
            try:
                fcntl.lockf(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, offset, os.SEEK_SET)
            except OSError as exc:
                if exc.errno in (errno.EACCES, errno.EAGAIN):
                    raise busy(session_id) from None
                raise
            self.held.add(offset)

    def taken(self, offset: int) -> bool:
        """Whether this process or another holds ``offset`` (asked, never taken)."""
        with self.lock:
            if offset in self.held:
                return True
            self._open()
            assert self.fd is not None
            return _locked_elsewhere(self.fd, offset)

    def release(self, offset: int) -> None:
        import fcntl

        with self.lock:
            if offset in self.held and self.fd is not None:
                fcntl.lockf(self.fd, fcntl.LOCK_UN, 1, offset, os.SEEK_SET)
            self.held.discard(offset)

    def _open(self) -> None:
        if self.fd is not None:
            # A file deleted or replaced under us would lock nothing that others see: reopen it,
            # which is safe only while this process holds nothing through the old descriptor.
            if self.held or _same_file(self.fd, self.path):
                return
            os.close(self.fd)
            self.fd = None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)


def _locked_elsewhere(fd: int, offset: int) -> bool:
    """``F_GETLK`` on one byte: another process's record lock there (a process never sees its own)."""
    import fcntl
    import struct
    import sys

    # struct flock: Linux (64-bit) {short type, whence; off_t start, len; pid_t pid}; the BSDs and
    # macOS {off_t start, len; pid_t pid; short type, whence}.
    if sys.platform.startswith("linux") and struct.calcsize("P") == 8:
        layout, fields = "@hhqqi4x", (fcntl.F_WRLCK, os.SEEK_SET, offset, 1, 0)
    elif sys.platform == "darwin" or "bsd" in sys.platform:
        layout, fields = "@qqihh", (offset, 1, 0, fcntl.F_WRLCK, os.SEEK_SET)
    else:  # no known layout: take it and give it back at once (a start racing this may see run.busy)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, offset, os.SEEK_SET)
        except OSError as exc:
            if exc.errno in (errno.EACCES, errno.EAGAIN):
                return True
            raise
        fcntl.lockf(fd, fcntl.LOCK_UN, 1, offset, os.SEEK_SET)
        return False
    answer = struct.unpack(layout, fcntl.fcntl(fd, fcntl.F_GETLK, struct.pack(layout, *fields)))
    kind = answer[0] if layout.startswith("@hh") else answer[3]
    return bool(kind != fcntl.F_UNLCK)


def _same_file(fd: int, path: Path) -> bool:
    try:
        st, now = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == (now.st_dev, now.st_ino)


_FILES: dict[Path, _LeaseFile] = {}
_FILES_LOCK = threading.Lock()


def _forget_after_fork() -> None:
    # A forked child inherits the descriptors but none of the record locks: start afresh.
    global _FILES_LOCK
    for entry in _FILES.values():
        if entry.fd is not None:
            try:
                os.close(entry.fd)
            except OSError:
                pass
    _FILES.clear()
    _FILES_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


class _file_lease:
    def __init__(self, db_path: Path, session_id: str) -> None:
        path = (db_path.parent / "locks" / LEASE_FILE).absolute()
        with _FILES_LOCK:
            self.file = _FILES.setdefault(path, _LeaseFile(path))
        self.offset = lease_offset(session_id)
        self.session_id = session_id
        self.acquired = False

    def __enter__(self) -> None:
        self.file.acquire(self.offset, self.session_id)
        self.acquired = True

    def __exit__(self, *exc: Any) -> None:
        if self.acquired:
            self.file.release(self.offset)
            self.acquired = False


async def lease_taken(store: EventStore, session_id: str) -> bool:
    """Whether a run (or a message action) holds the session's lease now, in any process. Asked
    without taking it; the answer may be stale by the time it is read."""
    if store.dialect == "postgresql":
        row = await getattr(store, "_fetchone")(
            "SELECT EXISTS (SELECT 1 FROM pg_locks l, (SELECT hashtextextended(current_schema() || ':run:' || %s, 0) AS k) h"
            " WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1"
            " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            " AND l.classid::bigint = ((h.k >> 32) & 4294967295) AND l.objid::bigint = (h.k & 4294967295))",
            (session_id,),
        )
        return bool(row and row[0])
    path = (Path(getattr(store, "path")).parent / "locks" / LEASE_FILE).absolute()
    with _FILES_LOCK:
        entry = _FILES.setdefault(path, _LeaseFile(path))
    return entry.taken(lease_offset(session_id))


@asynccontextmanager
async def _pg_lease(store: EventStore, lease: Lease, owner: Lease | None, created: bool) -> AsyncIterator[Callable[[], bool]]:
    """A session-level advisory lock on the store's lease connection (shared by all its leases).
    The lock and the session's existence are one query (the lock of a ``created`` session was
    taken with its insert); the unlock is a second, unless an ``owner`` still running takes it
    with its own. Yields the lease's liveness check."""
    conn = getattr(store, "leases")
    session_id = lease.session_id
    if created:
        generation = conn.adopt(session_id)
    else:
        await getattr(store, "_ensure_open")()
        generation, lease.record = await conn.acquire(session_id)
    try:
        yield lambda: bool(conn.alive(session_id, generation))
    finally:
        if owner is not None and owner.active and not owner.releasing and len(owner.deferred) < DEFERRED_MAX:
            owner.deferred += [(session_id, generation), *lease.deferred]
        else:
            lease.releasing = True
            await conn.release(session_id, generation, also=lease.deferred)
