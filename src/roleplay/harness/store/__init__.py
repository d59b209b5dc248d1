"""Event stores: one interface (``base.EventStore``), two backends, chosen by URL."""

from __future__ import annotations

from pathlib import Path

from roleplay.clock import Clock, IdGenerator, system_clock, ulid_ids
from roleplay.errors import RpError

from .base import EventStore, SessionFilter, SessionRecord, Snapshot
from .sqlite import SQLiteStore


def open_store(url: str, *, clock: Clock = system_clock, ids: IdGenerator = ulid_ids) -> EventStore:
    """``sqlite:///path/to/file.db`` (or a bare path) or ``postgresql://…``."""
    if url.startswith(("postgresql://", "postgres://")):
        from .postgres import PostgresStore

        return PostgresStore(url, clock=clock, ids=ids)
    if url.startswith("sqlite:///"):
        return SQLiteStore(Path(url[len("sqlite:///") :]), clock=clock, ids=ids)
    if "://" in url:
        raise RpError(
            "store.unsupported_url", f"unsupported database URL scheme in {url.split('://')[0]!r}://…; use sqlite:/// or postgresql://"
        )
    return SQLiteStore(Path(url), clock=clock, ids=ids)


__all__ = ["EventStore", "SessionFilter", "SessionRecord", "Snapshot", "SQLiteStore", "open_store"]
