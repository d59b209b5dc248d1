"""The SQLite store's own reader threads (issue 16): reads answered, errors delivered, bounded,
and ended with the store."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import pytest

from roleplay.errors import RpError
from roleplay.harness.events import EventDraft
from roleplay.harness.store.sqlite import READER_THREADS, SQLiteStore

pytestmark = pytest.mark.anyio


def _readers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("rp-sqlite-reader:") and t.name.endswith("readers.db")]


async def test_concurrent_reads_are_answered_by_a_bounded_set_of_readers(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "readers.db")
    await store.migrate()
    try:
        sessions = []
        for i in range(8):
            draft = EventDraft("user/message", {"messageId": f"m{i}", "content": [{"type": "text", "text": f"hello {i}"}]})
            sessions.append(await store.create_session(preset="p", events=[draft]))
        reads = [store.read(s.id) for s in sessions for _ in range(10)]
        heads = [store.head(s.id) for s in sessions for _ in range(10)]
        pages, seqs = await asyncio.gather(asyncio.gather(*reads), asyncio.gather(*heads))
        assert [page[0].payload["content"][0]["text"] for page in pages] == [f"hello {i}" for i in range(8) for _ in range(10)]
        assert seqs == [1] * 80
        assert 1 <= len(_readers()) <= READER_THREADS
        # One read at a time needs no more than the readers already there.
        before = len(_readers())
        for s in sessions:
            assert (await store.get_session(s.id)).head_seq == 1
        assert len(_readers()) == before
    finally:
        await store.close()
    assert _readers() == []


async def test_a_failing_read_reaches_its_caller_and_the_reader_goes_on(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "readers.db")
    await store.migrate()
    try:
        with pytest.raises(sqlite3.OperationalError):
            await store.execute_read(lambda c: c.execute("SELECT * FROM no_such_table").fetchall())

        def boom(conn: sqlite3.Connection) -> None:
            raise KeyError("inside the read")

        with pytest.raises(KeyError):
            await store.execute_read(boom)
        assert await store.execute_read(lambda c: c.execute("SELECT 41 + 1").fetchone()[0]) == 42
    finally:
        await store.close()


async def test_reads_queued_before_close_are_answered_and_later_ones_refused(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "readers.db")
    await store.migrate()
    record = await store.create_session(preset="p")
    pending = [asyncio.ensure_future(store.get_session(record.id)) for _ in range(20)]
    await asyncio.sleep(0)  # the reads are queued
    await store.close()
    assert [r.id for r in await asyncio.gather(*pending)] == [record.id] * 20
    assert _readers() == []
    with pytest.raises(RpError) as exc:
        await store.get_session(record.id)
    assert exc.value.code == "store.closed"
