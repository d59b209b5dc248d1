"""One conformance suite for the event store, run on SQLite and on PostgreSQL (see conftest)."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
from typing import Any

import pytest

from roleplay.errors import ConflictError, NotFoundError, RpError, ValidationError
from roleplay.harness.events import MAX_EVENT_BYTES, EventDraft, validate_payload
from roleplay.harness.store import EventStore, SessionFilter, Snapshot, open_store
from roleplay.harness.store.migrations import LATEST

pytestmark = pytest.mark.anyio


def user(mid: str, text: str = "hi") -> EventDraft:
    return EventDraft("user/message", {"messageId": mid, "content": [{"type": "text", "text": text}]})


def assistant(mid: str, text: str = "hello") -> EventDraft:
    return EventDraft("assistant/message", {"messageId": mid, "content": [{"type": "text", "text": text}]})


async def test_migrate_is_idempotent_and_numbered(store: EventStore) -> None:
    assert await store.schema_version() == LATEST
    assert await store.migrate() == []


async def test_fresh_store_reports_schema_zero_then_applies_all(make_store) -> None:  # type: ignore[no-untyped-def]
    s = make_store()
    try:
        assert await s.schema_version() == 0
        assert await s.migrate() == list(range(1, LATEST + 1))
    finally:
        await s.close()


async def test_create_with_seed_and_read(store: EventStore) -> None:
    rec = await store.create_session(preset="roleplay", title="T", workspace="w", events=[user("m1"), assistant("m2")])
    assert rec.head_seq == 2 and rec.preset == "roleplay" and rec.title == "T" and rec.workspace == "w"
    events = await store.read(rec.id)
    assert [(e.seq, e.type, e.payload["messageId"]) for e in events] == [(1, "user/message", "m1"), (2, "assistant/message", "m2")]
    assert (await store.get_session(rec.id)).head_seq == 2


async def test_append_assigns_gapless_seqs(store: EventStore) -> None:
    rec = await store.create_session(preset="p")
    got = await store.append(rec.id, 0, [user("a"), assistant("b")])
    assert [e.seq for e in got] == [1, 2]
    got = await store.append(rec.id, 2, [user("c")])
    assert got[0].seq == 3
    assert [e.seq for e in await store.read(rec.id)] == [1, 2, 3]


async def test_short_and_long_batches_append_in_order(store: EventStore) -> None:
    """PostgreSQL sends a short batch as rows of parameters and a long one as arrays: the same
    rows either way, in order (seq and the global position), stored texts included."""
    rec = await store.create_session(preset="p")
    long_text = "長い" * 40_000  # stored as text parts (new ones first, then known ones)
    odd = "é\\'\"{}[],NULL"
    await store.append(rec.id, 0, [user("s0"), assistant("s1", long_text), user("s2", odd)])
    batch = [user(f"l{i}", long_text if i % 7 == 0 else f"text {i}") for i in range(45)]
    await store.append(rec.id, 3, batch)
    await store.append_at_head(rec.id, [user("t0", odd), assistant("t1", long_text)])
    events = await store.read(rec.id)
    assert [e.seq for e in events] == list(range(1, 51))
    assert [e.payload["messageId"] for e in events] == ["s0", "s1", "s2", *(f"l{i}" for i in range(45)), "t0", "t1"]
    texts = [e.payload["content"][0]["text"] for e in events]
    assert texts == ["hi", long_text, odd, *(b.payload["content"][0]["text"] for b in batch), odd, long_text]
    rows = [r for r in await store.dump() if r[0] == "event"]
    assert [r[2] for r in rows] == list(range(1, 51))  # global order is seq order


async def test_read_ranges(store: EventStore) -> None:
    rec = await store.create_session(preset="p", events=[user(f"m{i}") for i in range(10)])
    assert [e.seq for e in await store.read(rec.id, after_seq=7)] == [8, 9, 10]
    assert [e.seq for e in await store.read(rec.id, after_seq=2, until_seq=5)] == [3, 4, 5]
    assert [e.seq for e in await store.read(rec.id, after_seq=2, limit=2)] == [3, 4]
    assert await store.read(rec.id, after_seq=10) == []
    with pytest.raises(ValidationError) as exc:
        await store.read(rec.id, after_seq=-1)
    assert exc.value.code == "event.invalid_range"


async def _assert_unchanged(store: EventStore, before: list[Any]) -> None:
    assert await store.dump() == before


async def test_stale_append_conflicts_and_writes_nothing(store: EventStore) -> None:
    rec = await store.create_session(preset="p", events=[user("m1")])
    before = await store.dump()
    for stale in (0, 2, 7):
        with pytest.raises(ConflictError) as exc:
            await store.append(rec.id, stale, [assistant("x")])
        assert exc.value.code == "event.seq_conflict"
        assert exc.value.details["headSeq"] == 1
    await _assert_unchanged(store, before)


@pytest.mark.parametrize(
    "draft, code, pointer",
    [
        (EventDraft("no/such", {}), "event.unknown_type", "/type"),
        (EventDraft("user/message", {"messageId": "m"}), "event.invalid_payload", "/payload/content"),
        (
            EventDraft("user/message", {"messageId": "m", "content": [{"type": "text"}]}),
            "event.invalid_payload",
            "/payload/content/0/text/text",
        ),
        (EventDraft("user/message", {"messageId": "m", "content": [], "bogus": 1}), "event.invalid_payload", "/payload/bogus"),
        (EventDraft("turn/end", {"turnId": "t", "outcome": "exploded"}), "event.invalid_payload", "/payload/outcome"),
        (EventDraft("command/done", {"commandId": "c", "kind": "maybe"}), "event.invalid_payload", "/payload/kind"),
        (EventDraft("tool/result", "not an object"), "event.invalid_payload", "/payload"),  # type: ignore[arg-type]
    ],
)
async def test_bad_events_are_rejected_and_write_nothing(store: EventStore, draft: EventDraft, code: str, pointer: str) -> None:
    rec = await store.create_session(preset="p", events=[user("m1")])
    before = await store.dump()
    with pytest.raises(ValidationError) as exc:
        await store.append(rec.id, 1, [draft])
    assert exc.value.code == code
    assert exc.value.pointer == pointer
    await _assert_unchanged(store, before)


async def test_one_bad_event_in_a_batch_rejects_the_whole_batch(store: EventStore) -> None:
    rec = await store.create_session(preset="p")
    before = await store.dump()
    with pytest.raises(ValidationError) as exc:
        await store.append(rec.id, 0, [user("ok"), EventDraft("user/message", {"messageId": 5, "content": []})])
    assert exc.value.pointer == "/1/payload/messageId"
    await _assert_unchanged(store, before)


async def test_non_finite_numbers_are_rejected(store: EventStore) -> None:
    rec = await store.create_session(preset="p")
    before = await store.dump()
    with pytest.raises(ValidationError) as exc:
        await store.append(rec.id, 0, [EventDraft("command/run", {"commandId": "c", "name": "n", "args": {"x": float("nan")}})])
    assert exc.value.code == "event.invalid_payload"
    assert exc.value.pointer == "/payload/args/x"
    nested: dict = {}
    cur = nested
    for _ in range(200):
        cur["a"] = {}
        cur = cur["a"]
    with pytest.raises(ValidationError) as exc:
        await store.append(rec.id, 0, [EventDraft("command/run", {"commandId": "c", "name": "n", "args": nested})])
    assert exc.value.code == "event.too_deep"
    await _assert_unchanged(store, before)


# The limit is on the payload's whole JSON in UTF-8, escapes included, although a long text is
# stored as parts and the payload is then never serialised whole (a bound decides most appends).
@pytest.mark.parametrize("char, size", [("a", 1), ("中", 3), ("\n", 2), ("\x01", 6)])
async def test_a_payload_of_exactly_the_limit_is_stored_and_one_byte_more_refused(store: EventStore, char: str, size: int) -> None:
    framing = len(json.dumps(validate_payload("user/message", user("m", "").payload), ensure_ascii=False, separators=(",", ":")).encode())
    room = MAX_EVENT_BYTES - framing
    exact = char * (room // size) + "b" * (room % size)
    rec = await store.create_session(preset="p")
    appended = await store.append(rec.id, 0, [user("m", exact)])
    assert (await store.read(rec.id))[0].payload == appended[0].payload == {"messageId": "m", "content": [{"type": "text", "text": exact}]}
    before = await store.dump()
    with pytest.raises(ValidationError) as exc:
        await store.append(rec.id, 1, [user("m", exact + "b")])
    assert (exc.value.code, exc.value.pointer) == ("event.too_large", "/0/payload")
    await _assert_unchanged(store, before)


async def test_unknown_session(store: EventStore) -> None:
    await store.create_session(preset="p", events=[user("m1")])
    before = await store.dump()
    for call in (
        lambda: store.append("ses_nope", 0, [user("x")]),
        lambda: store.read("ses_nope"),
        lambda: store.get_session("ses_nope"),
        lambda: store.fork("ses_nope", 0),
        lambda: store.set_archived("ses_nope"),
        lambda: store.create_session(preset="p", parent_id="ses_nope"),
        lambda: store.create_session(preset="p", parent_id="ses_nope", events=[user("x")]),
    ):
        with pytest.raises(NotFoundError) as exc:
            await call()
        assert exc.value.code == "session.not_found"
    await _assert_unchanged(store, before)


async def test_fork_holds_prefix_and_leaves_source_untouched(store: EventStore) -> None:
    src = await store.create_session(preset="p", title="src", events=[user("m1"), assistant("m2"), user("m3")])
    before = await store.read(src.id)
    fork = await store.fork(src.id, 2)
    assert (fork.forked_from, fork.forked_at_seq, fork.head_seq, fork.title) == (src.id, 2, 2, "src")
    got = await store.read(fork.id)
    assert [(e.seq, e.type, e.payload) for e in got] == [(e.seq, e.type, e.payload) for e in before[:2]]
    await store.append(fork.id, 2, [assistant("f3")])
    assert await store.read(src.id) == before
    assert (await store.get_session(src.id)).head_seq == 3
    empty = await store.fork(src.id, 0)
    assert empty.head_seq == 0 and await store.read(empty.id) == []


@pytest.mark.parametrize("at", [4, 99, -1])
async def test_fork_past_the_end_is_rejected(store: EventStore, at: int) -> None:
    src = await store.create_session(preset="p", events=[user("m1"), user("m2"), user("m3")])
    before = await store.dump()
    with pytest.raises(ValidationError) as exc:
        await store.fork(src.id, at)
    assert exc.value.code == "session.fork_out_of_range"
    assert exc.value.details["headSeq"] == 3
    await _assert_unchanged(store, before)


async def test_list_archive_and_children(store: EventStore) -> None:
    a = await store.create_session(preset="p", title="a")
    b = await store.create_session(preset="p", title="b")
    child = await store.create_session(preset="writer", parent_id=a.id)
    assert {s.id for s in await store.list_sessions()} == {a.id, b.id, child.id}
    await store.set_archived(b.id)
    assert {s.id for s in await store.list_sessions()} == {a.id, child.id}
    assert [s.id for s in await store.list_sessions(SessionFilter(archived=True))] == [b.id]
    assert {s.id for s in await store.list_sessions(SessionFilter(archived=None))} == {a.id, b.id, child.id}
    assert [s.id for s in await store.list_sessions(SessionFilter(parent_id=a.id))] == [child.id]
    assert {s.id for s in await store.list_sessions(SessionFilter(roots_only=True))} == {a.id}
    restored = await store.set_archived(b.id, False)
    assert restored.archived is False


async def test_child_of_unknown_parent_is_rejected(store: EventStore) -> None:
    with pytest.raises(NotFoundError):
        await store.create_session(preset="writer", parent_id="ses_missing")
    assert await store.dump() == []


async def test_events_cannot_be_updated_or_deleted(store: EventStore) -> None:
    rec = await store.create_session(preset="p", events=[user("m1")])
    if store.dialect == "sqlite":
        import sqlite3

        conn = sqlite3.connect(store.path)  # type: ignore[attr-defined]
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute("UPDATE events SET type='x'")
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute("DELETE FROM events")
        conn.close()
    else:
        import psycopg

        with psycopg.connect(store.url, autocommit=True) as conn:  # type: ignore[attr-defined]
            with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
                conn.execute("UPDATE events SET type='x'")
            with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
                conn.execute("DELETE FROM events")
    assert len(await store.read(rec.id)) == 1


async def test_snapshots_keep_the_newest(store: EventStore) -> None:
    rec = await store.create_session(preset="p")
    await store.save_snapshot(Snapshot(rec.id, "x", 1, 5, {"n": 5}))
    await store.save_snapshot(Snapshot(rec.id, "x", 1, 3, {"n": 3}))  # older: ignored
    snap = await store.load_snapshot(rec.id, "x", 1)
    assert snap is not None and (snap.upto_seq, snap.state) == (5, {"n": 5})
    assert await store.load_snapshot(rec.id, "x", 2) is None
    assert await store.delete_snapshots(rec.id) == 1
    assert await store.load_snapshot(rec.id, "x", 1) is None


async def test_unicode_and_nested_payload_round_trip(store: EventStore) -> None:
    text = '你好，世界 🌸 "quoted" \\ back\nslash \u2028'
    rec = await store.create_session(preset="p")
    await store.append(rec.id, 0, [EventDraft("command/run", {"commandId": "c1", "name": "x", "args": {"t": text, "n": [1, {"a": None}]}})])
    (ev,) = await store.read(rec.id)
    assert ev.payload["args"] == {"t": text, "n": [1, {"a": None}]}


async def test_session_record_survives_reopen(make_store) -> None:  # type: ignore[no-untyped-def]
    s = make_store()
    await s.migrate()
    rec = await s.create_session(preset="p", events=[user("m1")])
    await s.close()
    s2 = make_store()
    try:
        assert (await s2.get_session(rec.id)).head_seq == 1
        with pytest.raises(RpError):
            await s2.create_session(preset="p", session_id=rec.id)
    finally:
        await s2.close()


# -- concurrency ----------------------------------------------------------------------------------


def _writer_process(url: str, session_id: str, n: int, worker: int) -> int:
    """Append ``n`` events one by one with CAS retries; return the number of conflicts seen."""

    async def run() -> int:
        store = open_store(url)
        conflicts = 0
        try:
            done = 0
            while done < n:
                head = await store.head(session_id)
                try:
                    await store.append(session_id, head, [user(f"w{worker}-{done}")])
                    done += 1
                except ConflictError:
                    conflicts += 1
        finally:
            await store.close()
        return conflicts

    return asyncio.run(run())


@pytest.mark.slow
async def test_four_processes_append_gapless(store: EventStore, store_url: str) -> None:
    rec = await store.create_session(preset="p")
    ctx = multiprocessing.get_context("spawn")
    loop = asyncio.get_running_loop()
    with ctx.Pool(4) as pool:
        results = [pool.apply_async(_writer_process, (store_url, rec.id, 100, w)) for w in range(4)]
        await loop.run_in_executor(None, lambda: [r.get(timeout=240) for r in results])
    events = await store.read(rec.id)
    assert [e.seq for e in events] == list(range(1, 401))
    ids = [e.payload["messageId"] for e in events]
    assert len(set(ids)) == 400
    for w in range(4):  # each writer's own appends stay in its order
        mine = [int(i.split("-")[1]) for i in ids if i.startswith(f"w{w}-")]
        assert mine == list(range(100))
    assert (await store.get_session(rec.id)).head_seq == 400


async def test_concurrent_appends_in_one_process(store: EventStore) -> None:
    rec = await store.create_session(preset="p")

    async def writer(w: int) -> None:
        done = 0
        while done < 25:
            head = await store.head(rec.id)
            try:
                await store.append(rec.id, head, [user(f"w{w}-{done}")])
                done += 1
            except ConflictError:
                await asyncio.sleep(0)

    await asyncio.gather(*(writer(w) for w in range(4)))
    assert [e.seq for e in await store.read(rec.id)] == list(range(1, 101))


async def test_append_at_head_queues_writers_instead_of_conflicting(store: EventStore, make_store) -> None:  # type: ignore[no-untyped-def]
    rec = await store.create_session(preset="p", events=[user("m0")])
    others = [make_store() for _ in range(4)]
    try:
        await asyncio.gather(*(s.append_at_head(rec.id, [user(f"w{w}-{i}")]) for i in range(10) for w, s in enumerate(others)))
    finally:
        for s in others:
            await s.close()
    events = await store.read(rec.id)
    assert [e.seq for e in events] == list(range(1, 42))
    assert len({e.payload["messageId"] for e in events}) == 41
    assert (await store.get_session(rec.id)).head_seq == 41


async def test_append_at_head_validates_first_and_knows_sessions(store: EventStore) -> None:
    rec = await store.create_session(preset="p", events=[user("m0")])
    before = await store.dump()
    with pytest.raises(ValidationError):
        await store.append_at_head(rec.id, [user("m1"), EventDraft("user/message", {"messageId": "m2"})])
    with pytest.raises(NotFoundError):
        await store.append_at_head("ses_missing", [user("m1")])
    assert await store.dump() == before
    [ev] = await store.append_at_head(rec.id, [assistant("a1")])
    assert ev.seq == 2


# -- large text: content-addressed parts (issue 12) --------------------------------------------------


def story_prompt(turns: int) -> str:
    """A Writer-like prompt: fixed sections, then one more exchange per turn, then the input."""
    head = "".join(f'<section name="Lore {i}">\n雾港的第{i}条资料：灯塔、铜钟与晨星号的旧事。\n</section>\n' for i in range(30))
    body = "".join(
        f"[User]\n我沿着第{i}号码头走去，询问沉船的事。\n\n[Writing reply]\n林汐看了你一眼，第{i}次把提灯举高。雾里传来钟声，她没有回答。\n\n"
        for i in range(turns)
    )
    return f'{head}<section name="Conversation">\n{body}</section>\n<section name="Current input">\n第{turns}轮\n</section>\n'


def stored_bytes(dump: list[tuple[Any, ...]]) -> int:
    """What the rows of a dump occupy: payloads and part references of events, compressed parts."""
    total = 0
    for row in dump:
        if row[0] == "event":
            # ('event', session, seq, type, v, payload, texts, created, payload_z)
            texts, packed = row[6], row[8]
            total += len(str(row[5]).encode("utf-8")) + len(texts or "") + len(packed or b"")
        elif row[0] == "text_part":
            total += len(row[4])
    return total


async def test_a_growing_prompt_stores_only_its_new_parts_and_reads_back_exactly(store: EventStore) -> None:
    parent = await store.create_session(preset="roleplay")
    prompts, children = [story_prompt(t) for t in range(1, 61)], []
    for prompt in prompts:
        child = await store.create_session(preset="rp-writer", parent_id=parent.id, events=[user("w", prompt)])
        children.append(child.id)
    verbatim = sum(len(p.encode("utf-8")) for p in prompts)
    stored = stored_bytes(await store.dump())
    # Verbatim storage grows with the square of the story; parts add about one exchange a turn.
    assert stored < verbatim / 8, (stored, verbatim)
    for child_id, prompt in zip(children, prompts):
        [event] = await store.read(child_id)
        assert event.payload["content"][0]["text"] == prompt


async def test_one_text_in_several_events_is_stored_once(store: EventStore) -> None:
    draft = "她把提灯放低，铜镜里映出雾中的船影。" * 80
    rec = await store.create_session(preset="p")
    await store.append(rec.id, 0, [assistant("a1", draft), user("u1", draft)])
    await store.append(rec.id, 2, [assistant("a2", draft)])
    parts = [row for row in await store.dump() if row[0] == "text_part"]
    assert sum(row[3] for row in parts) == len(draft.encode("utf-8"))
    assert [e.payload["content"][0]["text"] for e in await store.read(rec.id)] == [draft] * 3


async def test_forks_and_snapshots_keep_large_texts_exact(store: EventStore) -> None:
    big = story_prompt(20)
    rec = await store.create_session(preset="p", events=[user("u1", big), assistant("a1", big + "!")])
    fork = await store.fork(rec.id, 1)
    assert [e.payload["content"][0]["text"] for e in await store.read(fork.id)] == [big]
    state = {"nodes": [{"text": big}, {"text": "short"}], "title": big[:2000]}
    await store.save_snapshot(Snapshot(rec.id, "surface", 1, 2, state))
    snap = await store.load_snapshot(rec.id, "surface", 1)
    assert snap is not None and snap.state == state
    fork2 = await store.fork(rec.id, 2)
    snap2 = await store.load_snapshot(fork2.id, "surface", 1)
    assert snap2 is not None and snap2.state == state


async def test_a_growing_snapshot_stores_only_its_new_parts(store: EventStore) -> None:
    """A snapshot of a surface that grew by a few nodes shares the parts of the one before: it
    adds storage for the new nodes, not for the whole state again (issue 12)."""
    rec = await store.create_session(preset="p")
    nodes = [{"id": f"m{i}", "seq": i, "content": [{"type": "text", "text": f"灯塔第{i}夜，雾又来了。" * 10}]} for i in range(400)]

    def part_bytes(rows: list[Any]) -> int:
        return sum(len(row[4]) for row in rows if row[0] == "text_part")

    await store.save_snapshot(Snapshot(rec.id, "surface", 1, 400, {"nodes": nodes, "ignoredOps": 0}))
    first = part_bytes(await store.dump())
    grown = nodes + [{"id": f"n{i}", "seq": 400 + i, "content": [{"type": "text", "text": f"第{i}个新夜晚。" * 10}]} for i in range(5)]
    await store.save_snapshot(Snapshot(rec.id, "surface", 1, 405, {"nodes": grown, "ignoredOps": 0}))
    added = part_bytes(await store.dump()) - first
    assert 0 < added < first / 10, (added, first)
    snap = await store.load_snapshot(rec.id, "surface", 1)
    assert snap is not None and snap.upto_seq == 405 and snap.state == {"nodes": grown, "ignoredOps": 0}
    # A large string the events already store (a run's context block) costs the snapshot nothing.
    big = story_prompt(12)
    await store.append(rec.id, 0, [user("u-big", big)])
    before = len([row for row in await store.dump() if row[0] == "text_part"])
    with_big = grown + [{"id": "u-big", "seq": 406, "content": [{"type": "text", "text": big}]}]
    await store.save_snapshot(Snapshot(rec.id, "surface", 1, 406, {"nodes": with_big, "ignoredOps": 0}))
    new_parts = len([row for row in await store.dump() if row[0] == "text_part"]) - before
    assert new_parts <= 2, new_parts  # the end of the state's own text, not the big string's parts
    snap = await store.load_snapshot(rec.id, "surface", 1)
    assert snap is not None and snap.state == {"nodes": with_big, "ignoredOps": 0}
    assert await store.delete_snapshots(rec.id) == 1
    assert await store.load_snapshot(rec.id, "surface", 1) is None


async def test_a_failed_append_stores_no_parts(store: EventStore) -> None:
    rec = await store.create_session(preset="p", events=[user("m0")])
    before = await store.dump()
    with pytest.raises(ConflictError):
        await store.append(rec.id, 0, [user("m1", story_prompt(30))])
    assert await store.dump() == before


async def test_appends_that_bring_new_parts_to_a_missing_session_or_at_head_store_nothing_or_everything(store: EventStore) -> None:
    """Appends whose texts have new parts, next to parts this store knows: a missing session stores
    nothing; at head, every text reads back and a reader with no part ids kept agrees."""
    before = await store.dump()
    with pytest.raises(NotFoundError):
        await store.append_at_head("ses_missing", [user("m1", story_prompt(31))])
    with pytest.raises(NotFoundError):
        await store.append("ses_missing", 0, [user("m1", story_prompt(31))])
    assert await store.dump() == before
    rec = await store.create_session(preset="p", events=[user("m0", story_prompt(32))])
    texts = [story_prompt(32) + "尾", "short", story_prompt(33), story_prompt(32)]
    await store.append_at_head(rec.id, [user(f"m{i + 1}", t) for i, t in enumerate(texts)])
    assert [e.payload["content"][0]["text"] for e in await store.read(rec.id)] == [story_prompt(32), *texts]


async def test_events_written_before_text_parts_stay_readable(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import sqlite3

    from roleplay.harness.store.migrations import MIGRATIONS, MIGRATIONS_TABLE_SQLITE
    from roleplay.harness.store.sqlite import SQLiteStore

    path = tmp_path / "old.db"
    big = story_prompt(40)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(MIGRATIONS_TABLE_SQLITE)
    first_new = next(m.number for m in MIGRATIONS if m.name == "content-addressed event text parts")
    for m in MIGRATIONS[: first_new - 1]:
        for stmt in m.sqlite:
            conn.execute(stmt)
        conn.execute("INSERT INTO _migrations VALUES (?,?,?)", (m.number, m.name, "then"))
    payload = '{"messageId":"u1","content":[{"type":"text","text":' + json.dumps(big, ensure_ascii=False) + "}]}"
    conn.execute("INSERT INTO sessions(id, preset, head_seq, created_at, updated_at) VALUES ('ses_old','p',1,'t','t')")
    conn.execute(
        "INSERT INTO events(session_id, seq, type, v, payload, created_at) VALUES ('ses_old',1,'user/message',1,?,'t')", (payload,)
    )
    conn.close()
    store = SQLiteStore(path)
    try:
        assert await store.migrate() == list(range(first_new, LATEST + 1))
        assert [e.payload["content"][0]["text"] for e in await store.read("ses_old")] == [big]
        await store.append("ses_old", 1, [user("u2", big)])
        assert [e.payload["content"][0]["text"] for e in await store.read("ses_old")] == [big, big]
    finally:
        await store.close()


async def test_a_damaged_text_part_is_reported_not_returned(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import sqlite3
    import zlib

    from roleplay.harness.store.sqlite import SQLiteStore

    store = SQLiteStore(tmp_path / "rp.db")
    try:
        await store.migrate()
        rec = await store.create_session(preset="p", events=[user("u1", story_prompt(10))])
        conn = sqlite3.connect(tmp_path / "rp.db", isolation_level=None)
        conn.execute("DROP TRIGGER text_parts_no_update")
        part_id, data = conn.execute("SELECT id, data FROM text_parts ORDER BY id LIMIT 1").fetchone()
        damaged = zlib.decompress(data).decode("utf-8").replace("灯塔", "灯台")
        conn.execute("UPDATE text_parts SET data=? WHERE id=?", (zlib.compress(damaged.encode("utf-8")), part_id))
        conn.close()
        with pytest.raises(RpError) as exc:
            await store.read(rec.id)
        assert exc.value.code == "store.corrupt" and exc.value.pointer == "/content/0/text"
    finally:
        await store.close()


async def test_concurrent_writers_of_the_same_new_texts_store_each_part_once(store: EventStore, make_store) -> None:  # type: ignore[no-untyped-def]
    writers = [make_store() for _ in range(4)]
    try:
        for round_ in range(3):
            texts = [story_prompt(10 + round_) + "甲", story_prompt(10 + round_) + "乙"]
            sessions = [(await store.create_session(preset="p")).id for _ in writers]
            # Half the writers put the two texts in one order, half in the other.
            await asyncio.gather(
                *(
                    w.append(sid, 0, [user("a", texts[n % 2]), user("b", texts[1 - n % 2])])
                    for n, (w, sid) in enumerate(zip(writers, sessions))
                )
            )
            for n, sid in enumerate(sessions):
                assert [e.payload["content"][0]["text"] for e in await store.read(sid)] == [texts[n % 2], texts[1 - n % 2]]
    finally:
        for w in writers:
            await w.close()
    hashes = [row[2] for row in await store.dump() if row[0] == "text_part"]
    assert len(hashes) == len(set(hashes))


async def test_a_writer_that_knows_no_part_ids_reuses_the_stored_parts(store: EventStore, make_store) -> None:  # type: ignore[no-untyped-def]
    """Another process (no part ids kept) appends texts whose parts are partly stored already:
    the stored ones are referenced, only the new ones inserted, every text reads back exactly."""
    first = await store.create_session(preset="p", events=[user("a", story_prompt(20))])
    other = make_store()
    try:
        grown = story_prompt(22)
        second = await store.create_session(preset="p")
        await other.append(second.id, 0, [user("b", grown), user("c", story_prompt(20))])
        assert [e.payload["content"][0]["text"] for e in await store.read(second.id)] == [grown, story_prompt(20)]
        assert (await other.read(first.id))[0].payload["content"][0]["text"] == story_prompt(20)
    finally:
        await other.close()
    hashes = [row[2] for row in await store.dump() if row[0] == "text_part"]
    assert len(hashes) == len(set(hashes))


async def test_a_sqlite_append_looks_up_only_the_parts_it_has_not_stored(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A turn's Writer prompt is the last one plus a few parts: the store knows the ids of the
    parts it wrote, so it asks the file only about the others (issue 12)."""
    import sqlite3

    from roleplay.harness.store.sqlite import SQLiteStore
    from roleplay.harness.store.texts import split_parts

    store = SQLiteStore(tmp_path / "rp.db")
    try:
        await store.migrate()
        rec = await store.create_session(preset="p", events=[user("u1", story_prompt(150))])
        statements: list[str] = []

        def trace(conn: sqlite3.Connection) -> None:
            conn.set_trace_callback(statements.append)

        await store.execute_write(trace)
        await store.append(rec.id, 1, [user("u2", story_prompt(151))])
        await store.execute_write(lambda conn: conn.set_trace_callback(None))
        lookups = [sql for sql in statements if sql.startswith("SELECT sha256, id FROM text_parts")]
        parts = split_parts(story_prompt(151))
        assert len(parts) > 20 and sum(sql.lower().count("x'") for sql in lookups) <= 3
        assert [e.payload["content"][0]["text"] for e in await store.read(rec.id)] == [story_prompt(150), story_prompt(151)]
    finally:
        await store.close()


async def test_the_part_ids_of_a_write_that_failed_are_not_kept(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Parts inserted by a transaction that then failed are rolled back with it: a later write of
    the same text stores them again instead of pointing at ids that no longer hold them."""
    import sqlite3

    from roleplay.harness.store.sqlite import SQLiteStore

    path = tmp_path / "rp.db"
    store = SQLiteStore(path)
    try:
        await store.migrate()
        rec = await store.create_session(preset="p", events=[user("u1", story_prompt(5))])
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("CREATE TRIGGER refuse BEFORE INSERT ON events BEGIN SELECT RAISE(ABORT, 'refused'); END")
        with pytest.raises(sqlite3.IntegrityError):
            await store.append(rec.id, 1, [user("u2", story_prompt(70))])
        conn.execute("DROP TRIGGER refuse")
        conn.close()
        await store.append(rec.id, 1, [user("u2", story_prompt(80)), user("u3", story_prompt(70))])
        texts_back = [e.payload["content"][0]["text"] for e in await store.read(rec.id)]
        assert texts_back == [story_prompt(5), story_prompt(80), story_prompt(70)]
    finally:
        await store.close()


async def test_the_wal_file_stays_small_after_a_burst(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A burst of writes (a long story's turn, a snapshot) must not leave the WAL at its size."""
    from roleplay.harness.store.sqlite import WAL_SIZE_LIMIT, SQLiteStore

    store = SQLiteStore(tmp_path / "w.db")
    await store.migrate()
    try:
        rec = await store.create_session(preset="p")
        head = 0
        for i in range(40):  # about 8 MB of distinct text
            events = await store.append(
                rec.id, head, [user(f"m{i}", f"{i} " + "".join(chr(0x4E00 + (i * 977 + j) % 20000) for j in range(70_000)))]
            )
            head = events[-1].seq
        wal = tmp_path / "w.db-wal"
        assert not wal.exists() or wal.stat().st_size <= 2 * WAL_SIZE_LIMIT, wal.stat().st_size
    finally:
        await store.close()


async def test_payloads_are_stored_compressed_and_read_back_exactly(store: EventStore) -> None:
    """A payload worth compressing is stored as compressed bytes (``{}`` in its JSON column) and
    read back as appended; small ones stay plain JSON (issue 12: a long story's log is mostly
    small payloads whose keys repeat)."""
    rec = await store.create_session(preset="p")
    long = "The lamp room smells of oil and salt; she counts the steps again. " * 4
    events = await store.append(rec.id, 0, [user("u1", long), assistant("a1", "short")])
    rows = [row for row in await store.dump() if row[0] == "event"]
    assert rows[0][5] in ("{}", {}) and rows[0][8] is not None and len(bytes(rows[0][8])) < len(long)
    assert rows[1][8] is None and "short" in str(rows[1][5])
    assert [e.payload for e in await store.read(rec.id)] == [e.payload for e in events]
    fork = await store.fork(rec.id, 2)
    assert [e.payload for e in await store.read(fork.id)] == [e.payload for e in events]


def test_a_damaged_compressed_payload_is_a_store_fault() -> None:
    from roleplay.harness.store.texts import compress_payload, decompress_payload

    text = json.dumps({"messageId": "m", "content": [{"type": "text", "text": "灯塔" * 200}]}, ensure_ascii=False)
    packed = compress_payload(text)
    assert packed is not None and decompress_payload(packed, where="s#1") == text
    with pytest.raises(RpError) as exc:
        decompress_payload(packed[:-3] + b"xyz", where="s#1")
    assert exc.value.code == "store.corrupt"
    with pytest.raises(RpError):
        decompress_payload(b"\x09" + packed[1:], where="s#1")


async def test_a_postgres_append_compresses_each_new_part_once(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bytes of the new parts an append sent are the ones kept for this store's reads: not
    compressed a second time, and read back the same from memory as from the table."""
    from roleplay.harness.store import pg_parts, postgres

    store, other = open_store(pg_url), open_store(pg_url)
    await store.migrate()
    try:
        rec = await store.create_session(preset="p")
        compressed: list[str] = []
        original = postgres.compress

        def counting(text: str) -> bytes:
            compressed.append(text)
            return original(text)

        monkeypatch.setattr(postgres, "compress", counting)
        monkeypatch.setattr(pg_parts, "compress", counting)  # the new parts' compression
        await store.append(rec.id, 0, [user("u1", story_prompt(30))])
        assert len(compressed) > 5 and len(compressed) == len(set(compressed))
        for s in (store, other):  # kept bytes, then the table's
            assert [e.payload["content"][0]["text"] for e in await s.read(rec.id)] == [story_prompt(30)]
    finally:
        await other.close()
        await store.close()


async def test_a_postgres_append_compresses_megabytes_of_new_parts_off_the_event_loop(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh process's first Writer prompt of a long story is all new parts to it: they are
    compressed on a thread (the event loop is not held), and read back the same."""
    import threading

    from roleplay.harness.store import pg_parts

    store = open_store(pg_url)
    await store.migrate()
    try:
        rec = await store.create_session(preset="p")
        threads: set[bool] = set()
        original = pg_parts.compress

        def recording(text: str) -> bytes:
            threads.add(threading.current_thread() is threading.main_thread())
            return original(text)

        monkeypatch.setattr(pg_parts, "compress", recording)  # the new parts' compression
        big = story_prompt(3500)
        assert len(big) >= 1 << 18
        await store.append(rec.id, 0, [user("u1", big)])
        assert threads == {False}
        assert [e.payload["content"][0]["text"] for e in await store.read(rec.id)] == [big]
    finally:
        await store.close()
