"""Sub-agents: one-shot child sessions with allow-listed tools, no recursion, structured results,
timeouts and abort from the parent."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from roleplay.errors import RpError, ValidationError
from roleplay.harness.models.scripted import ScriptedModel
from roleplay.harness.sessions import SessionService
from roleplay.harness.store import EventStore
from roleplay.harness.subagents import SubagentRequest, parse_structured, run_subagent
from roleplay.harness.tools import Tool, ToolRegistry

pytestmark = pytest.mark.anyio

PNG = {"type": "image", "mediaType": "image/png", "data": "iVBORw0KGgo="}


def registry() -> ToolRegistry:
    return ToolRegistry(
        [
            Tool(
                "lookup",
                "Look a word up.",
                {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
                lambda a, c: f"{a['q']}: a word",
            ),
            Tool("spawn", "Start a sub-agent.", {"type": "object"}, lambda a, c: "never", spawns_subagent=True),
        ]
    )


@pytest.fixture
def service(store: EventStore) -> SessionService:
    return SessionService(store)


async def test_child_session_gets_its_own_prompt_one_message_and_no_parent_history(service: SessionService) -> None:
    parent = await service.create("roleplay")
    model = ScriptedModel(["A moonlit garden."])
    req = SubagentRequest(
        preset="writer", system_prompt="You are the Writer.", user_text="Write the scene.", images=[PNG], title="writer run"
    )
    result = await run_subagent(service, parent.id, req, model=model)
    assert (result.outcome, result.text, result.tools) == ("completed", "A moonlit garden.", [])
    sent = model.requests[0]
    assert [m.role for m in sent.messages] == ["system", "user"] and sent.tools == []
    assert sent.messages[0].content == "You are the Writer."
    assert sent.messages[1].content == [{"type": "text", "text": "Write the scene."}, PNG]
    child = await service.get(result.session_id)
    assert (child.parent_id, child.preset, child.title) == (parent.id, "writer", "writer run")
    assert [c.id for c in await service.children(parent.id)] == [result.session_id]
    types = [e.type for e in await service.events(result.session_id)]
    assert types[0] == "turn/start" and types[-1] == "turn/end"


async def test_the_child_is_created_with_its_first_events_and_leased_for_its_turn(
    service: SessionService, store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One store call creates the child with its turn's first events, its first step's start and
    request included (one statement on PostgreSQL, its run lease taken by it); the turn's other
    events follow as appends, the first step reading nothing back; the lease is held until the
    turn ends."""
    from roleplay.harness.leases import held_lease, lease_taken, run_lease

    parent = await service.create("roleplay")
    created: list[list[str]] = []
    appended: list[list[str]] = []
    reads: list[int] = []
    create, append, read = store.create_session_with_events, store.append, store.read

    ids: list[str] = []

    async def creating(**kw: Any) -> Any:
        created.append([d.type for d in kw["events"]])
        ids.append(kw["session_id"])
        return await create(**kw)

    async def appending(session_id: str, expected_seq: int, drafts: Any) -> Any:
        appended.append([d.type for d in drafts])
        return await append(session_id, expected_seq, drafts)

    async def reading(session_id: str, **kw: Any) -> Any:
        reads.append(kw.get("after_seq", 0))
        return await read(session_id, **kw)

    monkeypatch.setattr(store, "create_session_with_events", creating)
    monkeypatch.setattr(store, "append", appending)
    monkeypatch.setattr(store, "read", reading)
    holding: list[bool] = []

    def respond(request: Any) -> str:
        lease = held_lease(store, ids[0])  # the child's run holds its lease while the model writes
        holding.append(lease is not None and (lease.alive is None or lease.alive()))
        return "The scene."

    req = SubagentRequest(preset="writer", system_prompt="You are the Writer.", user_text="Write the scene.")
    async with run_lease(store, parent.id):
        result = await run_subagent(service, parent.id, req, model=ScriptedModel(responder=respond))
        assert held_lease(store, result.session_id) is None
    assert created == [["turn/start", "user/message", "step/start", "model/request"]] and reads == []
    assert appended == [["assistant/message", "step/end", "turn/end"]]
    assert [e.type for e in await service.events(result.session_id)] == [t for batch in created + appended for t in batch]
    assert holding == [True] and not await lease_taken(store, result.session_id)
    async with run_lease(store, result.session_id):  # given back
        pass

    with pytest.raises(RpError) as missing:  # the parent must exist: nothing is created, nothing held
        await run_subagent(service, "ses_nope", req, model=ScriptedModel(["x"]))
    assert missing.value.code == "session.not_found"


async def test_tool_allow_list_is_intersected_and_spawners_are_removed(service: SessionService) -> None:
    parent = await service.create("roleplay")
    model = ScriptedModel([{"tool_calls": [{"name": "lookup", "arguments": {"q": "moon"}}]}, "done"])
    req = SubagentRequest(preset="task", system_prompt="Task.", user_text="Do it.", tools=["lookup", "spawn", "not-installed"])
    result = await run_subagent(service, parent.id, req, model=model, tools=registry())
    assert result.tools == ["lookup"] and result.ignored_tools == ["spawn", "not-installed"]
    assert [t.name for t in model.requests[0].tools] == ["lookup"]
    assert model.requests[1].messages[-1].content == "moon: a word"


async def test_no_recursion(service: SessionService) -> None:
    parent = await service.create("roleplay")
    with pytest.raises(RpError) as exc:
        await run_subagent(service, parent.id, SubagentRequest("t", "s", "u"), model=ScriptedModel(["x"]), depth=1)
    assert exc.value.code == "subagent.recursion"
    assert await service.children(parent.id) == []


async def test_structured_result_validated_against_schema(service: SessionService) -> None:
    parent = await service.create("roleplay")
    schema = {
        "type": "object",
        "properties": {"options": {"type": "array", "items": {"type": "string"}, "minItems": 2}},
        "required": ["options"],
    }
    ok = await run_subagent(
        service,
        parent.id,
        SubagentRequest("t", "s", "u", result_schema=schema),
        model=ScriptedModel(['```json\n{"options": ["a", "b"]}\n```']),
    )
    assert ok.data == {"options": ["a", "b"]}
    with pytest.raises(RpError) as exc:
        await run_subagent(
            service, parent.id, SubagentRequest("t", "s", "u", result_schema=schema), model=ScriptedModel(['{"options": ["a"]}'])
        )
    assert exc.value.code == "subagent.invalid_result" and exc.value.pointer == "/options"
    assert exc.value.details["childSessionId"]


async def test_timeout_aborts_the_child_and_leaves_a_closed_log(service: SessionService) -> None:
    async def slow(req: Any) -> str:
        await asyncio.sleep(30)
        return "late"

    parent = await service.create("roleplay")
    with pytest.raises(RpError) as exc:
        await run_subagent(service, parent.id, SubagentRequest("t", "s", "u", timeout=0.2), model=ScriptedModel(responder=slow))
    assert exc.value.code == "subagent.timeout"
    events = await service.events(exc.value.details["childSessionId"])
    assert events[-1].type == "turn/end" and events[-1].payload["outcome"] == "aborted"


async def test_parent_abort_propagates(service: SessionService) -> None:
    async def slow(req: Any) -> str:
        await asyncio.sleep(30)
        return "late"

    parent = await service.create("roleplay")
    abort = asyncio.Event()
    task = asyncio.ensure_future(
        run_subagent(service, parent.id, SubagentRequest("t", "s", "u"), model=ScriptedModel(responder=slow), abort=abort)
    )
    await asyncio.sleep(0.2)
    abort.set()
    with pytest.raises(RpError) as exc:
        await asyncio.wait_for(task, 10)
    assert exc.value.code == "subagent.aborted"


async def test_failures_and_bad_requests(service: SessionService) -> None:
    parent = await service.create("roleplay")
    with pytest.raises(RpError) as exc:
        await run_subagent(service, parent.id, SubagentRequest("t", "s", "u"), model=ScriptedModel([RpError("model.auth", "bad key")]))
    assert exc.value.code == "subagent.failed" and exc.value.details["error"]["code"] == "model.auth"
    with pytest.raises(ValidationError) as exc:
        await run_subagent(service, parent.id, SubagentRequest("t", "  ", "u"), model=ScriptedModel(["x"]))
    assert exc.value.pointer == "/systemPrompt"
    with pytest.raises(ValidationError) as exc:
        await run_subagent(
            service, parent.id, SubagentRequest("t", "s", "u", images=[{"type": "text", "text": "x"}]), model=ScriptedModel(["x"])
        )
    assert exc.value.pointer == "/images/0"
    with pytest.raises(ValidationError) as exc:
        await run_subagent(service, parent.id, SubagentRequest("t", "s", "u", result_schema={"type": 5}), model=ScriptedModel(["x"]))
    assert exc.value.pointer.startswith("/resultSchema")  # type: ignore[union-attr]


def test_parse_structured() -> None:
    assert parse_structured(' {"a": 1} ', {"type": "object"}) == {"a": 1}
    with pytest.raises(RpError) as exc:
        parse_structured("not json", {"type": "object"})
    assert exc.value.code == "subagent.invalid_result"
