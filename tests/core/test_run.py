"""The roleplay turn end to end (Chat mode): the sample card plays 10 turns with the demo model,
with a scripted model, and through the fake OpenAI-compatible server on the real provider path.

On every turn the log must hold the Writer child session, the prompt hash and the commit
result; state changes apply atomically; a deliberately wrong commit is repaired by one
retry-patch call within the 5-step budget. Afterwards, projections rebuilt from the log equal the
live ones.
"""

from __future__ import annotations

import gc
import json
import re
from typing import Any

import pytest
from tests_support import core_runtime, sample_story

from roleplay.assets.seeds import ensure_seeds
from roleplay.assets.service import AssetService
from roleplay.core.demo import narrate, roleplay_demo_policy
from roleplay.core.run import CHAT_STEP_LIMIT, RUN_CONTEXT, RunResult, play_turn
from roleplay.core.runtime import RoleplayRuntime
from roleplay.core.session_create import StoryRequest, create_story
from roleplay.core.writer import WRITER_RESULT_KIND
from roleplay.errors import ValidationError
from roleplay.harness.models.routes import Route
from roleplay.harness.models.scripted import ScriptedModel
from roleplay.harness.models.types import ChatMessage, ModelRequest, ToolCall, ToolSpec
from roleplay.harness.projections import load
from roleplay.harness.store import EventStore
from roleplay.samples import SAMPLE_CARD, sample_card_bytes
from roleplay.state.events import state_document
from roleplay.testing.fake_openai import FakeReply, serve_fake_openai

pytestmark = pytest.mark.anyio
DEMO = Route("demo", "demo")
INPUTS = [
    "我推开铁门：我只是想看看灯塔。", "我帮她擦铜镜。", "我问起晨星号的事。", "我说我在镇上听到了钟声。", "我递给她一壶热茶。",
    "我们一起爬上灯室。", "我提到她的祖父。", "我发誓不会把秘密说出去。", "雾越来越浓，我们点亮了灯。", "天快亮了，我们在栏杆边说话。",
]  # fmt: skip


async def story_value(rt: RoleplayRuntime, sid: str) -> dict[str, Any]:
    return state_document((await rt.service.projection(sid, "rp/state")).state)["namespaces"]["story"]["value"]


async def check_turn(rt: RoleplayRuntime, result: RunResult, *, repaired_by_patch: bool = True) -> None:
    """The per-turn acceptance items, read back from the log."""
    turn = result.turn
    assert turn.outcome == "completed" and result.committed, turn.error
    assert turn.steps <= CHAT_STEP_LIMIT
    events = await rt.service.events(result.session_id)
    mine = [e for e in events if e.payload.get("turnId") == turn.turn_id]
    writer = [e for e in mine if e.type == "tool/result" and (e.payload.get("meta") or {}).get("kind") == WRITER_RESULT_KIND]
    assert len(writer) == 1
    meta = writer[0].payload["meta"]
    child = await rt.service.get(meta["childSessionId"])
    assert child.parent_id == result.session_id and child.preset == "rp-writer"
    child_events = await rt.service.events(child.id)
    assert child_events[1].payload["content"][0]["text"] == result.prepared.build.writer_prompt
    assert len(meta["promptHash"]) == 64 and meta["text"] == result.writer.text  # type: ignore[union-attr]
    commits = [e for e in mine if e.type == "tool/result" and e.payload["name"] == "rp_commit_turn"]
    assert [c.payload["ok"] for c in commits] == ([False, True] if repaired_by_patch else [True])
    final = commits[-1].payload["meta"]
    assert final["kind"] == "rp-agent/turn-commit" and final["writer"]["promptHash"] == meta["promptHash"]
    if repaired_by_patch:
        calls = [e for e in mine if e.type == "tool/call" and e.payload["name"] == "rp_commit_turn"]
        assert "retry" in json.loads(calls[-1].payload["arguments"])
    # The reply message is the Writer's draft, and the run context marks its own user message.
    reply = [
        e for e in mine if e.type == "assistant/message" and any(c["name"] == "rp_commit_turn" for c in e.payload.get("toolCalls", []))
    ][-1]
    assert [b["text"] for b in reply.payload["content"] if b["type"] == "text"] == [result.writer.text]  # type: ignore[union-attr]
    contexts = [e for e in mine if e.type == "user/message" and RUN_CONTEXT in (e.payload.get("source") or {})]
    assert len(contexts) == 1 and "<roleplay_request" in contexts[0].payload["content"][0]["text"]


async def check_replay(rt: RoleplayRuntime, sid: str) -> None:
    for name in ("rp/state", "rp/state/activity", "rp/session", "harness/surface"):
        live = await rt.service.projection(sid, name)
        rebuilt = await rt.service.projection(sid, name, use_snapshot=False, snapshot_every=None)
        assert rebuilt.state == json.loads(json.dumps(live.state)), name


async def test_sample_card_plays_ten_turns_with_the_demo_model(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    trust = (await story_value(rt, sid))["林汐"]["信任"]
    for text in INPUTS:
        before = await story_value(rt, sid)
        result = await play_turn(rt, sid, text, parent_route=DEMO)
        await check_turn(rt, result)
        after = await story_value(rt, sid)
        assert after["林汐"]["信任"] == before["林汐"]["信任"] + 1  # one in-bounds increment per turn
        assert {k: v for k, v in after.items() if k != "林汐"} == {k: v for k, v in before.items() if k != "林汐"}
    assert (await story_value(rt, sid))["林汐"]["信任"] == trust + 10
    await check_replay(rt, sid)
    await rt.aclose()


async def test_a_turn_text_with_a_lone_surrogate_is_refused_before_anything_is_written(store: EventStore) -> None:
    # Undecodable bytes on a command line arrive as lone surrogates (surrogateescape): no text
    # holding one can be hashed or stored, so the turn is refused with its place, not a crash.
    rt, sid = await sample_story(store)
    head = await store.head(sid)
    with pytest.raises(ValidationError) as caught:
        await play_turn(rt, sid, "I knock \udcff twice.", parent_route=DEMO)
    assert caught.value.code == "run.lone_surrogate" and caught.value.pointer == "/text"
    assert caught.value.details == {"char": "U+DCFF", "offset": 8}
    assert await store.head(sid) == head
    await rt.aclose()


async def test_a_finished_turn_leaves_no_reference_cycle_behind(store: EventStore) -> None:
    # A run referenced back by its own parts (a callback bound to it) is a cycle: everything it
    # holds (the frozen build, each section and source, the commit session) would then wait for a
    # full collection instead of going with the turn, and a loaded server's full collections,
    # which hold its event loop, grew several times longer with that garbage (issue 16).
    rt, sid = await sample_story(store)
    await play_turn(rt, sid, INPUTS[0], parent_route=DEMO)
    gc.collect()
    flags = gc.get_debug()
    gc.disable()
    try:
        gc.set_debug(gc.DEBUG_SAVEALL)  # what a collection would free is kept in gc.garbage instead
        await play_turn(rt, sid, INPUTS[1], parent_route=DEMO)
        gc.collect()
        kinds = {type(o).__name__ for o in gc.garbage}
    finally:
        gc.set_debug(flags)
        gc.garbage.clear()
        gc.enable()
    assert not kinds & {"RpRun", "PreparedRun", "FrozenBuild", "WriterSlot", "CommitSession", "BuiltSection", "ContextSource"}
    await rt.aclose()


# -- the scripted model: an explicit script of the same protocol, repairing an effect ----------------


def scripted_responder(request: ModelRequest) -> dict[str, Any]:
    """Writer requests get narration; the parent writes, then commits a state change whose ruleId
    is wrong (`mood` for the trust path), and repairs exactly that pointer with one patch."""
    if not request.tools:
        return {"text": f"雾中传来回声。{narrate(request)}"}
    tail = request.messages[_context_index(request.messages) + 1 :]
    results = {m.tool_call_id: m.text() for m in tail if m.role == "tool"}
    calls = [c for m in tail for c in m.tool_calls]
    writer = next((c.id for c in calls if c.name == "rp_write_turn" and not results.get(c.id, "Error").startswith("Error")), None)
    if writer is None:
        return {"tool_calls": [{"name": "rp_write_turn", "arguments": {"action": "write"}}]}
    commits = [c for c in calls if c.name == "rp_commit_turn"]
    revision = int(re.search(r'\\?"expectedRevision\\?":(\d+)', request.messages[_context_index(request.messages)].text()).group(1))  # type: ignore[union-attr]
    if not commits:
        change = {"op": "increment", "path": "/林汐/信任", "by": 2, "ruleId": "mood", "reason": "她对你更信任了一点"}
        effect = {"kind": "state.update", "namespace": "story", "expectedRevision": revision, "payload": {"changes": [change]}}
        return {"tool_calls": [{"name": "rp_commit_turn", "arguments": {"references": {"writer": writer}, "effects": [effect]}}]}
    token = re.search(r"rct_[0-9A-Za-z_-]+", results[commits[-1].id]).group(0)  # type: ignore[union-attr]
    patch = {"op": "replace", "path": "/effects/0/payload/changes/0/ruleId", "value": "trust-shift"}
    return {"tool_calls": [{"name": "rp_commit_turn", "arguments": {"retry": {"token": token, "patches": [patch]}}}]}


def _context_index(messages: list[ChatMessage]) -> int:
    return max(i for i, m in enumerate(messages) if m.role == "user" and "<roleplay_request" in m.text())


async def test_sample_card_plays_ten_turns_with_a_scripted_model(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    scripted = ScriptedModel(responder=scripted_responder)
    route = Route("scripted", "scripted")
    rt.models[route.spec] = scripted
    for n, text in enumerate(INPUTS, start=1):
        result = await play_turn(rt, sid, text, parent_route=route)
        await check_turn(rt, result)
        assert (await story_value(rt, sid))["林汐"]["信任"] == 20 + 2 * n
        failed = [r for r in result.turn.tool_results if r.name == "rp_commit_turn" and not r.ok][0]
        assert failed.error["code"] == "commit.effect_invalid"  # type: ignore[index]
    # The parent's requests offer the Chat tool set only: no agent-only rp_asset or rp_state.
    first_parent = next(r for r in scripted.requests if r.tools)
    assert {t.name for t in first_parent.tools} == {"rp_write_turn", "rp_commit_turn", "rp_asset_read", "rp_state_read"}
    await check_replay(rt, sid)


async def test_a_commit_before_the_writer_is_masked_and_a_plain_answer_commits_nothing(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    route = Route("scripted", "scripted")
    rt.models[route.spec] = ScriptedModel(
        [
            {"tool_calls": [{"name": "rp_commit_turn", "arguments": {"references": {"writer": "x"}, "effects": []}}]},
            "灯塔有一百零八级台阶。",  # a plain discussion answer ends the turn
        ]
    )
    before = await story_value(rt, sid)
    result = await play_turn(rt, sid, "灯塔有多少级台阶？", parent_route=route)
    assert result.turn.outcome == "completed" and not result.committed
    assert result.turn.tool_results[0].error["code"] == "tool.not_available"  # type: ignore[index]
    assert result.reply == "灯塔有一百零八级台阶。" and await story_value(rt, sid) == before


# -- through the fake OpenAI-compatible server (real provider code path) -------------------------------


def wire_request(body: dict[str, Any]) -> ModelRequest:
    messages = []
    for m in body["messages"]:
        calls = [ToolCall(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in m.get("tool_calls") or []]
        content = m.get("content") or ""
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if p.get("type") == "text")
        messages.append(ChatMessage(m["role"], content, tool_calls=calls, tool_call_id=m.get("tool_call_id")))
    tools = [
        ToolSpec(t["function"]["name"], t["function"].get("description", ""), t["function"]["parameters"]) for t in body.get("tools") or []
    ]
    return ModelRequest(messages, tools)


def fake_responder(record: Any) -> FakeReply:
    reply = roleplay_demo_policy(wire_request(record.body)) or {"text": "…"}
    calls = [{"name": c["name"], "arguments": c["arguments"]} for c in reply.get("tool_calls", [])]
    return FakeReply(text=reply.get("text", ""), reasoning="thinking about the story", tool_calls=calls, chunk_size=16)


async def test_the_same_flow_through_the_fake_server(store: EventStore) -> None:
    from roleplay.harness.models.deepseek import deepseek_model

    rt, sid = await sample_story(store)
    with serve_fake_openai(flavor="deepseek", strict=True, responder=fake_responder) as fake:
        route = Route("deepseek", "deepseek-flash")
        rt.models[route.spec] = deepseek_model(api_key="sk-test", base_url=fake.base_url)
        async with store.subscribe(sid) as sub:
            for text in INPUTS:
                result = await play_turn(rt, sid, text, parent_route=route)
                await check_turn(rt, result)
            chunks = []
            while True:
                try:
                    note = await sub.next(timeout=0.2)
                except TimeoutError:
                    break
                if note.kind == "chunk":
                    chunks.append(note.data["text"])  # type: ignore[index]
        await rt.aclose()
    bodies = [r.body for r in fake.chat_requests]
    assert all(b["stream"] is True for b in bodies)
    # Reasoning round trip: assistant tool-call turns are sent back with reasoning_content (the
    # fake DeepSeek server answers 400 otherwise; the turns above completed).
    sent_back = [m for b in bodies for m in b["messages"] if m["role"] == "assistant" and m.get("tool_calls")]
    assert sent_back and all("reasoning_content" in m for m in sent_back)
    assert "".join(chunks).count("[demo · offline narration]") == 10  # each reply streamed once
    assert (await story_value(rt, sid))["林汐"]["信任"] == 30
    await check_replay(rt, sid)


# -- a real community card ---------------------------------------------------------------------------


async def test_a_corpus_card_with_an_embedded_lorebook_plays_three_turns(store: EventStore, corpus_dir: Any) -> None:
    rt = core_runtime(store)
    await ensure_seeds(rt.assets)
    imported = await AssetService(store).import_file((corpus_dir / "cards" / "default_Seraphina.png").read_bytes(), "default_Seraphina.png")
    assert any(a["kind"] == "lorebook" for a in imported.to_dict()["assets"])
    record, m = await create_story(rt, StoryRequest(card=imported.asset_id))
    assert m.opening_message_text and "{{char}}" not in m.opening_message_text
    for text in ("I wake up in the glade. Where am I?", "I ask about the forest of Eldoria.", "I thank Seraphina."):
        result = await play_turn(rt, record.id, text, parent_route=DEMO)
        await check_turn(rt, result)
    prepared = result.prepared
    assert "Eldoria" in prepared.build.writer_prompt  # the embedded lorebook activated
    await rt.aclose()


async def test_replay_after_undo_equals_the_log_without_the_turn(store: EventStore) -> None:
    from roleplay.core.message_actions import undo_last_turn

    rt, sid = await sample_story(store)
    await play_turn(rt, sid, INPUTS[0], parent_route=DEMO)
    after_one = await story_value(rt, sid)
    await play_turn(rt, sid, INPUTS[1], parent_route=DEMO)
    assert await story_value(rt, sid) != after_one
    await undo_last_turn(rt, sid)
    assert await story_value(rt, sid) == after_one
    await check_replay(rt, sid)
    loaded = await load(rt.store, sid, rt.service.projections.get("rp/state"), use_snapshot=False)
    assert state_document(loaded.state)["namespaces"]["story"]["value"] == after_one


# -- everything a card and a preset carry (issue 13 item 6) ----------------------------------------


async def test_a_cards_depth_prompt_reaches_the_writer_at_its_depth(store: EventStore, corpus_dir: Any) -> None:
    # 白棠's card carries a Character's Note (extensions.depth_prompt, depth 4, system).
    rt = core_runtime(store)
    await ensure_seeds(rt.assets)
    imported = await AssetService(store).import_file((corpus_dir / "cards" / "白棠-卡.json").read_bytes(), "白棠-卡.json")
    record, _ = await create_story(rt, StoryRequest(card=imported.asset_id))
    for text in ("I wake up in the glade.", "Where am I?", "I ask about the forest.", "I thank her."):
        result = await play_turn(rt, record.id, text, parent_route=DEMO)
        await check_turn(rt, result)
    from roleplay.core.run import prepare_run

    prepared = await prepare_run(rt, record.id, "I look around.", parent_route=DEMO)
    prompt = prepared.build.writer_prompt
    labels = [line for line in prompt.splitlines() if re.fullmatch(r"\[(User|Writing reply|Non-writing reply|Character's note)\]", line)]
    assert labels.count("[Character's note]") == 1
    assert len(labels) - 1 - labels.index("[Character's note]") == 4  # four messages after it
    assert "[白棠's body=" in prompt.split("[Character's note]\n", 1)[1].splitlines()[0]
    await rt.aclose()


async def test_a_presets_samplers_reach_the_recorded_writer_request(store: EventStore) -> None:
    rt = core_runtime(store)
    await ensure_seeds(rt.assets)
    assets = AssetService(store)
    card = (await assets.import_file(sample_card_bytes(), SAMPLE_CARD)).asset_id
    st_preset = {
        "prompts": [{"identifier": "main", "name": "Main Prompt", "content": "Write vividly.", "role": "system"}],
        "prompt_order": [{"character_id": 100001, "order": [{"identifier": "main", "enabled": True}]}],
        "temperature": 0.65,
        "top_p": 0.9,
        "presence_penalty": 0.3,
        "openai_max_tokens": 777,
        "openai_max_context": 8000,
    }
    preset = (await assets.import_file(json.dumps(st_preset).encode(), "vivid.json")).asset_id
    record, _ = await create_story(rt, StoryRequest(card=card, preset=preset))
    scripted = ScriptedModel(responder=scripted_responder)
    route = Route("scripted", "scripted")
    rt.models[route.spec] = scripted
    result = await play_turn(rt, record.id, INPUTS[0], parent_route=route)
    await check_turn(rt, result)
    writer_requests = [r for r in scripted.requests if not r.tools]
    assert [(r.temperature, r.top_p, r.presence_penalty, r.max_tokens) for r in writer_requests] == [(0.65, 0.9, 0.3, 777)]
    assert all(r.temperature is None for r in scripted.requests if r.tools)  # the parent keeps its own
    child = result.writer.child_session_id  # type: ignore[union-attr]
    [recorded] = [e.payload for e in await rt.service.events(child) if e.type == "model/request"]
    assert recorded["sampling"] == {"temperature": 0.65, "top_p": 0.9, "presence_penalty": 0.3} and recorded["maxTokens"] == 777
    # The preset's context size narrows the Writer's window; its max tokens is the reply reserve.
    assert result.prepared.build.window is not None
    assert (result.prepared.build.window.window, result.prepared.build.window.reply_reserve) == (8000, 777)
    await rt.aclose()


async def test_a_source_asset_edited_after_prepare_makes_the_commit_stale(store: EventStore) -> None:
    from roleplay.core.run import RpRun, prepare_run

    rt, sid = await sample_story(store)
    prepared = await prepare_run(rt, sid, "我问起钟声。", parent_route=DEMO)
    run = RpRun(rt, prepared)
    live = prepared.sources.live_revisions
    assert live and await run.commit.stale_sources() == []
    asset_id = sorted(live)[0]
    record = await rt.assets.get(asset_id)
    await rt.assets.update(asset_id, record.data, expected_revision=record.revision)
    problems = await run.commit.stale_sources()
    assert [(p.code, p.details["assetId"], p.details["expected"], p.details["current"]) for p in problems] == [
        ("commit.stale_source", asset_id, live[asset_id], live[asset_id] + 1)
    ]
