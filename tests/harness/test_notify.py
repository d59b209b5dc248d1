"""Live notifications: appended events and transient chunks reach subscribers in order."""

from __future__ import annotations

import asyncio
import multiprocessing

import pytest

from roleplay.errors import NotFoundError
from roleplay.harness.events import EventDraft
from roleplay.harness.store import EventStore, open_store

pytestmark = pytest.mark.anyio


def user(mid: str) -> EventDraft:
    return EventDraft("user/message", {"messageId": mid, "content": [{"type": "text", "text": mid}]})


async def test_subscriber_gets_appended_events_and_chunks_in_order(store: EventStore) -> None:
    rec = await store.create_session(preset="p", events=[user("old")])
    async with store.subscribe(rec.id) as sub:
        await store.publish_chunk(rec.id, {"messageId": "a1", "text": "Hel"})
        await store.append(rec.id, 1, [user("m2"), user("m3")])
        await store.publish_chunk(rec.id, {"messageId": "a1", "text": "lo"})
        await store.append(rec.id, 3, [user("m4")])
        got = [await sub.next(timeout=5) for _ in range(5)]
    kinds = [(n.kind, n.event.seq if n.event else n.data["text"]) for n in got]  # type: ignore[index]
    assert kinds == [("chunk", "Hel"), ("event", 2), ("event", 3), ("chunk", "lo"), ("event", 4)]


async def test_resume_after_seq_replays_the_backlog_first(store: EventStore) -> None:
    rec = await store.create_session(preset="p", events=[user(f"m{i}") for i in range(5)])
    async with store.subscribe(rec.id, after_seq=2) as sub:
        await store.append(rec.id, 5, [user("m5")])
        seqs = [(await sub.next(timeout=5)).event.seq for _ in range(4)]  # type: ignore[union-attr]
    assert seqs == [3, 4, 5, 6]


async def test_subscribers_are_isolated_per_session(store: EventStore) -> None:
    a = await store.create_session(preset="p")
    b = await store.create_session(preset="p")
    async with store.subscribe(a.id) as sub:
        await store.append(b.id, 0, [user("b1")])
        await store.append(a.id, 0, [user("a1")])
        note = await sub.next(timeout=5)
    assert note.event is not None and note.event.session_id == a.id and note.event.payload["messageId"] == "a1"


async def test_gap_is_filled_from_the_log(store: EventStore) -> None:
    rec = await store.create_session(preset="p")
    async with store.subscribe(rec.id) as sub:
        # Events written by a store object that does not share this broker (another process,
        # in effect) reach this subscriber only when a later event reveals the gap.
        other = type(store).__new__(type(store))
        other.__dict__.update(store.__dict__)
        from roleplay.harness.notify import Broker

        other.broker = Broker(other)
        await other.append(rec.id, 0, [user("hidden1"), user("hidden2")])
        await store.append(rec.id, 2, [user("seen")])
        seqs = [(await sub.next(timeout=5)).event.seq for _ in range(3)]  # type: ignore[union-attr]
    assert seqs == [1, 2, 3]


async def test_take_ready_hands_over_what_has_arrived_without_waiting(store: EventStore) -> None:
    rec = await store.create_session(preset="p")
    async with store.subscribe(rec.id) as sub:
        assert sub.take_ready() == []  # nothing here yet: returns at once, never waits
        await store.append(rec.id, 0, [user("m1"), user("m2")])
        await store.publish_chunk(rec.id, {"messageId": "a1", "text": "Hi"})
        first = await sub.next(timeout=5)
        ready = sub.take_ready()
        got = [first, *ready]
        assert [(n.kind, n.event.seq if n.event else n.data["text"]) for n in got] == [  # type: ignore[index]
            ("event", 1),
            ("event", 2),
            ("chunk", "Hi"),
        ]
        assert sub.take_ready() == []


async def test_take_ready_stops_at_a_gap_and_the_next_call_fills_it(store: EventStore) -> None:
    rec = await store.create_session(preset="p")
    async with store.subscribe(rec.id) as sub:
        from roleplay.harness.notify import Broker

        other = type(store).__new__(type(store))
        other.__dict__.update(store.__dict__)
        other.broker = Broker(other)  # a writer whose events this subscriber is not told of
        await store.append(rec.id, 0, [user("m1")])
        await other.append(rec.id, 1, [user("hidden")])
        await store.append(rec.id, 2, [user("m3")])
        await store.publish_chunk(rec.id, {"messageId": "a1", "text": "late"})
        ready = sub.take_ready()
        assert [n.event.seq for n in ready if n.event] == [1]  # seq 3 waits behind the missing 2
        rest = [await sub.next(timeout=5) for _ in range(3)]
    assert [(n.kind, n.event.seq if n.event else n.data["text"]) for n in rest] == [  # type: ignore[index]
        ("event", 2),
        ("event", 3),
        ("chunk", "late"),
    ]


async def test_subscribing_to_an_unknown_session_fails(store: EventStore) -> None:
    with pytest.raises(NotFoundError):
        async with store.subscribe("ses_missing"):
            pass
    with pytest.raises(NotFoundError):
        async with store.subscribe("ses_missing", after_seq=0):
            pass
    assert not store.broker.has_subscribers("ses_missing")  # not left registered


def _remote_writer(url: str, session_id: str, start: int) -> None:
    async def run() -> None:
        store = open_store(url)
        try:
            await store.publish_chunk(session_id, {"messageId": "a", "text": "x" * 20000})  # split under the NOTIFY cap
            await store.append(session_id, start, [user("r1"), user("r2")])
            await store.publish_chunk(session_id, {"messageId": "a", "text": "done"})
        finally:
            await store.close()

    asyncio.run(run())


async def test_postgres_delivers_across_processes(pg_url: str) -> None:
    store = open_store(pg_url)
    await store.migrate()
    try:
        await _check_cross_process(store, pg_url)
    finally:
        await store.close()


async def _check_cross_process(store: EventStore, store_url: str) -> None:
    rec = await store.create_session(preset="p", events=[user("m1")])
    async with store.subscribe(rec.id) as sub:
        proc = multiprocessing.get_context("spawn").Process(target=_remote_writer, args=(store_url, rec.id, 1))
        proc.start()
        await asyncio.get_running_loop().run_in_executor(None, proc.join, 60)
        assert proc.exitcode == 0
        notes = []
        while True:
            note = await sub.next(timeout=10)
            notes.append(note)
            if note.kind == "chunk" and note.data == {"messageId": "a", "text": "done"}:
                break
    chunks = [n.data["text"] for n in notes if n.kind == "chunk"]  # type: ignore[index]
    assert "".join(chunks[:-1]) == "x" * 20000 and len(chunks) > 2
    assert [n.event.seq for n in notes if n.kind == "event"] == [2, 3]  # type: ignore[union-attr]
    # Order across kinds is preserved: the big chunk before the events, "done" after them.
    kinds = [n.kind for n in notes]
    assert kinds.index("event") > 0 and kinds[-1] == "chunk"
    assert max(i for i, k in enumerate(kinds) if k == "event") < len(kinds) - 1


async def test_postgres_sends_a_burst_of_chunks_in_order_and_in_one_statement(pg_url: str) -> None:
    """Chunks published without a pause go out in one statement; another store's subscriber
    gets every one of them (identical ones too) in order, and before the event appended next."""
    writer, reader = open_store(pg_url), open_store(pg_url)
    await writer.migrate()
    try:
        rec = await writer.create_session(preset="p")
        texts = [".", ".", "Hel", "lo", ".", "x" * 20000]
        async with reader.subscribe(rec.id) as sub:
            sent: list[int] = []
            original = writer._send_chunks  # type: ignore[attr-defined]

            async def counting() -> None:
                sent.append(len(writer._chunks))  # type: ignore[attr-defined]
                await original()

            writer._send_chunks = counting  # type: ignore[attr-defined]
            for text in texts:
                await writer.publish_chunk(rec.id, {"messageId": "a", "text": text})
            await writer.append(rec.id, 0, [user("m1")])
            notes = [await sub.next(timeout=10)]
            while notes[-1].kind == "chunk":
                notes.append(await sub.next(timeout=10))
        assert len(sent) == 1 and sent[0] > len(texts)  # one send; the long text went in several parts
        chunks = [n.data["text"] for n in notes if n.kind == "chunk"]  # type: ignore[index]
        assert chunks[:5] == texts[:5] and "".join(chunks[5:]) == texts[5]
        assert notes[-1].kind == "event" and notes[-1].event.seq == 1  # type: ignore[union-attr]
    finally:
        await reader.close()
        await writer.close()
