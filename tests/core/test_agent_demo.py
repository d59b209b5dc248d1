"""The offline demo model plays Agent mode: plan → write with a brief → polish → commit, on both
backends and through the fake OpenAI-compatible server on the real provider code path."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests_support import sample_story

from roleplay.core.execution_mode import set_mode
from roleplay.core.agent_demo import DEMO_PLAN, agent_demo_policy, tidy
from roleplay.core.demo import roleplay_demo_policy
from roleplay.core.run import RunResult, play_turn
from roleplay.core.runtime import RoleplayRuntime
from roleplay.core.settings import SettingsStore
from roleplay.core.subagent_catalog import SUBAGENT_MANAGER, edit_item, load_catalog, save_catalog
from roleplay.harness.models.routes import Route
from roleplay.harness.models.types import ChatMessage, ModelRequest, ToolCall, ToolSpec
from roleplay.harness.store import EventStore
from roleplay.state.events import state_document
from roleplay.testing.fake_openai import FakeReply, serve_fake_openai

pytestmark = pytest.mark.anyio
DEMO = Route("demo", "demo")


async def trust(rt: RoleplayRuntime, sid: str) -> int:
    value = state_document((await rt.service.projection(sid, "rp/state")).state)["namespaces"]["story"]["value"]
    return int(value["林汐"]["信任"])


def tools_called(result: RunResult) -> list[str]:
    return [r.name for r in result.turn.tool_results]


async def check_agent_turn(rt: RoleplayRuntime, result: RunResult) -> None:
    assert result.committed and result.prepared.mode == "agent", result.turn.error
    assert tools_called(result) == ["rp_run_subagent", "rp_write_turn", "rp_run_subagent", "rp_commit_turn"]
    events = await rt.service.events(result.session_id)
    calls = {e.payload["callId"]: json.loads(e.payload["arguments"]) for e in events if e.type == "tool/call"}
    plan, write, polish, _ = [calls[r.call_id] for r in result.turn.tool_results]
    assert plan["name"] == "Planning" and polish["name"] == "Polishing"
    assert write["brief"].startswith(DEMO_PLAN) and polish["input"]["draft"] == result.writer.text  # type: ignore[union-attr]
    [commit] = [r for r in result.turn.tool_results if r.name == "rp_commit_turn"]
    assert commit.meta["mode"] == "agent" and result.reply == tidy(result.writer.text)  # type: ignore[index, union-attr]


async def test_the_demo_plays_three_agent_turns(store: EventStore) -> None:
    rt, sid = await sample_story(store, plus_features=(SUBAGENT_MANAGER,))
    await set_mode(rt, sid, "agent")
    before = await trust(rt, sid)
    for text in ("我推开铁门。", "我问起晨星号。", "我们一起点亮灯。"):
        await check_agent_turn(rt, await play_turn(rt, sid, text, parent_route=DEMO))
    assert await trust(rt, sid) == before + 3
    await rt.aclose()


async def test_the_demo_without_specialists_writes_and_commits(store: EventStore) -> None:
    rt, sid = await sample_story(store, plus_features=(SUBAGENT_MANAGER,))
    await set_mode(rt, sid, "agent")
    settings = SettingsStore(store)
    for name in ("Planning", "Polishing"):
        catalog = await load_catalog(settings, "en")
        await save_catalog(settings, edit_item(catalog, name, {"enabled": False}), catalog.revision)
    result = await play_turn(rt, sid, "我推开铁门。", parent_route=DEMO)
    assert result.committed and tools_called(result) == ["rp_write_turn", "rp_commit_turn"]
    assert result.reply == result.writer.text  # type: ignore[union-attr]
    await rt.aclose()


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
    request = wire_request(record.body)
    reply = agent_demo_policy(request) or roleplay_demo_policy(request) or {"text": "…"}
    calls = [{"name": c["name"], "arguments": c["arguments"]} for c in reply.get("tool_calls", [])]
    return FakeReply(text=reply.get("text", ""), reasoning="planning the turn", tool_calls=calls, chunk_size=16)


async def test_an_agent_turn_through_the_fake_server(store: EventStore) -> None:
    from roleplay.harness.models.deepseek import deepseek_model

    rt, sid = await sample_story(store, plus_features=(SUBAGENT_MANAGER,))
    await set_mode(rt, sid, "agent")
    with serve_fake_openai(flavor="deepseek", strict=True, responder=fake_responder) as fake:
        route = Route("deepseek", "deepseek-flash")
        rt.models[route.spec] = deepseek_model(api_key="sk-test", base_url=fake.base_url)
        async with store.subscribe(sid) as sub:
            result = await play_turn(rt, sid, "我推开铁门。", parent_route=route)
            chunks = []
            while True:
                try:
                    note = await sub.next(timeout=0.2)
                except TimeoutError:
                    break
                if note.kind == "chunk":
                    chunks.append(note.data)
        await rt.aclose()
    await check_agent_turn(rt, result)
    # Parent, planner, Writer, polisher: each its own request; the specialists and the Writer get no tools.
    bodies = [r.body for r in fake.chat_requests]
    parent_bodies = [b for b in bodies if b.get("tools")]
    assert len(parent_bodies) == 4 and len(bodies) == 7
    assert {t["function"]["name"] for t in parent_bodies[0]["tools"]} >= {"rp_run_subagent", "rp_write_turn", "rp_asset", "rp_state"}
    # Only the final body streamed to subscribers (the Writer's draft is the parent's material).
    assert "".join(c["text"] for c in chunks) == result.reply  # type: ignore[index]


async def test_a_tool_free_route_in_agent_mode_commits_the_writers_draft(store: EventStore) -> None:
    rt, sid = await sample_story(store, plus_features=(SUBAGENT_MANAGER,))
    await set_mode(rt, sid, "agent")
    result = await play_turn(rt, sid, "我推开铁门。", parent_route=Route("demo", "demo", tools=False))
    assert result.committed and tools_called(result) == ["rp_write_turn", "rp_commit_turn"]
    assert result.reply == result.writer.text and "run.tool_free" in [d["code"] for d in result.diagnostics]  # type: ignore[union-attr]
    await rt.aclose()


def test_the_demo_polish_keeps_paragraphs() -> None:
    assert tidy("  One  two.\n\n\n  Three   four. \n") == "One two.\n\nThree four."


async def test_the_fake_servers_own_roleplay_protocol_plays_an_agent_turn(store: EventStore) -> None:
    from roleplay.harness.models.deepseek import deepseek_model

    rt, sid = await sample_story(store)
    await set_mode(rt, sid, "agent")
    with serve_fake_openai(flavor="deepseek") as fake:  # no script: the fake's roleplay protocol answers
        route = Route("deepseek", "deepseek-flash")
        rt.models[route.spec] = deepseek_model(api_key="sk-test", base_url=fake.base_url)
        result = await play_turn(rt, sid, "我推开铁门。", parent_route=route)
        await rt.aclose()
    assert result.committed and tools_called(result) == ["rp_write_turn", "rp_commit_turn"]
    assert result.reply == result.writer.text and "[fake server" in result.reply  # type: ignore[union-attr]
