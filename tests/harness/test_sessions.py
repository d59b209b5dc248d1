"""SessionService: creation with seed and setup commands, validated replacements, commands."""

from __future__ import annotations

import asyncio
import copy
import random
from typing import Any, Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roleplay.errors import ConflictError, NotFoundError, RpError, ValidationError
from roleplay.harness.commands import CommandContext, CommandRegistry, CommandSpec, successful_commands
from roleplay.harness.events import Event, EventDraft
from roleplay.harness.sessions import SessionService
from roleplay.harness.store import EventStore
from roleplay.harness.surface import SURFACE, apply_surface, find_node

pytestmark = pytest.mark.anyio


def text_msg(role: str, mid: str, text: str, op: dict[str, Any] | None = None) -> EventDraft:
    payload: dict[str, Any] = {"messageId": mid, "content": [{"type": "text", "text": text}] if text else []}
    if op:
        payload["surfaceOp"] = op
    return EventDraft(f"{role}/message", payload)


def set_title(args: dict[str, Any], ctx: CommandContext) -> dict[str, Any]:
    title = args.get("title")
    if not isinstance(title, str) or not title:
        raise ValidationError("demo.bad_title", "title must be a non-empty string", pointer="/title")
    return {"title": title.strip()}


@pytest.fixture
def service(store: EventStore) -> SessionService:
    commands = CommandRegistry()
    commands.register("demo-set-title", set_title)
    return SessionService(store, commands=commands)


async def test_create_with_seed_and_setup_commands(service: SessionService) -> None:
    rec = await service.create(
        "roleplay",
        title="story",
        seed=[text_msg("assistant", "open", "Once upon a time.")],
        setup=[CommandSpec("demo-set-title", {"title": " Tale "}), CommandSpec("demo-set-title", {"title": ""})],
    )
    events = await service.events(rec.id)
    assert [e.type for e in events] == ["assistant/message", "command/run", "command/done", "command/run", "command/done"]
    assert events[2].payload["kind"] == "success" and events[2].payload["result"] == {"title": "Tale"}
    assert events[4].payload["kind"] == "error" and events[4].payload["error"]["code"] == "demo.bad_title"
    ok = successful_commands(events)
    assert [(run.payload["args"], done.payload["result"]) for run, done in ok] == [({"title": " Tale "}, {"title": "Tale"})]
    cmds = (await service.projection(rec.id, "harness/commands")).state
    assert [c["result"] for c in cmds["succeeded"]] == [{"title": "Tale"}]
    assert cmds["failed"][0]["error"]["pointer"] == "/title"


async def test_unknown_setup_command_creates_nothing(service: SessionService, store: EventStore) -> None:
    with pytest.raises(NotFoundError) as exc:
        await service.create("p", setup=[CommandSpec("no-such-command")])
    assert exc.value.code == "command.unknown"
    assert await store.dump() == []


async def test_command_counts_only_after_success_done(service: SessionService) -> None:
    rec = await service.create("p")
    # A run whose done never came (crash) and a done without a run do not count.
    await service.append(
        rec.id, [EventDraft("command/run", {"commandId": "c1", "name": "demo-set-title", "args": {"title": "x"}})], expected_seq=0
    )
    await service.append(rec.id, [EventDraft("command/done", {"commandId": "c9", "kind": "success", "result": 1})], expected_seq=1)
    assert successful_commands(await service.events(rec.id)) == []
    outcome = await service.run_command(rec.id, "demo-set-title", {"title": "ok"})
    assert outcome.ok and outcome.result == {"title": "ok"}
    failed = await service.run_command(rec.id, "demo-set-title", {"title": 3})
    assert not failed.ok and failed.error is not None and failed.error["code"] == "demo.bad_title"
    state = (await service.projection(rec.id, "harness/commands")).state
    assert [c["commandId"] for c in state["succeeded"]] == [outcome.command_id]
    assert list(state["pending"]) == ["c1"]


async def test_run_command_with_stale_expected_seq_writes_nothing(service: SessionService, store: EventStore) -> None:
    rec = await service.create("p", seed=[text_msg("user", "u", "x")])
    before = await store.dump()
    with pytest.raises(ConflictError):
        await service.run_command(rec.id, "demo-set-title", {"title": "x"}, expected_seq=0)
    with pytest.raises(NotFoundError):
        await service.run_command(rec.id, "nope", {})
    assert await store.dump() == before


async def test_replacement_is_stamped_with_source_event_seqs(service: SessionService) -> None:
    rec = await service.create(
        "p",
        seed=[text_msg("user", "u1", "a"), text_msg("assistant", "a1", "b"), text_msg("user", "u2", "c"), text_msg("assistant", "a2", "d")],
    )
    (edit,) = await service.append(
        rec.id, [text_msg("assistant", "e1", "B", {"op": "replace", "range": "node", "targetMessageId": "a1"})], expected_seq=4
    )
    assert edit.payload["surfaceOp"]["sourceEventSeqs"] == [2]
    (delete,) = await service.append(
        rec.id, [text_msg("assistant", "d1", "", {"op": "replace", "range": "suffix", "targetMessageId": "a1"})], expected_seq=5
    )
    assert delete.payload["surfaceOp"]["sourceEventSeqs"] == [2, 3, 4, 5]
    surface = await service.surface(rec.id)
    assert [n["id"] for n in surface["nodes"]] == ["u1"]


async def test_replacement_of_a_message_not_on_the_surface_is_rejected(service: SessionService, store: EventStore) -> None:
    rec = await service.create("p", seed=[text_msg("user", "u1", "a")])
    before = await store.dump()
    with pytest.raises(ValidationError) as exc:
        await service.append(
            rec.id, [text_msg("assistant", "x", "y", {"op": "replace", "range": "suffix", "targetMessageId": "ghost"})], expected_seq=1
        )
    assert exc.value.code == "surface.target_not_found" and exc.value.pointer == "/payload/surfaceOp/targetMessageId"
    with pytest.raises(ValidationError) as exc:
        await service.append(rec.id, [text_msg("user", "u1", "dup")], expected_seq=1)
    assert exc.value.code == "surface.duplicate_message_id"
    with pytest.raises(ValidationError) as exc:
        await service.append(
            rec.id,
            [text_msg("user", "n1", "a"), text_msg("user", "n2", "b", {"op": "replace", "range": "node", "targetMessageId": "zz"})],
            expected_seq=1,
        )
    assert exc.value.code == "surface.target_not_found" and exc.value.pointer == "/1/payload/surfaceOp/targetMessageId"
    with pytest.raises(ConflictError):
        await service.append(rec.id, [text_msg("user", "u9", "x")], expected_seq=0)
    assert await store.dump() == before


@pytest.mark.parametrize("seed", range(12))
async def test_duplicate_ids_are_found_by_the_kept_index_as_by_a_scan(service: SessionService, seed: int) -> None:
    """The duplicate check reads the ids kept across appends; after random appends, edits,
    deletions and compactions it accepts and refuses exactly what a scan of the surface would."""
    rng = random.Random(seed)
    rec = await service.create("p", seed=[text_msg("user", "u0", "a")])
    used = ["u0"]
    for n in range(1, 60):
        nodes = (await service.surface(rec.id))["nodes"]
        mid = rng.choice(used) if rng.random() < 0.4 else f"m{n}"
        roll = rng.random()
        drafts = [text_msg(rng.choice(["user", "assistant"]), mid, f"t{n}")]
        if roll < 0.15 and nodes:
            target = rng.choice([x for x in nodes if x.get("kind") is None and x["role"] != "tool"] or [nodes[-1]])
            op = {"op": "replace", "range": rng.choice(["node", "suffix"]), "targetMessageId": target["id"]}
            drafts = [text_msg("user", f"r{n}", "edit", op)] + drafts  # the batch checks mid after a rewrite
        elif roll < 0.2:
            drafts = [EventDraft("compaction/checkpoint", {"checkpointId": f"c{n}", "summary": "s", "sourceEventSeqs": []})] + drafts
        elif roll < 0.3:
            drafts = drafts + [text_msg("user", mid, "again")]  # the same id twice in one batch
        head = await service.store.head(rec.id)
        # What a scan says: apply the batch to a copy of the surface, checking each message id.
        surface = {"nodes": list(nodes), "ignoredOps": 0}
        expect_ok = True
        for i, d in enumerate(drafts):
            if d.type == "compaction/checkpoint":
                apply_surface(surface, Event("", head + i + 1, d.type, d.payload, ""))
                continue
            if "surfaceOp" not in d.payload and find_node(surface["nodes"], d.payload["messageId"]) >= 0:
                expect_ok = False
                break
            at = find_node(surface["nodes"], d.payload["surfaceOp"]["targetMessageId"]) if "surfaceOp" in d.payload else 0
            if at < 0 or surface["nodes"][at].get("kind") is not None and "surfaceOp" in d.payload:
                expect_ok = False
                break
            apply_surface(surface, Event("", head + i + 1, d.type, d.payload, ""))
        try:
            await service.append(rec.id, drafts, expected_seq=head)
            ok = True
        except ValidationError as exc:
            assert exc.code in ("surface.duplicate_message_id", "surface.target_not_found", "surface.target_not_replaceable")
            ok = False
        assert ok == expect_ok
        used.append(mid)


@pytest.mark.parametrize("seed", range(8))
async def test_stamping_a_batch_from_the_batchs_own_nodes_equals_stamping_on_a_copy(service: SessionService, seed: int) -> None:
    """``append`` stamps a batch on a surface that starts with only the batch's nodes, the cached
    ones joined in front (``before``) just before a draft that rewrites it: the drafts it gives,
    or the error it raises, are those of stamping on a whole copy of the surface (the reference),
    and the cached node list is left as it was."""
    rng = random.Random(seed)
    rec = await service.create("p", seed=[text_msg("user", "u0", "a")])
    used = ["u0"]
    for n in range(1, 50):
        loaded = await service.projection(rec.id, SURFACE)
        nodes = loaded.state["nodes"]
        ids = {node["id"] for node in nodes}
        drafts = []
        for k in range(rng.randint(1, 4)):
            roll = rng.random()
            mid = rng.choice(used) if rng.random() < 0.2 else f"m{n}_{k}"
            if roll < 0.15 and nodes:
                target = rng.choice(nodes)["id"] if rng.random() < 0.8 else "ghost"
                op = {"op": "replace", "range": rng.choice(["node", "suffix"]), "targetMessageId": target}
                drafts.append(text_msg(rng.choice(["user", "assistant"]), f"r{n}_{k}", rng.choice(["edit", ""]), op))
            elif roll < 0.2:
                seqs = rng.sample([node["seq"] for node in nodes], min(2, len(nodes)))
                drafts.append(EventDraft("compaction/checkpoint", {"checkpointId": f"c{n}_{k}", "summary": "s", "sourceEventSeqs": seqs}))
            else:
                drafts.append(text_msg(rng.choice(["user", "assistant"]), mid, f"t{n}"))
            used.append(mid)
        head = loaded.upto_seq
        kept = list(nodes)

        def stamp(surface: dict[str, Any], **kw: Any) -> Any:
            try:
                out = service._stamp_surface_ops(
                    surface, head, [EventDraft(d.type, copy.deepcopy(d.payload)) for d in drafts], set(ids), **kw
                )
            except ValidationError as exc:
                return (exc.code, exc.pointer)
            return [(d.type, d.payload) for d in out]

        reference = stamp({**loaded.state, "nodes": list(nodes)})
        assert stamp({**loaded.state, "nodes": []}, before=nodes) == reference
        assert nodes == kept and all(a is b for a, b in zip(nodes, kept))
        if isinstance(reference, list):
            await service.append(rec.id, drafts, expected_seq=head)


async def test_replacement_may_target_a_message_earlier_in_the_same_batch(service: SessionService) -> None:
    rec = await service.create("p", seed=[text_msg("user", "u1", "a")])
    events = await service.append(
        rec.id,
        [
            text_msg("assistant", "a1", "draft"),
            text_msg("assistant", "a1e", "final", {"op": "replace", "range": "node", "targetMessageId": "a1"}),
        ],
        expected_seq=1,
    )
    assert events[1].payload["surfaceOp"]["sourceEventSeqs"] == [2]
    assert [n["seq"] for n in (await service.surface(rec.id))["nodes"]] == [1, 3]


async def test_compaction_summary_cannot_be_replaced(service: SessionService, store: EventStore) -> None:
    rec = await service.create(
        "p", seed=[text_msg("user", "u1", "a"), EventDraft("compaction/checkpoint", {"checkpointId": "cp", "summary": "s"})]
    )
    before = await store.dump()
    with pytest.raises(ValidationError) as exc:
        await service.append(
            rec.id, [text_msg("assistant", "d", "", {"op": "replace", "range": "suffix", "targetMessageId": "cp"})], expected_seq=2
        )
    assert exc.value.code == "surface.target_not_replaceable"
    assert await store.dump() == before


async def test_seed_replacements_are_validated_too(service: SessionService, store: EventStore) -> None:
    with pytest.raises(ValidationError) as exc:
        await service.create("p", seed=[text_msg("assistant", "x", "y", {"op": "replace", "range": "node", "targetMessageId": "ghost"})])
    assert exc.value.code == "surface.target_not_found"
    assert await store.dump() == []


async def test_children_fork_and_archive(service: SessionService) -> None:
    parent = await service.create("roleplay", seed=[text_msg("user", "u1", "a"), text_msg("assistant", "a1", "b")])
    w1 = await service.create("writer", parent_id=parent.id)
    w2 = await service.create("writer", parent_id=parent.id)
    assert {c.id for c in await service.children(parent.id)} == {w1.id, w2.id}
    assert {s.id for s in await service.list(roots_only=True)} == {parent.id}
    fork = await service.fork(parent.id, 1, title="branch")
    assert [n["id"] for n in (await service.surface(fork.id))["nodes"]] == ["u1"]
    assert [n["id"] for n in (await service.surface(parent.id))["nodes"]] == ["u1", "a1"]
    await service.archive(fork.id)
    assert fork.id not in {s.id for s in await service.list()}
    with pytest.raises(NotFoundError):
        await service.children("ses_missing")


def test_registry_rejects_duplicate_registration() -> None:
    reg = CommandRegistry()
    reg.register("x", set_title)
    reg.register("x", set_title)  # same handler again: harmless
    with pytest.raises(ValidationError):
        reg.register("x", lambda a, c: None)
    assert reg.names() == ["x"]


# -- contention (issue 18 item 3) ------------------------------------------------------------------

WRITERS, APPENDS = 16, 25


def _done(w: int, i: int) -> EventDraft:
    return EventDraft("command/done", {"commandId": f"w{w}-{i}", "kind": "success"})


async def _contend(services: list[SessionService], session_id: str, make: Callable[[int, int], EventDraft]) -> list[str]:
    """Each service's writer appends APPENDS events with ``append_retrying``; return give-up codes."""
    gave_up: list[str] = []

    async def writer(w: int) -> None:
        for i in range(APPENDS):
            try:
                await services[w % len(services)].append_retrying(session_id, [make(w, i)])
            except RpError as exc:
                gave_up.append(exc.code)

    await asyncio.gather(*(writer(w) for w in range(WRITERS)))
    return gave_up


def _assert_gapless_in_writer_order(events: list[Any], key: str) -> None:
    assert [e.seq for e in events] == list(range(1, WRITERS * APPENDS + 1))
    for w in range(WRITERS):
        mine = [int(e.payload[key].split("-")[1]) for e in events if e.payload[key].startswith(f"w{w}-")]
        assert mine == list(range(APPENDS))


async def test_sixteen_writers_with_their_own_stores_never_give_up(store: EventStore, make_store) -> None:  # type: ignore[no-untyped-def]
    """16 writers as 16 processes would be (each its own store and pool), on one session."""
    rec = await store.create_session(preset="p")
    stores = [make_store() for _ in range(WRITERS)]
    try:
        gave_up = await _contend([SessionService(s, rng=random.Random(i)) for i, s in enumerate(stores)], rec.id, _done)
    finally:
        for s in stores:
            await s.close()
    assert gave_up == []
    _assert_gapless_in_writer_order(await store.read(rec.id), "commandId")


async def test_sixteen_message_writers_in_one_process_never_give_up(store: EventStore) -> None:
    rec = await store.create_session(preset="p")
    service = SessionService(store, rng=random.Random(0))
    gave_up = await _contend([service], rec.id, lambda w, i: text_msg("user", f"w{w}-{i}", "hi"))
    assert gave_up == []
    events = await store.read(rec.id)
    _assert_gapless_in_writer_order(events, "messageId")
    assert len((await service.surface(rec.id))["nodes"]) == WRITERS * APPENDS


async def test_append_retrying_backs_off_without_the_global_rng(store: EventStore) -> None:
    """The jitter comes from the service's own Random: replayed paths never touch the global one."""
    rec = await store.create_session(preset="p")
    other = SessionService(store)
    service = SessionService(store, rng=random.Random(7))
    await service.append_retrying(rec.id, [text_msg("user", "u0", "hi")])
    real_append, moved = service.append, []

    async def append_after_a_rival(session_id: str, drafts: list[EventDraft], *, expected_seq: int) -> list[Any]:
        if len(moved) < 3:  # a rival wins the first three rounds
            moved.append(await other.append(session_id, [text_msg("user", f"r{len(moved)}", "x")], expected_seq=expected_seq))
        return await real_append(session_id, drafts, expected_seq=expected_seq)

    service.append = append_after_a_rival  # type: ignore[method-assign]
    global_state = random.getstate()
    await service.append_retrying(rec.id, [text_msg("user", "u1", "hi")])
    assert random.getstate() == global_state
    assert [e.payload["messageId"] for e in await store.read(rec.id)] == ["u0", "r0", "r1", "r2", "u1"]


@pytest.mark.parametrize("seed", range(6))
async def test_states_advanced_by_own_appends_equal_a_fresh_fold(make_store, seed: int) -> None:  # type: ignore[no-untyped-def]
    """The service folds its own appends into the cached states instead of reading them back;
    with another writer appending too, every cached state still equals a fold from the store."""
    from roleplay.harness.commands import commands_projection
    from roleplay.harness.surface import surface_projection

    a, b = make_store(), make_store()
    await a.migrate()
    try:
        mine, theirs = SessionService(a), SessionService(b)
        rng = random.Random(seed)
        rec = await mine.create("p", seed=[text_msg("user", "u0", "hello")])
        for n in range(30):
            writer = mine if rng.random() < 0.7 else theirs
            head = await writer.store.head(rec.id)
            nodes = (await writer.surface(rec.id))["nodes"]
            if rng.random() < 0.15 and nodes:
                op = {"op": "replace", "range": rng.choice(["node", "suffix"]), "targetMessageId": rng.choice(nodes)["id"]}
                drafts = [text_msg("assistant", f"r{n}", "edited", op)]
            else:
                drafts = [text_msg(rng.choice(["user", "assistant"]), f"m{n}", f"text {n}"), EventDraft("turn/start", {"turnId": f"t{n}"})]
            await writer.append(rec.id, drafts, expected_seq=head)
            for projection in (surface_projection, commands_projection):
                cached = await mine.projection(rec.id, projection)
                fresh = await mine.projection(rec.id, projection, use_snapshot=False)
                assert cached.state == fresh.state and cached.upto_seq == fresh.upto_seq
        head = await a.head(rec.id)
        at = await mine.projection_at(rec.id, surface_projection, head)
        assert at.upto_seq == head and at.folded == 0
        await theirs.append(rec.id, [text_msg("user", "late", "from elsewhere")], expected_seq=head)
        behind = await mine.projection_at(rec.id, surface_projection, head + 1)  # not at that seq: a plain load
        assert behind.upto_seq == head + 1 and behind.state["nodes"][-1]["id"] == "late"
    finally:
        await b.close()
        await a.close()


@given(
    st.recursive(
        st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=5)),
        lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=3), inner, max_size=4)),
        max_leaves=40,
    )
)
@settings(max_examples=300, deadline=None)
def test_the_caches_payload_copies_are_deep_copies(value: Any) -> None:
    """``json_copy`` stands in for ``copy.deepcopy`` on stored payloads (issue 16): equal, and no
    container shared with the original."""
    import copy

    from roleplay.harness.sessions import json_copy

    copied = json_copy(value)
    assert repr(copied) == repr(copy.deepcopy(value))  # repr: NaN is not equal to itself

    def containers(v: Any) -> list[int]:
        if isinstance(v, dict):
            return [id(v), *(i for x in v.values() for i in containers(x))]
        if isinstance(v, list):
            return [id(v), *(i for x in v for i in containers(x))]
        return []

    assert not set(containers(copied)) & set(containers(value))


def test_a_payload_copy_leaves_anything_but_json_to_deepcopy() -> None:
    from roleplay.harness.sessions import json_copy

    odd = {"t": (1, [2]), "s": {3}}
    copied = json_copy(odd)
    assert copied == odd and copied["t"][1] is not odd["t"][1] and copied["s"] is not odd["s"]
