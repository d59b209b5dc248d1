"""``rp-turn-surface``: outcomes, body owners, commits, deletion semantics, targets and orphans."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from roleplay.core.action_meta import parse_action
from roleplay.core.message_actions import delete_from, delete_turn, edit_message, read_views, target_message
from roleplay.core.run import play_turn
from roleplay.core.runtime import RoleplayRuntime
from roleplay.core.turn_surface import live_turns, turn_surface_projection, turns_view
from roleplay.errors import NotFoundError, RpError
from roleplay.harness.events import EventDraft
from roleplay.harness.leases import lease_taken, run_lease
from roleplay.harness.models.routes import Route
from roleplay.harness.models.scripted import ScriptedModel
from roleplay.harness.store import EventStore
from roleplay.state.events import state_document
from tests_support import sample_story

pytestmark = pytest.mark.anyio
DEMO = Route("demo", "demo")
SCRIPTED = Route("scripted", "scripted")


async def turns(rt: RoleplayRuntime, sid: str) -> list[dict[str, Any]]:
    loaded = await rt.service.projection(sid, turn_surface_projection)
    rebuilt = await rt.service.projection(sid, turn_surface_projection, use_snapshot=False, snapshot_every=None)
    assert rebuilt.state == json.loads(json.dumps(loaded.state))  # incremental == a fresh fold
    return turns_view(loaded.state)


async def story_value(rt: RoleplayRuntime, sid: str) -> dict[str, Any]:
    return state_document((await rt.service.projection(sid, "rp/state")).state)["namespaces"]["story"]["value"]


def test_action_metadata_reads_both_versions() -> None:
    v1 = parse_action({"rpMessageAction": {"v": 1, "kind": "delete", "targets": ["msg_a", "msg_b"]}})
    assert v1 is not None and v1.message_ids == ("msg_a", "msg_b") and v1.turn_ids == ()
    v2 = parse_action(
        {
            "rpMessageAction": {
                "v": 2,
                "kind": "delete",
                "targets": [{"kind": "turn", "turnId": "t1"}, {"kind": "message", "messageId": "m"}],
            }
        }
    )
    assert v2 is not None and v2.turn_ids == ("t1",) and v2.message_ids == ("m",)
    assert parse_action({"rpMessageAction": {"v": 9, "kind": "delete", "targets": []}}) is None
    assert parse_action({"rpMessageAction": {"v": 2, "kind": "explode", "targets": []}}) is None
    assert parse_action(None) is None


async def test_committed_and_discussion_turns_have_their_owners(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    await play_turn(rt, sid, "我推开铁门。", parent_route=DEMO)
    rt.models[SCRIPTED.spec] = ScriptedModel(["灯塔有一百零八级台阶。"])
    await play_turn(rt, sid, "灯塔有多少级台阶？", parent_route=SCRIPTED)
    opening, committed, discussion = await turns(rt, sid)
    assert opening["mode"] == "opening" and opening["body"]["owner"] == "reply" and opening["inputs"] == []
    assert committed["outcome"] == "committed" and committed["body"]["owner"] == "commit"
    assert isinstance(committed["commit"]["effects"], int) and committed["anchorSeq"] == committed["commit"]["resultSeq"]
    assert committed["deletion"] == {"keepsInput": False, "retracts": True}
    assert discussion["outcome"] == "uncommitted" and discussion["body"]["owner"] == "reply" and discussion["commit"] is None
    assert discussion["deletion"] == {"keepsInput": False, "retracts": False}
    assert discussion["regenerable"] and not committed["regenerable"]  # only the last reply
    # Blank and tool-only model messages never become targets: the Writer call (content [] +
    # toolCalls) of the committed turn, and the run context.
    views = await read_views(rt, sid)
    blank = [n for n in views.nodes if n["role"] == "assistant" and not any(b.get("text") for b in n["content"])]
    assert blank
    for node in blank:
        with pytest.raises(RpError) as exc:
            target_message(views, node["id"])
        assert exc.value.code == "message.not_a_target"
    context = next(n for n in views.nodes if (n.get("source") or {}).get("rpRunContext"))
    with pytest.raises(RpError):
        target_message(views, context["id"])
    await rt.aclose()


async def test_failed_turn_keeps_its_input_when_deleted(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    rt.models[SCRIPTED.spec] = ScriptedModel([RpError("model.bad_request", "the provider refused the request")])
    result = await play_turn(rt, sid, "我推开铁门。", parent_route=SCRIPTED)
    assert result.turn.outcome == "error"
    failed = (await turns(rt, sid))[-1]
    assert failed["outcome"] == "failed" and failed["failureShown"] and failed["body"] is None
    assert failed["deletion"] == {"keepsInput": True, "retracts": False, "hidesFailureOnly": True}
    assert failed["error"]["code"] == "model.bad_request"
    masked = await delete_turn(rt, sid, failed["turnId"])
    after = (await turns(rt, sid))[-1]
    assert after["turnId"] == failed["turnId"] and after["inputs"] == failed["inputs"]  # the user message stays
    assert not after["failureShown"]
    assert all(m not in failed["inputs"] for m in masked)
    # The next turn plays normally after the kept input.
    assert (await play_turn(rt, sid, "我再敲一次门。", parent_route=DEMO)).committed
    await rt.aclose()


async def test_deleting_a_failed_reply_cuts_from_the_model_output(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    # The Writer runs and the parent then fails: the turn has model output but no commit.
    rt.models[SCRIPTED.spec] = ScriptedModel(
        [{"tool_calls": [{"name": "rp_write_turn", "arguments": {"action": "write"}}]}, "雾。", RpError("model.unavailable", "down")]
    )
    result = await play_turn(rt, sid, "我推开铁门。", parent_route=SCRIPTED)
    assert result.turn.outcome == "error"
    failed = (await turns(rt, sid))[-1]
    await delete_turn(rt, sid, failed["turnId"])
    views = await read_views(rt, sid)
    assert views.nodes[-1]["id"] == failed["inputs"][0]  # cut right after the input
    await rt.aclose()


async def test_only_an_explicit_action_retires_and_edits_keep_messages_live(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    await play_turn(rt, sid, "我推开铁门。", parent_route=DEMO)
    turn = (await turns(rt, sid))[-1]
    body = turn["body"]["messageId"]
    value = await story_value(rt, sid)
    await edit_message(rt, sid, body, "改写过的回复。")
    state = (await rt.service.projection(sid, turn_surface_projection)).state
    assert state["messages"][body]["status"] == "live" and state["messages"][body]["edits"] == 1
    assert await story_value(rt, sid) == value  # the edit repeats no effect
    edited = [e for e in await rt.service.events(sid) if e.type == "assistant/message"][-1]
    assert edited.payload["model"]["provider"] == "demo"  # the model source is kept
    # A raw suffix replacement without rpMessageAction hides messages but retires nothing.
    head = await store.head(sid)
    op = {"op": "replace", "range": "suffix", "targetMessageId": turn["inputs"][0]}
    await rt.service.append(
        sid, [EventDraft("assistant/message", {"messageId": "msg_raw", "content": [], "surfaceOp": op})], expected_seq=head
    )
    state = (await rt.service.projection(sid, turn_surface_projection)).state
    assert state["messages"][body]["status"] == "live"
    await rt.aclose()


async def test_delete_retires_the_suffix_and_restores_state(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    before = await story_value(rt, sid)
    await play_turn(rt, sid, "我推开铁门。", parent_route=DEMO)
    await play_turn(rt, sid, "我帮她擦铜镜。", parent_route=DEMO)
    first = (await turns(rt, sid))[1]
    masked = await delete_from(rt, sid, first["body"]["messageId"])
    view = await turns(rt, sid)
    assert [t["turnId"] for t in view] == [view[0]["turnId"], first["turnId"]]
    assert view[-1]["body"]["live"] is False and view[-1]["inputs"] == first["inputs"]
    assert first["body"]["messageId"] in masked
    await delete_from(rt, sid, first["inputs"][0])
    assert await story_value(rt, sid) == before
    with pytest.raises(NotFoundError):
        await delete_from(rt, sid, first["inputs"][0])
    await rt.aclose()


async def test_orphan_open_turns(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    head = await store.head(sid)
    drafts = []
    for n in (1, 2):
        drafts += [
            EventDraft("turn/start", {"turnId": f"turn_o{n}", "mode": "chat"}),
            EventDraft(
                "user/message", {"messageId": f"msg_o{n}", "content": [{"type": "text", "text": f"输入{n}"}], "turnId": f"turn_o{n}"}
            ),
            EventDraft(
                "assistant/message", {"messageId": f"msg_r{n}", "content": [{"type": "text", "text": f"半句{n}"}], "turnId": f"turn_o{n}"}
            ),
        ]
    await rt.service.append(sid, drafts, expected_seq=head)
    view = await turns(rt, sid)
    orphan, last = view[-2], view[-1]
    assert orphan["outcome"] == last["outcome"] == "open"
    assert orphan["orphan"] and not last["orphan"]
    assert orphan["body"] == {"messageId": "msg_r1", "owner": "recovered", "live": True}  # its last readable text
    assert not last["regenerable"] and last["anchorSeq"] is None
    # The live overlay: with no run holding the lease, the last open turn is an orphan too.
    idle = await live_turns(rt, sid)
    assert idle["running"] is False and idle["activeTurnId"] is None
    assert [(t["active"], t.get("orphan")) for t in idle["turns"][-2:]] == [(False, True), (False, True)]
    async with run_lease(store, sid):  # a run holds it (this process): the last open turn is the active one
        held = await live_turns(rt, sid)
        assert held["running"] is True and held["activeTurnId"] == "turn_o2"
        assert [(t["active"], t.get("orphan")) for t in held["turns"][-2:]] == [(False, True), (True, False)]
        assert not any(t["active"] for t in held["turns"][:-1])
    assert (await turns(rt, sid)) == view  # the fold itself never saw the lease
    await rt.aclose()


class Gate:
    """A model that waits for the test before it answers (a run in progress)."""

    def __init__(self) -> None:
        self.asked, self.go = asyncio.Event(), asyncio.Event()

    async def stream(self, request: Any) -> Any:
        self.asked.set()
        await self.go.wait()
        async for event in ScriptedModel(["灯塔有一百零八级台阶。"]).stream(request):
            yield event

    def __getattr__(self, name: str) -> Any:
        return getattr(ScriptedModel(), name)


async def test_the_running_turn_is_active_while_it_runs(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    gate = Gate()
    rt.models[SCRIPTED.spec] = gate  # type: ignore[assignment]
    playing = asyncio.ensure_future(play_turn(rt, sid, "灯塔有多少级台阶？", parent_route=SCRIPTED))
    await asyncio.wait_for(gate.asked.wait(), 30)
    during = await live_turns(rt, sid)
    last = during["turns"][-1]
    assert during["running"] and last["outcome"] == "open" and last["active"] and not last["orphan"]
    assert during["activeTurnId"] == last["turnId"] and await lease_taken(store, sid)
    gate.go.set()
    await playing
    after = await live_turns(rt, sid)
    assert not after["running"] and after["activeTurnId"] is None and after["turns"][-1]["outcome"] == "uncommitted"
    assert not any(t["active"] for t in after["turns"]) and not await lease_taken(store, sid)
    await rt.aclose()


async def test_compacted_messages_are_not_found(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    await play_turn(rt, sid, "我推开铁门。", parent_route=DEMO)
    turn = (await turns(rt, sid))[-1]
    head = await store.head(sid)
    await rt.service.append(sid, [EventDraft("compaction/checkpoint", {"checkpointId": "cp_1", "summary": "前情。"})], expected_seq=head)
    with pytest.raises(NotFoundError) as exc:
        await edit_message(rt, sid, turn["body"]["messageId"], "x")
    assert exc.value.code == "message.not_found" and "compacted" in exc.value.message
    with pytest.raises(RpError) as refused:
        await delete_from(rt, sid, "cp_1")
    assert refused.value.code == "message.not_deletable"
    await rt.aclose()


async def test_deleting_an_earlier_failed_turn_cuts_what_followed_it(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    rt.models[SCRIPTED.spec] = ScriptedModel([RpError("model.bad_request", "refused")])
    value = await story_value(rt, sid)
    await play_turn(rt, sid, "我推开铁门。", parent_route=SCRIPTED)
    await play_turn(rt, sid, "我再敲一次门。", parent_route=DEMO)
    failed = (await turns(rt, sid))[1]
    assert failed["outcome"] == "failed"
    masked = await delete_turn(rt, sid, failed["turnId"])
    view = await turns(rt, sid)
    assert [t["turnId"] for t in view] == [view[0]["turnId"], failed["turnId"]] and masked
    assert view[-1]["inputs"] == failed["inputs"] and not view[-1]["failureShown"]
    assert await story_value(rt, sid) == value  # the later turn's commit went with it
    await rt.aclose()
