"""One active run per session, across processes.

The lease must vanish by itself when its holder dies, or a crashed process would lock a story
forever. So it is held by the operating system or the database, never written as a row:

- SQLite: ``flock`` on ``<data dir>/locks/<session>.lock`` (released when the file descriptor
  closes, including on a crash). A second ``flock`` in the same process conflicts too, because
  each lease opens its own file description.
- PostgreSQL: a session-level ``pg_try_advisory_lock`` on a dedicated connection, keyed by the
  schema and the session id (released when the connection ends).

A second start while a lease is held is refused at once with ``run.busy``.

Everything that writes a session's log outside a run (message actions, profile changes) takes the
same lease, so nothing moves the log under a run, and a run never starts on a snapshot read
before another writer finished. Work that belongs to the holder (a tool of the run binding an
asset) reuses its lease through :func:`session_lease`: the holder is recorded in a context
variable, which asyncio copies into the tasks the holder starts. :func:`run_lease` itself stays
strict: a second acquisition, even in the same task, is ``run.busy``.
"""

from __future__ import annotations

import hashlib
import os
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator

from roleplay.errors import ConflictError

from .store.base import EventStore


def busy(session_id: str) -> ConflictError:
    return ConflictError(
        "run.busy",
        f"session {session_id} already has an active run; wait for it to finish or abort it",
        details={"sessionId": session_id},
    )


@dataclass(eq=False)
class Lease:
    """A held run lease. ``nested`` is true when :func:`session_lease` reused a lease that this
    context already held (the caller runs inside someone else's run)."""

    store: EventStore
    session_id: str
    nested: bool = False
    active: bool = True

    def holds(self, store: EventStore, session_id: str) -> bool:
        return self.active and self.store is store and self.session_id == session_id


_HELD: ContextVar[tuple[Lease, ...]] = ContextVar("rp_run_leases", default=())


def held_lease(store: EventStore, session_id: str) -> Lease | None:
    """The lease on ``session_id`` that this context (or the task that started it) holds."""
    return next((lease for lease in _HELD.get() if lease.holds(store, session_id)), None)


@asynccontextmanager
async def run_lease(store: EventStore, session_id: str) -> AsyncIterator[Lease]:
    """Take the session's lease or fail at once with ``run.busy``."""
    await store.get_session(session_id)
    lease = Lease(store, session_id)
    token = _HELD.set((*_HELD.get(), lease))
    try:
        if store.dialect == "postgresql":
            async with _pg_lease(store, session_id):
                yield lease
        else:
            with _file_lease(Path(getattr(store, "path")), session_id):
                yield lease
    finally:
        lease.active = False
        _HELD.reset(token)


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


class _file_lease:
    def __init__(self, db_path: Path, session_id: str) -> None:
        safe = hashlib.sha256(session_id.encode("utf-8")).hexdigest()[:32]
        self.path = db_path.parent / "locks" / f"{safe}.lock"
        self.session_id = session_id
        self.fd: int | None = None

    def __enter__(self) -> None:
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise busy(self.session_id) from None
        self.fd = fd

    def __exit__(self, *exc: Any) -> None:
        import fcntl

        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None


@asynccontextmanager
async def _pg_lease(store: EventStore, session_id: str) -> AsyncIterator[None]:
    import psycopg

    conn = await psycopg.AsyncConnection.connect(getattr(store, "url"), autocommit=True)
    try:
        cur = await conn.execute("SELECT pg_try_advisory_lock(hashtextextended(current_schema() || ':run:' || %s, 0))", (session_id,))
        row = await cur.fetchone()
        if not row or not row[0]:
            raise busy(session_id)
        try:
            yield
        finally:
            await conn.execute("SELECT pg_advisory_unlock(hashtextextended(current_schema() || ':run:' || %s, 0))", (session_id,))
    finally:
        await conn.close()
