"""Chunk deltas cross to another PostgreSQL process only when it may be streaming the session
(store/pg_watchers.py): what a process knows of the others' watchers, and the stores end to end."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roleplay.errors import RpError
from roleplay.harness.events import EventDraft
from roleplay.harness.leases import run_lease
from roleplay.harness.store import EventStore, open_store
from roleplay.harness.store.pg_watchers import BUCKETS, WATCH_DELAY, Watchers, bucket

pytestmark = pytest.mark.anyio
SESSIONS = ["ses_a", "ses_b", "ses_c"]


def user(mid: str) -> EventDraft:
    return EventDraft("user/message", {"messageId": mid, "content": [{"type": "text", "text": mid}]})


# -- what one process knows ----------------------------------------------------------------------


def test_an_unknown_session_counts_as_watched_and_a_check_says_otherwise_only_while_listening() -> None:
    w = Watchers()
    assert w.watched("ses_a")
    w.checked("ses_a", False, w.stamp())  # not listening: a "w" could have been missed
    assert w.watched("ses_a")
    w.started()
    w.checked("ses_a", False, w.stamp())
    assert not w.watched("ses_a") and w.watched("ses_b")
    w.heard("ses_a")
    assert w.watched("ses_a")
    w.checked("ses_a", False, w.stamp())
    w.stopped()
    assert w.watched("ses_a")  # what was known goes with the listener


def test_a_check_sent_before_a_watcher_was_heard_of_does_not_undo_it() -> None:
    w = Watchers()
    w.started()
    stamp = w.stamp()  # the check reads pg_locks before the other process's lock...
    w.heard("ses_a")  # ...whose "w" arrives before the check's answer
    w.checked("ses_a", False, stamp)
    assert w.watched("ses_a")
    w.checked("ses_b", False, stamp)  # another session's "w" does not matter
    assert not w.watched("ses_b")


def test_the_bucket_of_a_session_is_the_same_in_every_process() -> None:
    assert bucket("ses_01m8vpktggga1cy4064p8gsh3t") == 32  # crc32: not Python's per-process salted hash
    assert {bucket(f"ses_{i}") for i in range(2000)} == set(range(BUCKETS))


# Operations on one process's knowledge, and the one-line rule they must keep: a session is
# unwatched only when a check answered "no" that was sent while the listener ran, with the
# listener running ever since and no "w" for the session heard since the check was sent.
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("start")),
        st.tuples(st.just("stop")),
        st.tuples(st.just("heard"), st.sampled_from(SESSIONS)),
        st.tuples(st.just("send"), st.sampled_from(SESSIONS)),
        st.tuples(st.just("answer"), st.integers(0, 5), st.booleans()),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(OPS)
def test_watchers_keep_no_only_from_a_check_that_nothing_has_overtaken(ops: list[tuple[Any, ...]]) -> None:
    w = Watchers()
    time = 0
    listening_since: int | None = None
    last_heard: dict[str, int] = {}
    sent: list[tuple[str, int | None, int]] = []  # session, stamp, time sent
    reference: dict[str, bool] = {}  # False: known unwatched
    for op in ops:
        time += 1
        if op[0] == "start":
            if listening_since is None:
                w.started()
                listening_since = time
        elif op[0] == "stop":
            w.stopped()
            listening_since = None
            reference.clear()
        elif op[0] == "heard":
            w.heard(op[1])
            last_heard[op[1]] = time
            reference.pop(op[1], None)
        elif op[0] == "send":
            sent.append((op[1], w.stamp(), time))
        elif sent:
            sid, stamp, at = sent.pop(op[1] % len(sent))
            w.checked(sid, op[2], stamp)
            if op[2]:
                reference.pop(sid, None)
            elif listening_since is not None and listening_since < at and last_heard.get(sid, 0) < at:
                reference[sid] = False
        for sid in SESSIONS:
            assert w.watched(sid) == reference.get(sid, True), (sid, op)


# -- the stores ----------------------------------------------------------------------------------


async def _until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.01)


def _count_sends(store: EventStore) -> list[int]:
    """The chunks each NOTIFY statement of ``store`` carries."""
    sent: list[int] = []
    original: Callable[[], Awaitable[None]] = store._send_chunks  # type: ignore[attr-defined]

    async def counting() -> None:
        sent.append(len(store._chunks))  # type: ignore[attr-defined]
        await original()

    store._send_chunks = counting  # type: ignore[attr-defined]
    return sent


async def _watch_locks(store: EventStore, of: EventStore) -> int:
    """The watch locks that ``of``'s lease connection holds, as ``store`` sees them."""
    pid = of.leases.backend_pid  # type: ignore[attr-defined]
    if pid is None:
        return 0
    row = await store._fetchone(  # type: ignore[attr-defined]
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND mode = 'ShareLock' AND pid = %s", (pid,)
    )
    return int(row[0])


@pytest.fixture
async def two(pg_url: str) -> Any:
    a, b = open_store(pg_url), open_store(pg_url)
    await a.migrate()
    try:
        yield a, b
    finally:
        await b.close()
        await a.close()


async def test_chunks_of_a_session_streamed_only_here_stay_here(two: tuple[EventStore, EventStore]) -> None:
    a, _ = two
    sid = (await a.create_session(preset="p")).id
    sent = _count_sends(a)
    reads: list[int] = []
    original_read = a.read

    async def counting_read(session_id: str, **kw: Any) -> Any:
        reads.append(1)
        return await original_read(session_id, **kw)

    async with a.subscribe(sid) as local:
        await _until(lambda: a.leases._watched == {sid})  # type: ignore[attr-defined]
        async with run_lease(a, sid):
            assert not a.leases.watchers.watched(sid)  # type: ignore[attr-defined]
            for text in ("Hel", "lo"):
                await a.publish_chunk(sid, {"messageId": "m", "text": text})
            a.read = counting_read  # type: ignore[method-assign]
            await a.append(sid, 0, [user("m1")])
            notes = [await local.next(timeout=5) for _ in range(3)]
            await asyncio.sleep(0.2)  # time for the append's own NOTIFY to come back
    assert [n.data["text"] for n in notes[:2]] == ["Hel", "lo"]  # type: ignore[index]
    assert notes[2].kind == "event" and notes[2].event.seq == 1  # type: ignore[union-attr]
    assert sent == []  # no NOTIFY: nobody else streams the session
    assert reads == []  # its own event notification is known by its origin, not read back


async def test_a_watcher_in_another_process_gets_the_chunks_from_the_start_or_from_its_arrival(two: tuple[EventStore, EventStore]) -> None:
    a, b = two
    sid = (await a.create_session(preset="p")).id
    sent = _count_sends(a)
    async with a.subscribe(sid):
        await _until(lambda: a.leases._watched == {sid})  # type: ignore[attr-defined]
        # Another process subscribes during a run that started unwatched: its "w" turns the chunks on.
        async with run_lease(a, sid):
            assert not a.leases.watchers.watched(sid)  # type: ignore[attr-defined]
            await a.publish_chunk(sid, {"messageId": "m", "text": "unseen"})
            async with b.subscribe(sid) as remote:
                await _until(lambda: a.leases.watchers.watched(sid))  # type: ignore[attr-defined]
                await a.publish_chunk(sid, {"messageId": "m", "text": "seen"})
                assert (await remote.next(timeout=5)).data == {"messageId": "m", "text": "seen"}
        # Already there when the next run starts: its lease statement tells.
        async with b.subscribe(sid) as remote:
            await _until(lambda: b.leases._watched == {sid})  # type: ignore[attr-defined]
            a.leases.watchers.checked(sid, False, a.leases.watchers.stamp())  # type: ignore[attr-defined]
            async with run_lease(a, sid):
                assert a.leases.watchers.watched(sid)  # type: ignore[attr-defined]
                await a.publish_chunk(sid, {"messageId": "m", "text": "again"})
                await a.append(sid, 0, [user("m1")])
                assert (await remote.next(timeout=5)).data == {"messageId": "m", "text": "again"}
                assert (await remote.next(timeout=5)).event.seq == 1  # type: ignore[union-attr]
        assert sent == [1, 1]
        # Gone: its lock goes with its last subscriber, and the next run sends nothing across.
        await _until(lambda: not b.leases._watched)  # type: ignore[attr-defined]
        assert await _watch_locks(a, b) == 0
        async with run_lease(a, sid):
            assert not a.leases.watchers.watched(sid)  # type: ignore[attr-defined]


async def test_a_subscriber_that_comes_and_goes_at_once_costs_no_statement(two: tuple[EventStore, EventStore]) -> None:
    a, b = two
    sid = (await a.create_session(preset="p")).id
    async with b.subscribe(sid):
        pass
    await asyncio.sleep(WATCH_DELAY * 3)
    assert b.leases.backend_pid is None  # type: ignore[attr-defined]  # the lease connection was never needed
    async with b.subscribe(sid), b.subscribe(sid):
        await _until(lambda: b.leases._watched == {sid})  # type: ignore[attr-defined]
        assert await _watch_locks(a, b) == 1


async def test_a_watch_lost_with_the_lease_connection_is_taken_again(two: tuple[EventStore, EventStore]) -> None:
    a, b = two
    sid, other = (await a.create_session(preset="p")).id, (await a.create_session(preset="p")).id
    async with b.subscribe(sid):
        await _until(lambda: b.leases._watched == {sid})  # type: ignore[attr-defined]
        async with run_lease(b, other) as lease:
            pid = b.leases.backend_pid  # type: ignore[attr-defined]
            await a._fetchone("SELECT pg_terminate_backend(%s)", (pid,))  # type: ignore[attr-defined]

            def lost() -> bool:
                try:
                    lease.check()
                except RpError:
                    return True
                return False

            await _until(lost)
        assert not b.leases._watched  # type: ignore[attr-defined]  # gone with the connection
        async with run_lease(b, sid):  # the next statement connects afresh, and the watch is taken again
            pass
        await _until(lambda: b.leases._watched == {sid})  # type: ignore[attr-defined]
        assert b.leases.backend_pid != pid and await _watch_locks(a, b) == 1  # type: ignore[attr-defined]


async def test_a_watch_whose_statement_finds_the_connection_dead_is_taken_on_a_new_one(two: tuple[EventStore, EventStore]) -> None:
    a, b = two
    first, second = (await a.create_session(preset="p")).id, (await a.create_session(preset="p")).id
    async with b.subscribe(first):
        await _until(lambda: b.leases._watched == {first})  # type: ignore[attr-defined]
        pid = b.leases.backend_pid  # type: ignore[attr-defined]
        await a._fetchone("SELECT pg_terminate_backend(%s)", (pid,))  # type: ignore[attr-defined]
        async with b.subscribe(second):  # its watch statement is the first to meet the dead connection
            await _until(lambda: b.leases._watched == {first, second})  # type: ignore[attr-defined]
            assert b.leases.backend_pid != pid and await _watch_locks(a, b) == len({bucket(first), bucket(second)})  # type: ignore[attr-defined]
