"""Turns and message actions racing on one session (issues 10.1 and 18.1), on both backends.

The run lease is taken before a turn prepares, message actions and profile changes take the same
lease, and the commit re-checks the live state and surface. So, whatever the interleaving:
- every successful commit still on the surface changed the state (revision = base + commits);
- every Writer prompt holds the reply before it (the surface when its turn started);
- no two turns share a run id, and no foreign event lands inside a turn.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import random
import signal
from typing import Any, AsyncIterator, Callable

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from tests_support import core_runtime, sample_story

import roleplay.core.run as run_module
from roleplay.clock import ulid_ids
from roleplay.core.message_actions import delete_from, edit_message, undo_last_turn
from roleplay.core.run import COMMIT_TURN_TOOL, RUN_CONTEXT, RpRun, play_turn, prepare_run
from roleplay.core.runtime import RoleplayRuntime
from roleplay.core.writer import WRITER_RESULT_KIND
from roleplay.errors import ConflictError, RpError
from roleplay.harness.loop import AgentLoop
from roleplay.harness.models.demo import DemoModel
from roleplay.harness.models.routes import Route
from roleplay.harness.models.types import ModelRequest, StreamEvent
from roleplay.harness.store import EventStore, open_store
from roleplay.harness.surface import SURFACE
from roleplay.harness.turns import turns_projection
from roleplay.state.events import state_document

DEMO = Route("demo", "demo")
TURN_TEXTS = ["我推开铁门。", "我帮她擦铜镜。", "我问起晨星号的事。", "我递给她一壶热茶。", "我们一起爬上灯室。", "我提到她的祖父。"]


class SlowDemo(DemoModel):
    """The demo model with a pause before every answer, so runs overlap with other work."""

    def __init__(self, pause: Callable[[ModelRequest], float]) -> None:
        super().__init__()
        self.pause = pause

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        await asyncio.sleep(self.pause(request))
        async for event in super().stream(request):
            yield event


async def state_doc(rt: RoleplayRuntime, sid: str) -> dict[str, Any]:
    return state_document((await rt.service.projection(sid, "rp/state")).state)


def trust(doc: dict[str, Any]) -> int:
    return int(doc["namespaces"]["story"]["value"]["林汐"]["信任"])


async def check_log(rt: RoleplayRuntime, sid: str, base_revision: int) -> int:
    """The race invariants, read back from the log; returns the number of effective commits."""
    events = await rt.service.events(sid)
    nodes = (await rt.service.projection(sid, SURFACE)).state["nodes"]
    on_surface = {c["id"] for n in nodes if n["role"] == "assistant" for c in n.get("toolCalls", [])}
    commits = [e for e in events if e.type == "tool/result" and e.payload["name"] == COMMIT_TURN_TOOL and e.payload["ok"]]
    effective = [c for c in commits if c.payload["callId"] in on_surface]
    # Committed changes equal the state revision: no successful commit was skipped by the fold.
    assert (await state_doc(rt, sid))["revision"] == base_revision + len(effective)

    contexts = [e for e in events if e.type == "user/message" and RUN_CONTEXT in (e.payload.get("source") or {})]
    run_ids = [e.payload["source"][RUN_CONTEXT]["runId"] for e in contexts]
    assert len(run_ids) == len(set(run_ids)), run_ids

    starts = {e.payload["turnId"]: e.seq for e in events if e.type == "turn/start"}
    ends = {e.payload["turnId"]: e.seq for e in events if e.type == "turn/end"}
    assert set(starts) == set(ends)
    for turn_id, start in starts.items():
        inside = [e for e in events if start < e.seq < ends[turn_id]]
        # The lease keeps every other writer out of a running turn.
        assert all(e.payload.get("turnId") == turn_id for e in inside), [(e.type, e.payload.get("turnId")) for e in inside]
        writer = [e for e in inside if e.type == "tool/result" and (e.payload.get("meta") or {}).get("kind") == WRITER_RESULT_KIND]
        if not writer:
            continue
        prompt = (await rt.service.events(writer[0].payload["meta"]["childSessionId"]))[1].payload["content"][0]["text"]
        before = (await rt.service.projection(sid, SURFACE, until_seq=start - 1)).state["nodes"]
        replies = [n for n in before if n["role"] == "assistant" and any(b.get("type") == "text" and b["text"] for b in n["content"])]
        last = [b["text"] for b in replies[-1]["content"] if b.get("type") == "text"][0]
        assert last.strip()[:40] in prompt, f"turn {turn_id}'s Writer did not see the reply before it"
    return len(effective)


# -- deterministic interleavings -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_commit_after_an_undo_between_prepare_and_run_fails_stale_instead_of_landing_a_no_op(store: EventStore) -> None:
    """Issue 10.1's repro: play turn 1; prepare turn 2; undo turn 1; run turn 2."""
    rt, sid = await sample_story(store)
    assert (await play_turn(rt, sid, TURN_TEXTS[0], parent_route=DEMO)).committed
    prepared = await prepare_run(rt, sid, TURN_TEXTS[1], parent_route=DEMO)
    await undo_last_turn(rt, sid)
    after_undo = await state_doc(rt, sid)
    run = RpRun(rt, prepared)
    turn = await AgentLoop(rt.service, rt.model_for(DEMO), run.spec()).run_turn(sid, prepared.input_text, turn_id=prepared.turn_id)
    assert turn.outcome == "error" and turn.error is not None and turn.error["code"] == "commit.stale_state", turn.error
    assert not any(r.ok and r.name == COMMIT_TURN_TOOL for r in turn.tool_results)
    assert await state_doc(rt, sid) == after_undo
    await check_log(rt, sid, after_undo["revision"])
    await rt.aclose()


@pytest.mark.anyio
async def test_a_turn_whose_conversation_was_edited_since_prepare_fails_stale_context(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    await play_turn(rt, sid, TURN_TEXTS[0], parent_route=DEMO)
    prepared = await prepare_run(rt, sid, TURN_TEXTS[1], parent_route=DEMO)
    user = [n for n in (await rt.service.surface(sid))["nodes"] if n["role"] == "user"][0]
    await edit_message(rt, sid, user["id"], "我其实是来修灯的。")  # no state change, but the Writer's context is gone
    run = RpRun(rt, prepared)
    turn = await AgentLoop(rt.service, rt.model_for(DEMO), run.spec()).run_turn(sid, prepared.input_text, turn_id=prepared.turn_id)
    assert turn.outcome == "error" and turn.error is not None and turn.error["code"] == "commit.stale_context"
    assert not any(r.ok and r.name == COMMIT_TURN_TOOL for r in turn.tool_results)
    await rt.aclose()


@pytest.mark.anyio
async def test_a_turn_started_while_another_prepares_is_busy_and_never_runs_on_its_snapshot(
    store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 18.1: turn B is inside prepare (its snapshot read) when turn A starts. A must not run
    and commit in between, or B would commit on A's overtaken snapshot and lose A's change."""
    rt, sid = await sample_story(store)
    base = await state_doc(rt, sid)
    preparing, release = asyncio.Event(), asyncio.Event()
    collect = run_module.collect_sources

    async def gated_collect(inputs: Any, reader: Any, *providers: Any) -> Any:
        if "B:" in inputs.current_input:
            preparing.set()
            await release.wait()
        return await collect(inputs, reader, *providers)

    monkeypatch.setattr(run_module, "collect_sources", gated_collect)
    b = asyncio.ensure_future(play_turn(rt, sid, "B: 我点亮了灯。", parent_route=DEMO))
    await asyncio.wait_for(preparing.wait(), 30)
    try:
        with pytest.raises(ConflictError) as exc:
            await play_turn(rt, sid, "A: 我推开铁门。", parent_route=DEMO)
        assert exc.value.code == "run.busy"
    finally:
        release.set()
        result_b = await asyncio.wait_for(b, 60)
    assert result_b.committed
    assert trust(await state_doc(rt, sid)) == trust(base) + 1
    assert await check_log(rt, sid, base["revision"]) == 1
    # Once B is done, A runs on B's result.
    result_a = await play_turn(rt, sid, "A: 我推开铁门。", parent_route=DEMO)
    assert result_a.committed and result_b.writer is not None and result_b.writer.text[:40] in result_a.prepared.build.writer_prompt
    assert await check_log(rt, sid, base["revision"]) == 2
    await rt.aclose()


@pytest.mark.anyio
async def test_prompt_preview_still_equals_the_next_turn_under_the_lease(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    await play_turn(rt, sid, TURN_TEXTS[0], parent_route=DEMO)
    preview = await prepare_run(rt, sid, TURN_TEXTS[1], parent_route=DEMO)
    result = await play_turn(rt, sid, TURN_TEXTS[1], parent_route=DEMO)
    assert result.prepared.run_id == preview.run_id
    assert result.prepared.build.writer_prompt == preview.build.writer_prompt
    assert result.prepared.run_context == preview.run_context
    await rt.aclose()


class HangingWriter(DemoModel):
    """Tells the test it is inside the Writer, then never answers (the process gets killed)."""

    def __init__(self, inside: Any) -> None:
        super().__init__()
        self.inside = inside

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        if not request.tools:
            self.inside.set()
            await asyncio.Event().wait()
        async for event in super().stream(request):
            yield event


def _turn_killed_inside_the_writer(url: str, sid: str, inside: Any) -> None:
    async def run() -> None:
        store = open_store(url, ids=ulid_ids)
        rt = core_runtime(store)
        rt.models[DEMO.spec] = HangingWriter(inside)
        await play_turn(rt, sid, "我推开铁门。", parent_route=DEMO)

    asyncio.run(run())


@pytest.mark.anyio
async def test_a_run_killed_inside_the_writer_has_its_child_turn_closed_by_the_next_turn(store_url: str) -> None:
    """Issue 18.2: the parent's open turn was closed as interrupted, the Writer's never was."""
    store = open_store(store_url, ids=ulid_ids)
    await store.migrate()
    rt, sid = await sample_story(store)
    ctx = multiprocessing.get_context("spawn")
    inside = ctx.Event()
    proc = ctx.Process(target=_turn_killed_inside_the_writer, args=(store_url, sid, inside))
    proc.start()
    try:
        assert await asyncio.get_running_loop().run_in_executor(None, inside.wait, 120)
    finally:
        os.kill(proc.pid, signal.SIGKILL)  # type: ignore[arg-type]
        await asyncio.get_running_loop().run_in_executor(None, proc.join, 30)
    [orphan] = await rt.service.children(sid)
    assert (await rt.service.projection(orphan.id, turns_projection)).state["open"]  # left open by the kill
    for _ in range(50):  # PostgreSQL drops the dead process's advisory lock shortly after the kill
        try:
            result = await play_turn(rt, sid, "我帮她擦铜镜。", parent_route=DEMO)
            break
        except ConflictError:
            await asyncio.sleep(0.1)
    else:
        pytest.fail("the killed run's lease was never released")
    assert result.committed
    assert (await rt.service.projection(orphan.id, turns_projection)).state["open"] == {}
    assert (await rt.service.events(orphan.id))[-1].payload["outcome"] == "interrupted"
    parent_ends = [e.payload["outcome"] for e in await rt.service.events(sid) if e.type == "turn/end"]
    assert parent_ends[-2:] == ["interrupted", "completed"]
    await rt.aclose()
    await store.close()


# -- the property: N concurrent turns and message actions ---------------------------------------------

OPS = st.lists(
    st.tuples(st.sampled_from(["turn", "turn", "undo", "edit", "delete"]), st.integers(min_value=0, max_value=4)),
    min_size=2, max_size=6,
)  # fmt: skip
EXPECTED = {"run.busy", "message.nothing_to_undo", "message.not_found", "event.seq_conflict"}


async def _op(rt: RoleplayRuntime, sid: str, kind: str, n: int, i: int) -> str:
    await asyncio.sleep(n * 0.004)  # staggered starts: some ops overlap a run, some land between runs
    try:
        if kind == "turn":
            result = await play_turn(rt, sid, f"{TURN_TEXTS[i % len(TURN_TEXTS)]}（{i}）", parent_route=DEMO)
            assert result.turn.outcome == "completed", result.turn.error
            return "committed" if result.committed else "uncommitted"
        nodes = (await rt.service.surface(sid))["nodes"]
        replies = [x for x in nodes if x["role"] == "assistant" and any(b.get("type") == "text" and b["text"] for b in x["content"])]
        if kind == "undo":
            await undo_last_turn(rt, sid)
        elif kind == "edit":
            await edit_message(rt, sid, replies[-1]["id"], f"（改写 {i}）" + replies[-1]["content"][-1]["text"])
        elif len(replies) > 1:
            await delete_from(rt, sid, replies[-1]["id"])
        return kind
    except RpError as exc:
        assert exc.code in EXPECTED, exc.to_dict()
        return exc.code


# Interleavings are timing-driven, so a failure is reported as found rather than shrunk.
@settings(
    max_examples=5,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=OPS, seed=st.integers(min_value=0, max_value=2**16))
def test_concurrent_turns_and_message_actions_never_lose_a_commit(
    make_store: Callable[..., EventStore], ops: list[tuple[str, int]], seed: int
) -> None:
    async def main() -> None:
        store = make_store(ids=ulid_ids)  # every example opens the same database again: ids must not repeat
        await store.migrate()
        pauses = random.Random(seed)
        rt, sid = await sample_story(store, SlowDemo(lambda _request: pauses.uniform(0.0, 0.01)))
        try:
            base = await state_doc(rt, sid)
            outcomes = await asyncio.gather(*(_op(rt, sid, kind, n, i) for i, (kind, n) in enumerate(ops)))
            effective = await check_log(rt, sid, base["revision"])
            # The demo commits one +1 trust change per turn: the value agrees with the commits left.
            assert trust(await state_doc(rt, sid)) == trust(base) + effective, outcomes
        finally:
            await rt.aclose()
            await store.close()

    asyncio.run(main())
