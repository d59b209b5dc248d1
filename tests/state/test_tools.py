"""``rp_state_read`` and ``rp_state`` through ``ToolRegistry.execute`` and the agent loop, against a
real store: configuration owned by the calling reply, retracted by delete, kept by edit."""

from __future__ import annotations

import json
from typing import Any

import pytest

from roleplay.canonical import canonical_json
from roleplay.harness.events import EventDraft
from roleplay.harness.loop import AgentLoop, AgentSpec
from roleplay.harness.models.scripted import ScriptedModel
from roleplay.harness.models.types import ToolCall
from roleplay.harness.prompts import PromptAssembly, PromptSection
from roleplay.harness.sessions import SessionService
from roleplay.harness.store import EventStore
from roleplay.harness.tools import ToolContext, ToolRegistry
from roleplay.state.events import state_document, state_projection
from roleplay.state.projection import bootstrap_payload
from roleplay.state.tools import AGENT_ONLY_TOOLS, read_state, state_tools

pytestmark = pytest.mark.anyio
AFF = "/characters/李钰/好感度"


async def setup(store: EventStore, make: Any) -> tuple[SessionService, ToolRegistry, str]:
    service = SessionService(store)
    registry = ToolRegistry(state_tools(service))
    boot = bootstrap_payload(make.definition(), make.value())
    seed = [
        EventDraft("command/run", {"commandId": "boot", "name": "rp-session-apply", "args": {"stateBootstrap": boot}}),
        EventDraft("command/done", {"commandId": "boot", "kind": "success"}),
    ]
    sid = (await service.create("roleplay", seed=seed)).id
    return service, registry, sid


async def read(registry: ToolRegistry, sid: str, args: dict[str, Any]) -> Any:
    out = await registry.execute(ToolCall("r1", "rp_state_read", json.dumps(args, ensure_ascii=False)), ToolContext(sid, None, None, "r1"))
    return json.loads(out.content) if out.ok else out.error


async def doc(service: SessionService, sid: str) -> dict[str, Any]:
    return state_document((await service.projection(sid, state_projection)).state)


def loop(service: SessionService, registry: ToolRegistry, *replies: Any) -> AgentLoop:
    spec = AgentSpec(prompt=PromptAssembly([PromptSection("identity", "RP", 0)]), tools=registry, mode="agent")
    return AgentLoop(service, ScriptedModel(list(replies)), spec)


async def test_read_views(store: EventStore, make: Any) -> None:
    service, registry, sid = await setup(store, make)
    assert await read(registry, sid, {}) == {
        "revision": 1,
        "namespaces": {"story": {"title": "故事", "description": "主线状态", "updateMode": "rules-required", "revision": 1}},
    }
    assert (await read(registry, sid, {"view": "values"}))["values"] == {"story": make.value()}
    assert (await read(registry, sid, {"view": "definitions", "namespace": "story"}))["definitions"]["story"] == make.definition()
    assert await read(registry, sid, {"pointer": AFF}) == {
        "revision": 1,
        "namespace": "story",
        "namespaceRevision": 1,
        "pointer": AFF,
        "value": 10,
    }
    assert (await read(registry, sid, {"view": "value"}))["value"] == make.value()
    for args, code, pointer in [
        ({"namespace": "nope"}, "state.read.namespace_unknown", "/namespace"),
        ({"pointer": "no-slash"}, "state.read.pointer_invalid", "/pointer"),
        ({"pointer": "/characters/王五"}, "state.read.path_missing", "/pointer"),
        ({"view": "all"}, "tool.invalid_arguments", "/view"),
    ]:
        err = await read(registry, sid, args)
        assert (err["code"], err.get("pointer")) == (code, pointer)


async def test_rp_state_configures_for_the_calling_reply_edit_keeps_delete_retracts(store: EventStore, make: Any) -> None:
    service, registry, sid = await setup(store, make)
    assert AGENT_ONLY_TOOLS == {"rp_state"}
    update = {"action": "update", "expectedRevision": 1, "definition": make.definition("schema-only")}
    result = await loop(
        service, registry,
        {"tool_calls": [{"id": "c-read", "name": "rp_state_read", "arguments": {"pointer": AFF}}]},
        {"tool_calls": [{"id": "c-cfg", "name": "rp_state", "arguments": update}]},
        "已改为 schema-only。",
    ).run_turn(sid, "把变量改成只校验 schema")  # fmt: skip
    assert result.outcome == "completed" and [r.ok for r in result.tool_results] == [True, True]
    assert json.loads(result.tool_results[1].content)["revision"] == 2
    assert (await doc(service, sid))["namespaces"]["story"]["definition"]["updateMode"] == "schema-only"

    events = await service.events(sid)
    run = next(e for e in events if e.type == "command/run" and e.payload["name"] == "rp-state-configure")
    owner_msg = next(e for e in events if e.type == "assistant/message" and any(c["id"] == "c-cfg" for c in e.payload.get("toolCalls", [])))
    assert run.payload["args"]["owner"] == {
        "messageId": owner_msg.payload["messageId"], "toolCallId": "c-cfg", "turnId": owner_msg.payload["turnId"],
        "stepId": owner_msg.payload["stepId"], "tool": "rp_state",
    }  # fmt: skip

    head = await store.head(sid)
    edit = {"op": "replace", "range": "node", "targetMessageId": owner_msg.payload["messageId"]}
    await service.append(
        sid,
        [EventDraft("assistant/message", {"messageId": "e1", "content": [{"type": "text", "text": "(edited)"}], "surfaceOp": edit})],
        expected_seq=head,
    )
    assert (await doc(service, sid))["namespaces"]["story"]["definition"]["updateMode"] == "schema-only"

    user = next(e for e in events if e.type == "user/message")
    delete = {"op": "replace", "range": "suffix", "targetMessageId": user.payload["messageId"]}
    await service.append(
        sid, [EventDraft("assistant/message", {"messageId": "d1", "content": [], "surfaceOp": delete})], expected_seq=head + 1
    )
    after = await doc(service, sid)
    assert after["namespaces"]["story"]["definition"]["updateMode"] == "rules-required" and after["namespaces"]["story"]["revision"] == 1


async def test_a_rejected_configuration_leaves_the_projection_byte_identical(store: EventStore, make: Any) -> None:
    service, registry, sid = await setup(store, make)
    before = canonical_json((await service.projection(sid, state_projection)).state["view"])
    bad_definition = make.definition()
    bad_definition["schema"]["properties"]["day"]["pattern"] = "^[0-9]+$"
    result = await loop(
        service, registry,
        {"tool_calls": [
            {"id": "c1", "name": "rp_state", "arguments": {"action": "update", "expectedRevision": 4, "definition": make.definition()}},
            {"id": "c2", "name": "rp_state", "arguments": {"action": "update", "expectedRevision": 1, "definition": bad_definition}},
            {"id": "c3", "name": "rp_state", "arguments": {"action": "create", "expectedRevision": 0}},
        ]},
        "好的。",
    ).run_turn(sid, "改一下")  # fmt: skip
    errors = [r.error for r in result.tool_results]
    assert [(e["code"], e["pointer"]) for e in errors] == [
        ("state.config.rejected", "/expectedRevision"),
        ("state.config.rejected", "/definition/schema/properties/day/pattern"),
        ("state.config.rejected", "/definition"),
    ]
    assert errors[2]["details"]["problems"][1]["pointer"] == "/initialValue"
    assert not [e for e in await service.events(sid) if e.type == "command/run" and e.payload["name"] == "rp-state-configure"]
    assert canonical_json((await service.projection(sid, state_projection)).state["view"]) == before


async def test_rp_state_needs_an_owning_reply(store: EventStore, make: Any) -> None:
    service, registry, sid = await setup(store, make)
    call = ToolCall("c9", "rp_state", json.dumps({"action": "reset", "expectedRevision": 1}))
    outside = await registry.execute(call, ToolContext(sid, None, None, "c9"))
    assert outside.error is not None and outside.error["code"] == "state.config.no_owner"
    unknown = await registry.execute(call, ToolContext(sid, "t", "s", "c9"))
    assert unknown.error is not None and unknown.error["code"] == "state.config.no_owner"
    # A message that made the call but under another step is not a consistent owner.
    msg = {
        "messageId": "a1",
        "content": [],
        "toolCalls": [{"id": "c9", "name": "rp_state", "arguments": "{}"}],
        "turnId": "t",
        "stepId": "s",
    }
    await service.append(
        sid,
        [
            EventDraft("assistant/message", msg),
            EventDraft("tool/call", {"callId": "c9", "name": "rp_state", "arguments": "{}", "turnId": "t", "stepId": "s"}),
        ],
        expected_seq=2,
    )
    wrong = await registry.execute(call, ToolContext(sid, "t", "other", "c9"))
    assert wrong.error is not None and (wrong.error["code"], wrong.error["pointer"]) == (
        "state.config.owner_inconsistent",
        "/args/owner/stepId",
    )
    ok = await registry.execute(call, ToolContext(sid, "t", "s", "c9"))
    assert ok.ok and ok.meta is not None and ok.meta["kind"] == "rp-state/configure" and ok.meta["revision"] == 2


def test_read_state_is_pure(projection: dict[str, Any]) -> None:
    snapshot = canonical_json(projection)
    assert read_state(projection, {"view": "values", "namespace": "story"})["values"]["story"]["day"] == 1
    assert canonical_json(projection) == snapshot
