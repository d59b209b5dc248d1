"""Contract tests of the session-runtime boundary (the spec's ``test:compat``, part 1).

If the harness changes how sessions, events or tool calls look, these fail before any roleplay
test does. They pin: the session snapshot, tool-call correlation, and tool registration,
validation and error propagation as roleplay code observes them in the log.
"""

from __future__ import annotations

import pytest

from roleplay.core.session_runtime import correlate_tool_calls, results_of_kind, session_snapshot
from roleplay.harness.loop import AgentLoop, AgentSpec
from roleplay.harness.models.scripted import ScriptedModel
from roleplay.harness.prompts import PromptAssembly, PromptSection
from roleplay.harness.sessions import SessionService
from roleplay.harness.store import EventStore
from roleplay.harness.tools import Tool, ToolOutput, ToolRegistry
from roleplay.errors import RpError

pytestmark = pytest.mark.anyio


def tools() -> ToolRegistry:
    def commit(args: dict, ctx: object) -> ToolOutput:
        if args["body"] == "bad":
            raise RpError("rp.commit.invalid", "body rejected", pointer="/body")
        return ToolOutput("committed", meta={"kind": "rp-agent/turn-commit", "effects": []})

    return ToolRegistry(
        [
            Tool(
                "rp_commit_turn",
                "Commit.",
                {"type": "object", "properties": {"body": {"type": "string"}}, "required": ["body"], "additionalProperties": False},
                commit,
            )
        ]
    )


async def play(store: EventStore) -> tuple[SessionService, str]:
    service = SessionService(store)
    sid = (await service.create("roleplay")).id
    model = ScriptedModel(
        [
            {
                "tool_calls": [
                    {"id": "c-bad", "name": "rp_commit_turn", "arguments": {"body": "bad"}},
                    {"id": "c-schema", "name": "rp_commit_turn", "arguments": {"body": 3}},
                ]
            },
            {"tool_calls": [{"id": "c-ok", "name": "rp_commit_turn", "arguments": {"body": "good"}}]},
            "Story continues.",
        ]
    )
    spec = AgentSpec(prompt=PromptAssembly([PromptSection("identity", "RP", 0)]), tools=tools())
    await AgentLoop(service, model, spec).run_turn(sid, "Go on.")
    return service, sid


async def test_snapshot_exposes_record_events_and_surface(store: EventStore) -> None:
    service, sid = await play(store)
    snap = await session_snapshot(service, sid)
    assert snap.record.id == sid and snap.record.preset == "roleplay"
    assert snap.head_seq == len(snap.events) == snap.events[-1].seq
    assert snap.event(1).type == "turn/start" and snap.event(snap.head_seq).type == "turn/end"
    assert [n["role"] for n in snap.surface] == ["user", "assistant", "tool", "tool", "assistant", "tool", "assistant"]
    partial = await session_snapshot(service, sid, until_seq=2)
    assert partial.head_seq == 2 and [n["role"] for n in partial.surface] == ["user"]


async def test_tool_calls_correlate_with_message_call_and_result(store: EventStore) -> None:
    service, sid = await play(store)
    snap = await session_snapshot(service, sid)
    calls = correlate_tool_calls(snap.events)
    assert set(calls) == {"c-bad", "c-schema", "c-ok"}
    ok = calls["c-ok"]
    assert ok.ok and ok.result["meta"]["kind"] == "rp-agent/turn-commit"  # type: ignore[index]
    msg = snap.event(ok.message_seq)  # type: ignore[arg-type]
    assert msg.type == "assistant/message" and msg.payload["messageId"] == ok.message_id
    assert snap.event(ok.call_seq).type == "tool/call" and snap.event(ok.result_seq).type == "tool/result"  # type: ignore[arg-type]
    assert ok.message_seq < ok.call_seq < ok.result_seq  # type: ignore[operator]
    assert ok.turn_id == msg.payload["turnId"] and ok.step_id == msg.payload["stepId"]
    # Error propagation: a handler's RpError keeps its code and pointer; a schema failure never
    # reaches the handler and carries the offending field.
    assert calls["c-bad"].result["error"] == {"code": "rp.commit.invalid", "message": "body rejected", "pointer": "/body"}  # type: ignore[index]
    assert calls["c-schema"].result["error"]["code"] == "tool.invalid_arguments"  # type: ignore[index]
    assert calls["c-schema"].result["error"]["pointer"] == "/body"  # type: ignore[index]
    assert [e.payload["callId"] for e in results_of_kind(snap.events, "rp-agent/turn-commit")] == ["c-ok"]


def test_tool_registration_contract() -> None:
    reg = tools()
    assert reg.names() == ["rp_commit_turn"]
    spec = reg.get("rp_commit_turn").spec()
    assert spec.parameters["required"] == ["body"] and spec.strict is False
    with pytest.raises(RpError) as exc:
        reg.register(reg.get("rp_commit_turn"))
    assert exc.value.code == "tool.duplicate"
