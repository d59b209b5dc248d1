"""Snapshot writes off the event loop (issue 16): the same stored bytes as before, and a state that
later events folded meanwhile cannot change."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import threading
from typing import Any, Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roleplay.harness.events import Event, EventDraft
from roleplay.harness.projections import Projection, ProjectionCache, fold, roundtrip
from roleplay.harness.store import EventStore
from roleplay.harness.store import base as store_base
from roleplay.harness.store import texts
from roleplay.harness.store.base import Snapshot, prepare_snapshot
from roleplay.harness.surface import surface_projection

# -- the stored bytes: property-tested against the implementations they replace ---------------------


def reference_lines(value: Any, depth: int) -> str:
    dumps = json.dumps
    if depth < 2 and isinstance(value, dict) and value:
        inner = ",\n".join(f"{dumps(k, ensure_ascii=False)}:{reference_lines(v, depth + 1)}" for k, v in value.items())
        return "{\n" + inner + "\n}"
    if depth < 2 and isinstance(value, list) and value:
        return "[\n" + ",\n".join(reference_lines(v, depth + 1) for v in value) + "\n]"
    return dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def reference_externalise(state: Any) -> texts.Externalised:
    found: texts.LargeStrings = []
    if not isinstance(state, str):
        texts._find_large(state, (), found)
    rest = texts._blank(state, {path for path, _ in found}) if found else state
    return texts.Externalised(json.dumps(texts.SNAPSHOT_TEXT_MARKER), *texts._split_texts([((), reference_lines(rest, 0)), *found]))


def reference_prepare(state: Any) -> tuple[str, texts.Externalised | None]:
    text = json.dumps(state, ensure_ascii=False, separators=(",", ":"))
    if len(text) < texts.MIN_EXTERNAL_BYTES:
        return text, None
    external = reference_externalise(state)
    return external.stored_json, external


def same(a: texts.Externalised | None, b: texts.Externalised | None) -> bool:
    """Equal, the order of the parts included (a store inserts new parts in that order)."""
    if a is None or b is None:
        return a is b
    return (a.stored_json, a.texts, list(a.parts.items())) == (b.stored_json, b.texts, list(b.parts.items()))


# Long strings with and without line breaks, wide characters and escapes: sizes around every
# threshold (a large string, a part, the inline limit).
long_text = st.builds(
    lambda unit, n: unit * n,
    st.sampled_from(["a", "line\n", "é", "日本\n", "😀", 'q"\\\t', "\u2028", "x" * 37 + "\n"]),
    st.integers(min_value=0, max_value=1400),
)
scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=40) | long_text
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=8) | st.dictionaries(st.text(max_size=8), children, max_size=6),
    max_leaves=40,
)
surfaces = st.builds(
    lambda nodes, ignored: {"nodes": nodes, "ignoredOps": ignored},
    st.lists(st.dictionaries(st.sampled_from(["id", "role", "seq", "content"]), scalars | st.lists(scalars, max_size=3)), max_size=30),
    st.integers(min_value=0, max_value=3),
)


@settings(max_examples=300, deadline=None)
@given(state=json_values | surfaces)
def test_snapshot_text_is_the_recursive_text(state: Any) -> None:
    assert texts.snapshot_text(state) == reference_lines(state, 0)


@settings(max_examples=200, deadline=None)
@given(state=json_values | surfaces)
def test_snapshots_are_prepared_as_before(state: Any) -> None:
    """The whole state is no longer serialised to be measured, the root text is joined once and
    hashed in slices: the row and its parts are the same, in the same order."""
    stored, external = asyncio.run(prepare_snapshot(Snapshot("s", "p", 1, 1, state)))
    ref_stored, ref_external = reference_prepare(state)
    assert stored == ref_stored and same(external, ref_external)
    if not isinstance(state, str):
        assert same(texts.externalise_snapshot(state), reference_externalise(state))


@settings(max_examples=200, deadline=None)
@given(text=st.lists(st.sampled_from(["a", "é", "日", "😀", "\n", "\u2028"]), max_size=200).map("".join), slice_chars=st.integers(1, 9))
def test_a_text_hashed_in_slices_has_its_sha256(text: str, slice_chars: int) -> None:
    with pytest.MonkeyPatch.context() as m:
        m.setattr(texts, "_HASH_SLICE_CHARS", slice_chars)
        assert texts._sha256_in_slices(text) == hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_a_small_state_is_measured_without_serialising_a_large_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only about ``MIN_EXTERNAL_BYTES`` of a large state are serialised to find it large."""
    pieces = []
    real = store_base._STATE_JSON.iterencode

    def counting(state: Any, _one_shot: bool = False) -> Any:
        for piece in real(state, _one_shot):
            pieces.append(piece)
            yield piece

    monkeypatch.setattr(store_base._STATE_JSON, "iterencode", counting)
    big = {"nodes": [{"id": f"m{i}", "text": "x" * 100} for i in range(10_000)]}
    assert store_base._small_state_json(big) is None
    assert sum(map(len, pieces)) < 2 * texts.MIN_EXTERNAL_BYTES
    small = {"nodes": [{"id": "m1", "text": "é"}], "ignoredOps": 0}
    assert store_base._small_state_json(small) == json.dumps(small, ensure_ascii=False, separators=(",", ":"))


# -- the race: a snapshot holds the events up to its seq, whatever is folded while it is written ----


def user(mid: str, text: str = "") -> EventDraft:
    # Long enough that the state is prepared on a thread (at least MIN_EXTERNAL_BYTES of JSON).
    return EventDraft("user/message", {"messageId": mid, "content": [{"type": "text", "text": text or mid + " " + "w" * 200}]})


def regenerate(mid: str, target: str) -> EventDraft:
    """A rewrite: drops the target node and those after it in place (``del nodes[at:]``)."""
    return EventDraft(
        "user/message",
        {
            "messageId": mid,
            "content": [{"type": "text", "text": mid}],
            "surfaceOp": {"op": "replace", "range": "suffix", "targetMessageId": target},
        },
    )


def _log_apply(state: dict[str, Any], event: Event) -> dict[str, Any]:
    state["items"].append({"seq": event.seq, "payload": event.payload})
    state["items"][0]["count"] = len(state["items"])  # an element changed in place, too
    return state


# Without a copy hook: a deep copy keeps the state being written as it was.
log_projection = Projection("test/log", 1, lambda: {"items": []}, _log_apply)


class Gate:
    """Holds the snapshot's preparation on its thread until released."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, fail: bool = False) -> None:
        self.entered, self.go, self.fail = threading.Event(), threading.Event(), fail
        real = store_base.externalise_snapshot

        def gated(state: Any) -> texts.Externalised:
            self.entered.set()
            self.go.wait(10)
            if self.fail:
                raise OSError("the disk is full")
            return real(state)

        monkeypatch.setattr(store_base, "externalise_snapshot", gated)

    async def reached(self) -> None:
        for _ in range(1000):
            if self.entered.is_set():
                return
            await asyncio.sleep(0.01)
        raise AssertionError("the snapshot was never prepared")


async def rebuilt(store: EventStore, session_id: str, projection: Projection, upto: int) -> Any:
    return roundtrip(fold(projection, await store.read(session_id, until_seq=upto)))


async def stored_snapshot(store: EventStore, session_id: str, projection: Projection) -> Snapshot:
    for _ in range(1000):
        snap = await store.load_snapshot(session_id, projection.name, projection.version)
        if snap is not None:
            return snap
        await asyncio.sleep(0.01)
    raise AssertionError("no snapshot was written")


async def fold_later(how: str, cache: ProjectionCache, store: EventStore, session_id: str, projection: Projection) -> None:
    """Append after the snapshot's seq and fold into the cached state: as the appending process
    does (``advance``, the events it has just appended) or as a load does (read back)."""
    head = await store.head(session_id)
    events = await store.append(session_id, head, [user("late1"), user("late2"), regenerate("late3", "m3")])
    if how == "advance":
        cache.advance(session_id, head, [dataclasses.replace(e, payload=roundtrip(e.payload)) for e in events])
    else:
        await cache.load(store, session_id, projection)


PROJECTIONS: list[Projection] = [surface_projection, log_projection]


@pytest.mark.anyio
@pytest.mark.parametrize("projection", PROJECTIONS, ids=lambda p: p.name)
@pytest.mark.parametrize("how", ["advance", "load"])
async def test_a_snapshot_holds_no_event_folded_while_it_is_written(
    store: EventStore, monkeypatch: pytest.MonkeyPatch, projection: Projection, how: str
) -> None:
    rec = await store.create_session(preset="p", events=[user(f"m{i}") for i in range(10)])
    cache = ProjectionCache(snapshot_every=5)
    await cache.load(store, rec.id, projection)  # cached, and a first snapshot at 10
    await store.append(rec.id, 10, [user(f"n{i}") for i in range(5)])
    gate = Gate(monkeypatch)
    loading = asyncio.create_task(cache.load(store, rec.id, projection))  # folds to 15: a snapshot is due
    await gate.reached()
    await fold_later(how, cache, store, rec.id, projection)  # the state kept meanwhile moves on to 18
    gate.go.set()
    loaded = await loading
    assert loaded.upto_seq == 15 and roundtrip(loaded.state) == await rebuilt(store, rec.id, projection, 15)
    snap = await stored_snapshot(store, rec.id, projection)
    assert snap.upto_seq == 15 and snap.state == await rebuilt(store, rec.id, projection, 15)
    now = await cache.load(store, rec.id, projection)
    assert now.upto_seq == 18 and roundtrip(now.state) == await rebuilt(store, rec.id, projection, 18)


@pytest.mark.anyio
@pytest.mark.parametrize("projection", PROJECTIONS, ids=lambda p: p.name)
async def test_a_cancelled_loader_leaves_its_snapshot_to_be_written_as_it_was(
    store: EventStore, monkeypatch: pytest.MonkeyPatch, projection: Projection
) -> None:
    """The thread preparing the snapshot cannot be stopped: the state stays as it was until it
    ends, though no one waits for it any more."""
    rec = await store.create_session(preset="p", events=[user(f"m{i}") for i in range(10)])
    cache = ProjectionCache(snapshot_every=5)
    gate = Gate(monkeypatch)
    loading = asyncio.create_task(cache.load(store, rec.id, projection))  # a first load: a snapshot at 10
    await gate.reached()
    loading.cancel()
    with pytest.raises(asyncio.CancelledError):
        await loading
    await fold_later("advance", cache, store, rec.id, projection)
    gate.go.set()
    snap = await stored_snapshot(store, rec.id, projection)
    assert snap.upto_seq == 10 and snap.state == await rebuilt(store, rec.id, projection, 10)
    now = await cache.load(store, rec.id, projection)
    assert now.upto_seq == 13 and roundtrip(now.state) == await rebuilt(store, rec.id, projection, 13)


@pytest.mark.anyio
async def test_a_failed_snapshot_is_due_again_at_the_next_load(store: EventStore, monkeypatch: pytest.MonkeyPatch) -> None:
    rec = await store.create_session(preset="p", events=[user(f"m{i}") for i in range(10)])
    cache = ProjectionCache(snapshot_every=5)
    gate = Gate(monkeypatch, fail=True)
    gate.go.set()
    with pytest.raises(OSError):
        await cache.load(store, rec.id, surface_projection)
    assert await store.load_snapshot(rec.id, surface_projection.name, surface_projection.version) is None
    gate.fail = False
    loaded = await cache.load(store, rec.id, surface_projection)
    assert loaded.folded == 0  # the entry was kept: nothing folded twice
    snap = await stored_snapshot(store, rec.id, surface_projection)
    assert snap.upto_seq == 10 and snap.state == await rebuilt(store, rec.id, surface_projection, 10)


def test_the_surface_copy_is_unchanged_by_later_events() -> None:
    """``copy_surface`` copies the node list only: every way ``apply_surface`` changes a surface
    (appends, edits, deletes, regenerations, compactions) leaves the original as it was."""
    drafts: list[tuple[str, dict[str, Any]]] = [("user/message", user(f"m{i}").payload) for i in range(6)]
    events = [Event("s", i + 1, t, p, "", 1) for i, (t, p) in enumerate(drafts)]
    state = fold(surface_projection, events)
    before = roundtrip(state)
    copy: Callable[[Any], Any] = surface_projection.copy  # type: ignore[assignment]
    later = [
        ("user/message", user("x").payload),
        ("user/message", {**user("e").payload, "surfaceOp": {"op": "replace", "range": "node", "targetMessageId": "m2"}}),
        ("assistant/message", {"messageId": "d", "content": [], "surfaceOp": {"op": "replace", "range": "node", "targetMessageId": "m1"}}),
        ("user/message", regenerate("r", "m4").payload),
        ("user/message", {**user("g").payload, "surfaceOp": {"op": "replace", "range": "node", "targetMessageId": "ghost"}}),
        ("compaction/checkpoint", {"checkpointId": "c1", "summary": "so far", "sourceEventSeqs": [3]}),
    ]
    moved = copy(state)
    for i, (t, p) in enumerate(later):
        moved = surface_projection.apply(moved, Event("s", 7 + i, t, p, "", 1))
    assert roundtrip(state) == before and moved["ignoredOps"] == 1


# -- reading: the root text parsed an element at a time ----------------------------------------------


def loads_outcome(parse: Callable[[str], Any], text: str) -> tuple[bool, str]:
    """What ``parse`` makes of ``text``: its value (by repr: 1, 1.0 and True differ) or that it fails."""
    try:
        return True, repr(parse(text))
    except ValueError:
        return False, ""


@settings(max_examples=300, deadline=None)
@given(state=json_values | surfaces)
def test_a_snapshot_text_parses_as_json_loads_parses_it(state: Any) -> None:
    text = texts.snapshot_text(state)
    assert repr(texts.parse_snapshot_text(text)) == repr(json.loads(text))


@settings(max_examples=500, deadline=None)
@given(
    state=json_values | surfaces,
    edits=st.lists(
        st.tuples(st.integers(min_value=0), st.integers(0, 3), st.sampled_from(["\n", ",", ":", "{", "}", "[", "]", '"', "1", " "])),
        max_size=3,
    ),
)
def test_any_other_text_parses_or_fails_as_json_loads(state: Any, edits: list[tuple[int, int, str]]) -> None:
    """A damaged or differently shaped text: the same value, or a failure, as ``json.loads``."""
    text = texts.snapshot_text(state)
    for at, cut, insert in edits:
        at %= len(text) + 1
        text = text[:at] + insert + text[at + cut :]
    assert loads_outcome(texts.parse_snapshot_text, text) == loads_outcome(json.loads, text)
