"""The agent loop: lifecycle events, tools, step limit, abort, crash recovery, one run per session,
and the real provider path through the fake OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import select
from typing import Any

import pytest

from roleplay.errors import ConflictError, RpError
from roleplay.harness.events import EventDraft
from roleplay.harness.leases import run_lease
from roleplay.harness.loop import AgentLoop, AgentSpec, LoopHooks, StepView
from roleplay.harness.models.deepseek import deepseek_model
from roleplay.harness.models.openai_compat import OpenAICompatModel
from roleplay.harness.models.scripted import ScriptedModel
from roleplay.harness.projections import fold
from roleplay.harness.prompts import PromptAssembly, PromptSection
from roleplay.harness.sessions import SessionService
from roleplay.harness.store import EventStore
from roleplay.harness.surface import surface_projection
from roleplay.harness.tools import Tool, ToolOutput, ToolRegistry
from roleplay.harness.turns import turns_projection
from roleplay.testing.fake_openai import FakeError, FakeReply, serve_fake_openai

pytestmark = pytest.mark.anyio


def add_tool() -> Tool:
    return Tool(
        "add",
        "Add two integers.",
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
            "additionalProperties": False,
        },
        lambda args, ctx: ToolOutput(str(args["a"] + args["b"]), meta={"kind": "test/sum"}),
        guidance="Use add for arithmetic.",
    )


def slow_tool() -> Tool:
    async def handler(args: dict[str, Any], ctx: Any) -> str:
        await asyncio.sleep(30)
        return "late"

    return Tool("slow", "Takes forever.", {"type": "object", "properties": {}}, handler)


def spec(**kw: Any) -> AgentSpec:
    tools = kw.pop("tools", ToolRegistry([add_tool(), slow_tool()]))
    return AgentSpec(prompt=PromptAssembly([PromptSection("identity", "You are a test agent.", 0)]), tools=tools, **kw)


@pytest.fixture
def service(store: EventStore) -> SessionService:
    return SessionService(store)


async def types(service: SessionService, sid: str) -> list[str]:
    return [e.type for e in await service.events(sid)]


async def test_plain_turn_logs_the_full_lifecycle(service: SessionService) -> None:
    model = ScriptedModel(["Hello back."])
    sid = (await service.create("chat")).id
    result = await AgentLoop(service, model, spec()).run_turn(sid, "Hello")
    assert (result.outcome, result.text, result.steps) == ("completed", "Hello back.", 1)
    assert await types(service, sid) == [
        "turn/start",
        "user/message",
        "step/start",
        "model/request",
        "assistant/message",
        "step/end",
        "turn/end",
    ]
    events = await service.events(sid)
    req = events[3].payload
    assert req["sections"] == ["identity", "tool:add"] and len(req["hash"]) == 64 and req["tools"] == ["add", "slow"]
    assert req["route"]["provider"] == "scripted"
    assert events[-1].payload == {"turnId": result.turn_id, "outcome": "completed"}
    assert [m.role for m in model.requests[0].messages] == ["system", "user"]
    assert "Use add for arithmetic." in model.requests[0].messages[0].content


async def test_tool_calls_run_in_order_and_fold_back_to_the_surface(service: SessionService) -> None:
    model = ScriptedModel(
        [
            {
                "tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}, {"name": "add", "arguments": {"a": 1, "b": "x"}}],
                "reasoning": "need sums",
            },
            "The sum is 5.",
        ]
    )
    sid = (await service.create("chat")).id
    result = await AgentLoop(service, model, spec()).run_turn(sid, "2+3?")
    assert result.outcome == "completed" and result.steps == 2
    assert [r.ok for r in result.tool_results] == [True, False]
    assert result.tool_results[0].meta == {"kind": "test/sum"}
    assert result.tool_results[1].error["code"] == "tool.invalid_arguments" and result.tool_results[1].error["pointer"] == "/b"  # type: ignore[index]
    assert await types(service, sid) == [
        "turn/start", "user/message",
        "step/start", "model/request", "assistant/message", "tool/call", "tool/result", "tool/call", "tool/result", "step/end",
        "step/start", "model/request", "assistant/message", "step/end",
        "turn/end",
    ]  # fmt: skip
    second = model.requests[1].messages
    assert [m.role for m in second] == ["system", "user", "assistant", "tool", "tool"]
    assert second[2].reasoning == "need sums" and [c.name for c in second[2].tool_calls] == ["add", "add"]
    assert second[3].content == "5" and second[3].tool_call_id == second[2].tool_calls[0].id
    # The durable log folds back to the same surface the live run built.
    events = await service.events(sid)
    assert fold(surface_projection, events) == await service.surface(sid)


def record_appends(store: EventStore, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The event types of each append the store is asked for, in order."""
    batches: list[list[str]] = []
    append = store.append

    async def recording(session_id: str, expected_seq: int, drafts: Any) -> Any:
        batches.append([d.type for d in drafts])
        return await append(session_id, expected_seq, drafts)

    monkeypatch.setattr(store, "append", recording)
    return batches


async def test_a_step_that_ends_the_turn_goes_out_with_the_turn_end(
    service: SessionService, store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One append (one round trip on PostgreSQL) for the last step's events and the turn's end;
    a step's start and request go out with what precedes them (the turn's first events, the
    previous step's last), the request built over the surface with those folded in."""
    batches = record_appends(store, monkeypatch)
    model = ScriptedModel([{"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]}, {"text": "Five.", "finish_reason": "length"}])
    sid = (await service.create("chat")).id
    result = await AgentLoop(service, model, spec()).run_turn(sid, "2+3?")
    assert (result.outcome, result.text, result.finish_reason) == ("completed", "Five.", "length")
    assert batches == [
        ["turn/start", "user/message", "step/start", "model/request"], ["assistant/message", "tool/call"],
        ["tool/result", "step/end", "step/start", "model/request"], ["assistant/message", "step/end", "turn/end"],
    ]  # fmt: skip
    assert model.requests[0].messages[-1].role == "user"  # the user message, sent with the request's events
    assert model.requests[1].messages[-1].role == "tool"  # the result, sent with the second step's
    assert [e.type for e in await service.events(sid)] == [t for batch in batches for t in batch]

    class Refusing(LoopHooks):
        def finished(self, results: list) -> bool:  # type: ignore[override]
            raise RpError("commit.stale_context", "the story moved")

    batches.clear()
    model = ScriptedModel([{"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 1}}]}])
    result = await AgentLoop(service, model, spec(hooks=Refusing())).run_turn(sid, "again")
    assert result.outcome == "error" and result.error["code"] == "commit.stale_context"  # type: ignore[index]
    assert batches[-1] == ["tool/result", "step/end", "turn/end"]
    assert (await service.events(sid))[-1].payload["outcome"] == "error"


async def test_step_limit_ends_the_turn_without_inventing_text(service: SessionService) -> None:
    model = ScriptedModel(responder=lambda req: {"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 1}}]})
    sid = (await service.create("chat")).id
    result = await AgentLoop(service, model, spec(step_limit=3)).run_turn(sid, "loop forever")
    assert (result.outcome, result.steps, result.text) == ("step-limit", 3, "")
    events = await service.events(sid)
    assert events[-1].payload["outcome"] == "step-limit"
    assistant_texts = [b for e in events if e.type == "assistant/message" for b in e.payload["content"] if b["type"] == "text"]
    assert assistant_texts == [] and len(model.requests) == 3


async def test_step_mask_makes_masked_calls_fail_without_changing_the_offered_tools(service: SessionService) -> None:
    model = ScriptedModel([{"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 1}}]}, "ok"])

    def mask(view: StepView) -> list[str]:
        return ["slow"]  # in every step only `slow` may be called

    sid = (await service.create("chat")).id
    result = await AgentLoop(service, model, spec(step_mask=mask)).run_turn(sid, "x")
    assert result.tool_results[0].error["code"] == "tool.not_available"  # type: ignore[index]
    assert [t.name for t in model.requests[0].tools] == ["add", "slow"] == [t.name for t in model.requests[1].tools]


async def test_visible_tool_set_drops_tool_sections(service: SessionService) -> None:
    model = ScriptedModel(["fine"])
    sid = (await service.create("chat")).id
    await AgentLoop(service, model, spec(allowed_tools=["slow"])).run_turn(sid, "x")
    assert [t.name for t in model.requests[0].tools] == ["slow"]
    req = [e for e in await service.events(sid) if e.type == "model/request"][0].payload
    assert req["sections"] == ["identity"]


async def test_model_error_ends_the_turn_with_error(service: SessionService) -> None:
    model = ScriptedModel([RpError("model.context_overflow", "too long", details={"limit": 10})])
    sid = (await service.create("chat")).id
    result = await AgentLoop(service, model, spec()).run_turn(sid, "x")
    assert result.outcome == "error" and result.error["code"] == "model.context_overflow"  # type: ignore[index]
    end = (await service.events(sid))[-1]
    assert end.payload["outcome"] == "error" and end.payload["error"]["code"] == "model.context_overflow"


async def test_abort_during_a_tool_call_closes_the_turn_and_answers_the_call(service: SessionService) -> None:
    model = ScriptedModel([{"tool_calls": [{"name": "slow", "arguments": {}}, {"name": "add", "arguments": {"a": 1, "b": 2}}]}])
    sid = (await service.create("chat")).id
    abort = asyncio.Event()
    task = asyncio.ensure_future(AgentLoop(service, model, spec()).run_turn(sid, "x", abort=abort))
    await asyncio.sleep(0.3)
    abort.set()
    result = await asyncio.wait_for(task, 10)
    assert result.outcome == "aborted"
    events = await service.events(sid)
    assert events[-1].payload["outcome"] == "aborted"
    results = [e.payload for e in events if e.type == "tool/result"]
    assert [r["error"]["code"] for r in results] == ["tool.aborted", "tool.aborted"]
    surface = await service.surface(sid)
    assert [n["role"] for n in surface["nodes"]] == ["user", "assistant", "tool", "tool"]


async def test_abort_while_the_model_streams(service: SessionService) -> None:
    async def never(req: Any) -> str:
        await asyncio.sleep(60)
        return "never"

    model = ScriptedModel(responder=never)
    sid = (await service.create("chat")).id
    abort = asyncio.Event()
    task = asyncio.ensure_future(AgentLoop(service, model, spec()).run_turn(sid, "x", abort=abort))
    await asyncio.sleep(0.2)
    abort.set()
    result = await asyncio.wait_for(task, 10)
    assert result.outcome == "aborted"
    assert "assistant/message" not in await types(service, sid)


async def test_crash_leaves_an_open_turn_that_the_next_start_closes(service: SessionService) -> None:
    sid = (await service.create("chat")).id
    # What a process that died mid-turn leaves behind: an open turn and a dangling tool call.
    await service.append(
        sid,
        [
            EventDraft("turn/start", {"turnId": "t0"}),
            EventDraft("user/message", {"messageId": "u0", "content": [{"type": "text", "text": "hi"}]}),
            EventDraft(
                "assistant/message", {"messageId": "a0", "content": [], "toolCalls": [{"id": "c0", "name": "add", "arguments": "{}"}]}
            ),
            EventDraft("tool/call", {"callId": "c0", "name": "add", "arguments": "{}"}),
        ],
        expected_seq=0,
    )
    model = ScriptedModel(["recovered"])
    result = await AgentLoop(service, model, spec()).run_turn(sid, "again")
    assert result.outcome == "completed"
    events = await service.events(sid)
    assert [e.type for e in events[4:6]] == ["tool/result", "turn/end"]
    assert events[4].payload["error"]["code"] == "tool.interrupted"
    assert events[5].payload == {"turnId": "t0", "outcome": "interrupted"}
    assert [m.role for m in model.requests[0].messages] == ["system", "user", "assistant", "tool", "user"]


async def crashed_inside_a_child(service: SessionService) -> tuple[str, str]:
    """What a process killed inside a sub-agent (the Writer) leaves: the parent's turn open with a
    dangling spawning call, and the child's turn open with its user message and request."""
    sid = (await service.create("chat")).id
    await service.append(
        sid,
        [
            EventDraft("turn/start", {"turnId": "t0"}),
            EventDraft("user/message", {"messageId": "u0", "content": [{"type": "text", "text": "hi"}], "turnId": "t0"}),
            EventDraft(
                "assistant/message", {"messageId": "a0", "content": [], "toolCalls": [{"id": "c0", "name": "write", "arguments": "{}"}]}
            ),
            EventDraft("tool/call", {"callId": "c0", "name": "write", "arguments": "{}", "turnId": "t0"}),
        ],
        expected_seq=0,
    )
    child = (await service.create("rp-writer", parent_id=sid)).id
    await service.append(
        child,
        [
            EventDraft("turn/start", {"turnId": "w0"}),
            EventDraft("user/message", {"messageId": "wu0", "content": [{"type": "text", "text": "write"}], "turnId": "w0"}),
            EventDraft("step/start", {"turnId": "w0", "stepId": "s0", "index": 0}),
        ],
        expected_seq=0,
    )
    return sid, child


async def test_closing_a_crashed_turn_closes_the_child_turn_it_left_open(service: SessionService) -> None:
    """Issue 18.2: a run killed inside the Writer left the Writer's turn open forever."""
    sid, child = await crashed_inside_a_child(service)
    done = (await service.create("rp-writer", parent_id=sid)).id  # a finished child stays untouched
    await service.append(
        done, [EventDraft("turn/start", {"turnId": "d0"}), EventDraft("turn/end", {"turnId": "d0", "outcome": "completed"})], expected_seq=0
    )
    result = await AgentLoop(service, ScriptedModel(["recovered"]), spec()).run_turn(sid, "again")
    assert result.outcome == "completed"
    child_events = await service.events(child)
    assert child_events[-1].type == "turn/end" and child_events[-1].payload == {"turnId": "w0", "outcome": "interrupted"}
    assert (await service.projection(child, turns_projection)).state["open"] == {}
    assert await types(service, done) == ["turn/start", "turn/end"]
    # Closing is idempotent: the next run finds nothing left to close.
    head = await service.store.head(child)
    await AgentLoop(service, ScriptedModel(["again"]), spec()).run_turn(sid, "more")
    assert await service.store.head(child) == head


async def test_a_child_holding_its_own_lease_is_left_alone(service: SessionService, store: EventStore) -> None:
    sid, child = await crashed_inside_a_child(service)
    async with run_lease(store, child):  # something alive still runs it: not an orphan
        closed = await AgentLoop(service, ScriptedModel(["x"]), spec()).run_turn(sid, "again")
    assert closed.outcome == "completed"
    assert (await service.projection(child, turns_projection)).state["open"] == {"w0": 1}


async def test_a_turn_runs_on_a_lease_its_caller_already_holds(service: SessionService, store: EventStore) -> None:
    sid = (await service.create("chat")).id
    other = (await service.create("chat")).id
    async with run_lease(store, sid) as lease:
        head = await store.head(sid)  # read under the lease: nothing can move it before the turn starts
        result = await AgentLoop(service, ScriptedModel(["ok"]), spec()).run_turn(sid, "hi", lease=lease)
        assert result.outcome == "completed" and (await service.events(sid))[head].type == "turn/start"
        with pytest.raises(RpError) as exc:
            await AgentLoop(service, ScriptedModel(["no"]), spec()).run_turn(other, "hi", lease=lease)
        assert exc.value.code == "run.lease_invalid"
    with pytest.raises(RpError) as exc:
        await AgentLoop(service, ScriptedModel(["no"]), spec()).run_turn(sid, "hi", lease=lease)  # released
    assert exc.value.code == "run.lease_invalid"


async def test_one_active_run_per_session(service: SessionService, store: EventStore) -> None:
    sid = (await service.create("chat")).id
    async with run_lease(store, sid):
        with pytest.raises(ConflictError) as exc:
            await AgentLoop(service, ScriptedModel(["x"]), spec()).run_turn(sid, "second")
        assert exc.value.code == "run.busy"
    assert await types(service, sid) == []  # the refused start wrote nothing
    other = (await service.create("chat")).id
    async with run_lease(store, sid):
        assert (await AgentLoop(service, ScriptedModel(["y"]), spec()).run_turn(other, "fine")).outcome == "completed"


async def test_a_run_whose_lease_connection_dies_stops_before_its_next_write(service: SessionService, store: EventStore) -> None:
    """PostgreSQL: the lease went with its connection, so another run may start; this one writes
    nothing more (store.lease_lost) and the next run closes its turn as interrupted."""
    if store.dialect != "postgresql":
        pytest.skip("only a PostgreSQL lease can be lost while its process lives")
    import psycopg
    from tests_support import postgres_url_or_skip

    async def kill_the_lease_connection(args: dict[str, Any], ctx: Any) -> str:
        pid = store.leases.backend_pid  # type: ignore[attr-defined]
        async with await psycopg.AsyncConnection.connect(postgres_url_or_skip(), autocommit=True) as conn:
            await conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
            for _ in range(100):
                if not await (await conn.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,))).fetchall():
                    break
                await asyncio.sleep(0.02)
        # The server's goodbye must have reached this end's socket too: the lease check reads what
        # has arrived without a round trip, and a check made before it arrives sees a live lease.
        sock = store.leases._conn.pgconn.socket  # type: ignore[attr-defined]
        for _ in range(100):
            if select.select([sock], [], [], 0)[0]:
                break
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.05)  # its FATAL message comes first, the close a moment later
        return "killed"

    killer = Tool("kill", "Ends the lease connection.", {"type": "object", "properties": {}}, kill_the_lease_connection)
    sid = (await service.create("chat")).id
    model = ScriptedModel([{"tool_calls": [{"name": "kill", "arguments": {}}]}, "never written"])
    with pytest.raises(RpError) as exc:
        await AgentLoop(service, model, spec(tools=ToolRegistry([killer]))).run_turn(sid, "hi")
    assert exc.value.code == "store.lease_lost"
    assert (await types(service, sid))[-1] == "tool/call"  # neither the result nor a turn/end
    again = await AgentLoop(service, ScriptedModel(["back"]), spec()).run_turn(sid, "again")  # a new lease connection
    assert again.outcome == "completed"
    ends = [e.payload["outcome"] for e in await service.events(sid) if e.type == "turn/end"]
    assert ends == ["interrupted", "completed"]


async def test_chunks_stream_to_subscribers(service: SessionService, store: EventStore) -> None:
    sid = (await service.create("chat")).id
    model = ScriptedModel([{"text": "one two three four", "reasoning": "hmm"}])
    async with store.subscribe(sid) as sub:
        await AgentLoop(service, model, spec()).run_turn(sid, "go")
        notes = []
        while not notes or notes[-1].kind != "event" or notes[-1].event.type != "turn/end":  # type: ignore[union-attr]
            notes.append(await sub.next(timeout=5))
    chunks = [n.data for n in notes if n.kind == "chunk"]
    assert "".join(c.get("text", "") for c in chunks) == "one two three four"
    assert "".join(c.get("reasoning", "") for c in chunks) == "hmm"
    assert all(c["type"] == "assistant/chunk" for c in chunks)


# -- the real provider code path, over loopback ----------------------------------------------------


async def test_openai_provider_end_to_end_with_parallel_tool_calls(service: SessionService) -> None:
    with serve_fake_openai(flavor="openai", strict=True) as fake:
        fake.enqueue(
            FakeReply(
                tool_calls=[{"name": "add", "arguments": {"a": 20, "b": 22}}, {"name": "add", "arguments": {"a": 1, "b": 1}}],
                interleave_tool_calls=True,
            ),
            FakeError.rate_limited(),
            FakeReply(text="Answers: 42 and 2."),
        )
        model = OpenAICompatModel(model="gpt-test", base_url=fake.base_url, api_key="sk-test", sleep=_no_sleep)
        sid = (await service.create("chat")).id
        result = await AgentLoop(service, model, spec()).run_turn(sid, "sums please")
        await model.aclose()
    assert result.outcome == "completed" and result.text == "Answers: 42 and 2."
    assert [r.content for r in result.tool_results] == ["42", "2"]
    second = fake.chat_requests[-1].body
    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "tool", "tool"]
    assert second["stream"] is True
    assert len(fake.chat_requests) == 3  # the 429 was retried once
    msg = [e for e in await service.events(sid) if e.type == "assistant/message"][-1]
    assert msg.payload["model"]["warnings"] == ["retried 1 time(s) after: HTTP 429"]


async def test_deepseek_reasoning_round_trip_through_the_loop(service: SessionService) -> None:
    with serve_fake_openai(flavor="deepseek", strict=True) as fake:
        fake.enqueue(
            FakeReply(reasoning="I should add.", tool_calls=[{"name": "add", "arguments": {"a": 2, "b": 2}}]),
            FakeReply(reasoning="Done.", text="4"),
        )
        model = deepseek_model(api_key="sk-test", base_url=fake.base_url, sleep=_no_sleep)
        sid = (await service.create("chat")).id
        result = await AgentLoop(service, model, spec()).run_turn(sid, "2+2")
        await model.aclose()
    assert result.outcome == "completed" and result.text == "4"
    sent_back = fake.chat_requests[1].body["messages"][2]
    assert sent_back["role"] == "assistant" and sent_back["reasoning_content"] == "I should add."
    stored = [e for e in await service.events(sid) if e.type == "assistant/message"]
    assert stored[0].payload["content"][0] == {"type": "reasoning", "text": "I should add."}


async def _no_sleep(seconds: float) -> None:
    return None


async def test_context_overflow_from_the_server_ends_the_turn_with_a_clear_error(service: SessionService) -> None:
    with serve_fake_openai(flavor="deepseek", strict=True) as fake:
        fake.enqueue(FakeError.context_overflow(limit=131072, requested=131134))
        model = deepseek_model(api_key="sk-test", base_url=fake.base_url, sleep=_no_sleep)
        sid = (await service.create("chat")).id
        result = await AgentLoop(service, model, spec()).run_turn(sid, "a very long story")
        await model.aclose()
    assert result.outcome == "error"
    assert result.error["code"] == "model.context_overflow" and result.error["details"]["limit"] == 131072  # type: ignore[index]
    assert len(fake.chat_requests) == 1  # a 400 is not retried
    end = (await service.events(sid))[-1]
    assert end.payload["error"]["code"] == "model.context_overflow"


async def test_hooks_add_input_events_rewrite_the_reply_and_finish_after_a_tool(service: SessionService, store: EventStore) -> None:
    from dataclasses import replace as dc_replace

    from roleplay.harness.models.types import ModelResponse

    class Hooks(LoopHooks):
        publish_deltas = False

        def input_events(self, turn_id: str) -> list[EventDraft]:
            return [
                EventDraft(
                    "user/message",
                    {
                        "messageId": f"ctx-{turn_id}",
                        "content": [{"type": "text", "text": "<ready/>"}],
                        "source": {"rpRunContext": {"v": 1}},
                    },
                )
            ]

        async def on_response(self, session_id: str, turn_id: str, step_id: str, response: ModelResponse) -> ModelResponse:
            if response.tool_calls:
                await store.publish_chunk(session_id, {"type": "assistant/chunk", "turnId": turn_id, "text": "Body."})
                return dc_replace(response, text="Body.", reasoning="")
            return response

        def finished(self, results: list) -> bool:  # type: ignore[override]
            return any(r.ok and r.name == "add" for r in results)

    model = ScriptedModel(
        [{"text": "parent chatter", "reasoning": "secret", "tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]}]
    )
    sid = (await service.create("chat")).id
    async with store.subscribe(sid) as sub:
        result = await AgentLoop(service, model, spec(hooks=Hooks())).run_turn(sid, "go")
        chunks = []
        while True:
            note = await sub.next(timeout=5)
            if note.kind == "chunk":
                chunks.append(note.data)
            elif note.event is not None and note.event.type == "turn/end":
                break
    assert result.outcome == "completed" and result.steps == 1 and result.text == "Body." and len(model.requests) == 1
    assert [c["text"] for c in chunks] == ["Body."]  # the parent's own deltas were not published
    events = await service.events(sid)
    assert [e.type for e in events[:3]] == ["turn/start", "user/message", "user/message"]
    assert events[2].payload["source"] == {"rpRunContext": {"v": 1}}
    msg = next(e for e in events if e.type == "assistant/message")
    assert msg.payload["content"] == [{"type": "reasoning", "text": ""}, {"type": "text", "text": "Body."}]


def test_converted_messages_go_on_from_the_last_story_and_equal_a_fresh_conversion() -> None:
    """``ConvertedMessages.convert`` continues from the last tuple it converted when the new one
    starts with the same nodes; any other change (a replaced node, another session, a shorter
    story) converts from its memo. Every answer equals a fresh converter's."""
    from itertools import accumulate

    from roleplay.harness.history import exchange_starts
    from roleplay.harness.converted import ConvertedMessages

    def node(i: int, seq: int, role: str = "user") -> dict[str, Any]:
        return {"id": f"m{i}", "seq": seq, "role": role, "content": [{"type": "text", "text": f"text {i} v{seq} " * (i + 1)}]}

    base = tuple(node(i, i + 1, "user" if i % 2 else "assistant") for i in range(6))
    stories = [
        ("s1", base),
        ("s1", base + (node(6, 7), node(7, 8, "assistant"))),
        ("s1", base[:2] + (node(2, 9),) + base[3:] + (node(6, 7),)),  # a node replaced mid-story
        ("s1", base[:3]),  # shorter
        ("s2", base + (node(6, 7),)),  # another session
        ("s2", tuple(dict(n) for n in base) + (node(6, 7), node(7, 8))),  # equal copies of the nodes
    ]
    kept = ConvertedMessages()
    for session_id, story in stories:
        got = kept.convert(session_id, story)
        fresh = ConvertedMessages().convert(session_id, story)
        assert [(m.role, m.content, m.tool_calls) for m in got[0]] == [(m.role, m.content, m.tool_calls) for m in fresh[0]]
        assert got[1] == fresh[1]
        # And the figures the window's cut is read from, kept across turns the same way.
        figures = kept.converted(session_id, story)
        assert figures.running == list(accumulate(fresh[1], initial=0))
        assert figures.starts == (exchange_starts(fresh[0]) if fresh[0] else [])


async def _requests_match_the_log(service: SessionService, sid: str, model: ScriptedModel, after: int = 0) -> None:
    """Reference: each request's messages are the surface folded from the log up to its step's
    start, converted (no window: the whole surface), as when the events before a step were
    appended and read back before its request was built."""
    from roleplay.harness.converted import nodes_to_messages

    events = await service.events(sid)
    starts = [e.seq for e in events if e.type == "step/start" and e.seq > after]
    assert len(starts) == len(model.requests)
    for seq, request in zip(starts, model.requests):
        surface = fold(surface_projection, [e for e in events if e.seq < seq])
        assert request.messages[1:] == nodes_to_messages(surface["nodes"])


async def test_a_step_built_over_held_events_sends_what_the_log_then_holds(service: SessionService) -> None:
    """The turn's first events and a step's last go out with the next step's start and request,
    built before they are appended: every request is still the one the log gives at its step."""
    model = ScriptedModel(
        [
            {"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}, {"name": "add", "arguments": {"a": 1, "b": 1}}]},
            {"tool_calls": [{"name": "add", "arguments": {"a": 5, "b": 2}}]},
            "Done.",
        ]
    )
    sid = (await service.create("chat")).id
    assert (await AgentLoop(service, model, spec()).run_turn(sid, "first")).outcome == "completed"
    await _requests_match_the_log(service, sid, model)
    model.enqueue("Again.")  # a second turn: the first is earlier history now
    model.requests.clear()
    first = (await service.events(sid))[-1].seq
    assert (await AgentLoop(service, model, spec()).run_turn(sid, [{"type": "text", "text": "second"}])).outcome == "completed"
    events = await service.events(sid)
    assert [e.type for e in events if e.seq > first][:4] == ["turn/start", "user/message", "step/start", "model/request"]
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    await _requests_match_the_log(service, sid, model, after=first)


class Interleaving(LoopHooks):
    """Hooks under which another writer appends a user message while the turn's first request is
    built (once): the step's held events then conflict."""

    def __init__(self, service: SessionService) -> None:
        self.service = service
        self.done = False

    async def history_view(self, session_id: str, surface: Any, split: int) -> Any:
        if not self.done:
            self.done = True
            foreign = {"messageId": "msg_foreign", "content": [{"type": "text", "text": "from elsewhere"}]}
            await self.service.append_retrying(session_id, [EventDraft("user/message", foreign)])
        return await super().history_view(session_id, surface, split)


async def test_a_write_landing_while_the_request_is_built_puts_the_held_events_after_it(
    service: SessionService, store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer appends while the first request is built over the held turn/start and user
    message: the combined append conflicts, the held events go out alone at the new head, and the
    request is built again over the log as it is then (the foreign message in its history)."""
    batches = record_appends(store, monkeypatch)
    sid = (await service.create("chat")).id
    model = ScriptedModel(["Hello."])
    result = await AgentLoop(service, model, spec(hooks=Interleaving(service))).run_turn(sid, "hi")
    assert result.outcome == "completed"
    events = await service.events(sid)
    assert [e.type for e in events] == [
        "user/message", "turn/start", "user/message", "step/start", "model/request", "assistant/message", "step/end", "turn/end"
    ]  # fmt: skip
    assert events[0].payload["messageId"] == "msg_foreign"
    assert ["turn/start", "user/message"] in batches and ["step/start", "model/request"] in batches
    assert [m.text() for m in model.requests[0].messages[1:]] == ["from elsewhere", "hi"]
    await _requests_match_the_log(service, sid, model)


async def test_a_crash_while_the_first_request_is_built_still_logs_the_turn_start(service: SessionService) -> None:
    """The held turn/start and user message are logged before an unexpected error leaves the loop,
    as when they were appended before the step began (recovery then closes the turn)."""

    class Broken(LoopHooks):
        async def history_view(self, session_id: str, surface: Any, split: int) -> Any:
            raise ValueError("a bug in a hook")

    sid = (await service.create("chat")).id
    with pytest.raises(ValueError):
        await AgentLoop(service, ScriptedModel(["never"]), spec(hooks=Broken())).run_turn(sid, "hi")
    assert [e.type for e in await service.events(sid)] == ["turn/start", "user/message"]
    closed = await AgentLoop(service, ScriptedModel(["Hi."]), spec()).close_interrupted(sid)
    assert len(closed) == 1


# -- a request sent while its step is logged (sends_before_logged) ---------------------------------


def hold_request_appends(
    service: SessionService, monkeypatch: pytest.MonkeyPatch, fake: Any, fail: BaseException | None = None
) -> list[str]:
    """Each append that logs a model/request waits until the provider has that request (so it
    was sent before its step was logged), then runs, or raises ``fail``. Returns what happened,
    in order: "sent" when the provider had it, then the batch's types."""
    seen: list[str] = []
    append = service.append

    async def held(session_id: str, drafts: Any, *, expected_seq: int) -> Any:
        types_ = [d.type for d in drafts]
        if "model/request" in types_:
            before = sum(1 for s in seen if s == "sent")
            for _ in range(500):
                if len(fake.chat_requests) > before:
                    break
                await asyncio.sleep(0.01)
            else:
                raise AssertionError("the request was not sent while its step was being logged")
            seen.append("sent")
            await asyncio.sleep(0.05)  # the provider's answer (or error) arrives meanwhile
            if fail is not None:
                raise fail
        seen.append(",".join(types_))
        return await append(session_id, drafts, expected_seq=expected_seq)

    monkeypatch.setattr(service, "append", held)
    return seen


async def test_a_request_goes_out_while_its_step_is_logged_and_its_answer_waits_for_it(
    service: SessionService, store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The provider starts on the prompt before the step's events are appended; nothing of its
    answer (a delta, the message, a tool call) reaches subscribers or the log before they are."""
    with serve_fake_openai(flavor="openai", strict=True) as fake:
        fake.enqueue(FakeReply(tool_calls=[{"name": "add", "arguments": {"a": 2, "b": 3}}]), FakeReply(text="Five, I think."))
        model = OpenAICompatModel(model="gpt-test", base_url=fake.base_url, api_key="sk-test", sleep=_no_sleep)
        sid = (await service.create("chat")).id
        seen = hold_request_appends(service, monkeypatch, fake)
        async with store.subscribe(sid) as sub:
            result = await AgentLoop(service, model, spec()).run_turn(sid, "2+3?")
            notes = []
            while not notes or notes[-1].kind != "event" or notes[-1].event.type != "turn/end":  # type: ignore[union-attr]
                notes.append(await sub.next(timeout=5))
        await model.aclose()
    assert (result.outcome, result.text) == ("completed", "Five, I think.")
    assert seen == [
        "sent", "turn/start,user/message,step/start,model/request", "assistant/message,tool/call",
        "sent", "tool/result,step/end,step/start,model/request", "assistant/message,step/end,turn/end",
    ]  # fmt: skip
    order = [n.event.type if n.kind == "event" else "chunk" for n in notes]  # type: ignore[union-attr]
    assert order.index("chunk") > [i for i, t in enumerate(order) if t == "model/request"][-1]
    assert "".join(n.data.get("text", "") for n in notes if n.kind == "chunk") == "Five, I think."  # type: ignore[union-attr]
    assert await types(service, sid) == [
        "turn/start", "user/message", "step/start", "model/request", "assistant/message", "tool/call", "tool/result",
        "step/end", "step/start", "model/request", "assistant/message", "step/end", "turn/end",
    ]  # fmt: skip


async def test_an_error_answer_is_heard_after_its_request_is_logged(
    service: SessionService, store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    with serve_fake_openai(flavor="deepseek", strict=True) as fake:
        fake.enqueue(FakeError.context_overflow(limit=131072, requested=131134))
        model = deepseek_model(api_key="sk-test", base_url=fake.base_url, sleep=_no_sleep)
        sid = (await service.create("chat")).id
        seen = hold_request_appends(service, monkeypatch, fake)
        result = await AgentLoop(service, model, spec()).run_turn(sid, "a very long story")
        await model.aclose()
    assert result.outcome == "error" and result.error["code"] == "model.context_overflow"  # type: ignore[index]
    assert seen == ["sent", "turn/start,user/message,step/start,model/request", "step/end", "turn/end"]


async def test_a_step_that_conflicts_drops_its_early_request_and_sends_the_rebuilt_one(
    service: SessionService, store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write lands while the first request is built over the held turn start: that request
    was already sent, so it is dropped (its answer never read) and the one built again over the
    log as it is then is sent and answered."""
    with serve_fake_openai(flavor="openai", strict=True) as fake:
        fake.enqueue(FakeReply(text="Stale answer."), FakeReply(text="Hello."))
        model = OpenAICompatModel(model="gpt-test", base_url=fake.base_url, api_key="sk-test", sleep=_no_sleep)
        sid = (await service.create("chat")).id
        seen = hold_request_appends(service, monkeypatch, fake)
        async with store.subscribe(sid) as sub:
            result = await AgentLoop(service, model, spec(hooks=Interleaving(service))).run_turn(sid, "hi")
            notes = []
            while not notes or notes[-1].kind != "event" or notes[-1].event.type != "turn/end":  # type: ignore[union-attr]
                notes.append(await sub.next(timeout=5))
        await model.aclose()
        sent = [[m["content"] for m in r.body["messages"][1:]] for r in fake.chat_requests]
    assert (result.outcome, result.text) == ("completed", "Hello.")
    assert len(sent) == 2 and sent[1] == ["from elsewhere", "hi"]  # the first was dropped unread
    assert seen == [
        "user/message", "sent", "turn/start,user/message,step/start,model/request", "turn/start,user/message",
        "sent", "step/start,model/request", "assistant/message,step/end,turn/end",
    ]  # fmt: skip
    assert "".join(n.data.get("text", "") for n in notes if n.kind == "chunk") == "Hello."  # type: ignore[union-attr]
    events = await service.events(sid)
    assert [e.type for e in events].count("model/request") == 1
    assert "Stale" not in str([e.payload for e in events])


async def test_a_failed_step_append_drops_its_early_request(
    service: SessionService, store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    with serve_fake_openai(flavor="openai", strict=True) as fake:
        fake.enqueue(FakeReply(text="Never read."))
        model = OpenAICompatModel(model="gpt-test", base_url=fake.base_url, api_key="sk-test", sleep=_no_sleep)
        sid = (await service.create("chat")).id
        hold_request_appends(service, monkeypatch, fake, fail=RpError("store.unavailable", "the database went away"))
        with pytest.raises(RpError, match="went away"):
            await AgentLoop(service, model, spec()).run_turn(sid, "hi")
        for _ in range(3):
            await asyncio.sleep(0)
        # all_tasks holds the tasks not done: a request left waiting on its unlogged step stays there.
        streams = [t for t in asyncio.all_tasks() if "_stream" in repr(t.get_coro())]
        await model.aclose()
    assert streams == []
    assert await types(service, sid) == []
