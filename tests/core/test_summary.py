"""Conversation summary compaction (issue 12 item 3, spec ``rp-conversation-summary``).

A story crosses 80% of a small configured window; the summary is written during that turn (N)
and lands as a native ``compaction/checkpoint`` when turn N+1 starts. Rejected candidates leave
the surface byte-identical; a confirmed overflow compresses the balanced prefix and retries; the
flow also runs through the fake OpenAI-compatible server; forks before and after checkpoints
restore exactly what the log says; replay equals the live projections.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any, AsyncIterator, Callable

import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st

from roleplay.clock import CountingIds, FixedClock
from roleplay.core.conversation import SUMMARY_KIND, summary_text
from roleplay.core.message_actions import delete_from, edit_message, undo_last_turn
from roleplay.core.run import play_turn, prepare_run
from roleplay.core.runtime import RoleplayRuntime
from roleplay.core.settings import FEATURES, SettingsStore
from roleplay.core.summary import CANDIDATE, pending_note, summary_projection
from roleplay.core.summary_prompts import SUMMARISER_MARKER
from roleplay.core.types import CONVERSATION, SUMMARY
from roleplay.errors import RpError
from roleplay.harness.commands import commands_projection
from roleplay.harness.history import message_tokens, tools_tokens
from roleplay.harness.models.demo import DemoModel
from roleplay.harness.models.routes import Route
from roleplay.harness.models.synthetic import coerce_reply, stream_reply
from roleplay.harness.models.types import ChatMessage, Completed, ModelRequest, StreamEvent, Usage
from roleplay.harness.projections import load
from roleplay.harness.store import EventStore, open_store
from roleplay.harness.surface import surface_projection
from roleplay.harness.turns import turns_projection
from roleplay.state.events import state_document
from roleplay.testing.fake_openai import serve_fake_openai
from roleplay.assets.seeds import ensure_seeds
from roleplay.assets.service import AssetService
from roleplay.core.session_create import StoryRequest, create_story
from roleplay.features import build_runtime
from roleplay.samples import SAMPLE_CARD, sample_card_bytes

pytestmark = pytest.mark.anyio
DEMO = Route("demo", "demo")
WINDOW = 20_000
LOW, HIGH = 1_000, 17_000  # reported prompt tokens: below and above 80% of WINDOW
INPUTS = [
    "我推开铁门：我只是想看看灯塔。",
    "我帮她擦铜镜。",
    "我问起晨星号的事。",
    "我递给她一壶热茶。",
    "我们一起爬上灯室。",
    "我提到她的祖父。",
]


class Story:
    """The demo model with scripted parent usage and an optionally scripted summariser."""

    def __init__(self) -> None:
        self.inner = DemoModel()
        self.provider, self.model, self.label, self.capabilities = "demo", "demo", self.inner.label, self.inner.capabilities
        self.prompt_tokens: int | None = LOW  # None: the provider reports no usage
        self.summariser: Callable[[ModelRequest], Any] | None = None
        self.summariser_requests: list[ModelRequest] = []
        self.parent_requests: list[ModelRequest] = []
        self.on_summariser: Callable[[], Any] | None = None
        self.overflow_above: int | None = None
        self.crash_at: int | None = None  # raise a non-roleplay error on this parent request

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        if SUMMARISER_MARKER in request.messages[0].text():
            self.summariser_requests.append(request)
            if self.on_summariser is not None:
                await self.on_summariser()
            if self.summariser is not None:
                value = self.summariser(request)
                if isinstance(value, BaseException):
                    raise value
                async for event in stream_reply(coerce_reply(value, call_id_prefix="s"), request, provider="demo", model="demo"):
                    yield event
                return
        if request.tools:
            if self.crash_at is not None and len(self.parent_requests) + 1 == self.crash_at:
                raise RuntimeError("the provider client broke")
            size = sum(message_tokens(m) for m in request.messages)
            if self.overflow_above is None or size <= self.overflow_above:
                self.parent_requests.append(request)
            else:
                raise RpError(
                    "model.context_overflow",
                    f"maximum context length is {self.overflow_above} tokens",
                    details={"limit": self.overflow_above},
                )
        async for event in self.inner.stream(request):
            if isinstance(event, Completed) and request.tools:
                usage = None if self.prompt_tokens is None else Usage(self.prompt_tokens, 10, self.prompt_tokens + 10)
                event = Completed(replace(event.response, usage=usage))
            yield event


async def sample_story(store: EventStore, model: Any) -> tuple[RoleplayRuntime, str]:
    """The bundled sample card with every built-in feature, ``model`` as the demo route."""
    rt = build_runtime(store, entry_points=False)
    rt.models[DEMO.spec] = model
    await ensure_seeds(rt.assets)
    card = (await AssetService(store).import_file(sample_card_bytes(), SAMPLE_CARD)).asset_id
    record, _ = await create_story(rt, StoryRequest(card=card))
    return rt, record.id


async def story(store: EventStore, window: int = WINDOW) -> tuple[RoleplayRuntime, str, Story]:
    model = Story()
    rt, sid = await sample_story(store, model)
    await SettingsStore(rt.store).set("context.windows", {"demo/demo": window})
    return rt, sid, model


async def turn(rt: RoleplayRuntime, sid: str, n: int, **kw: Any) -> Any:
    return await play_turn(rt, sid, f"（第{n}轮）{INPUTS[(n - 1) % len(INPUTS)]}", parent_route=DEMO, **kw)


def codes(result: Any) -> list[str]:
    return [d["code"] for d in result.diagnostics]


async def nodes_json(rt: RoleplayRuntime, sid: str, until: int | None = None) -> str:
    nodes = (
        await rt.service.projection(sid, surface_projection, until_seq=until)
        if until
        else await rt.service.projection(sid, "harness/surface")
    ).state["nodes"]
    return json.dumps(nodes, ensure_ascii=False, sort_keys=True)


async def events_of(rt: RoleplayRuntime, sid: str, type_: str) -> list[Any]:
    return [e for e in await rt.service.events(sid) if e.type == type_]


async def turn_start_seq(rt: RoleplayRuntime, sid: str, turn_id: str) -> int:
    return next(e.seq for e in await events_of(rt, sid, "turn/start") if e.payload["turnId"] == turn_id)


# -- threshold crossing --------------------------------------------------------------------------


async def test_a_summary_written_during_turn_n_lands_at_turn_n_plus_1(store: EventStore) -> None:
    rt, sid, model = await story(store)
    for n in (1, 2):
        assert "summary.candidate_ready" not in codes(await turn(rt, sid, n))
    open_during: list[dict[str, int]] = []

    async def note_open() -> None:
        open_during.append(dict((await rt.service.projection(sid, turns_projection)).state["open"]))

    model.on_summariser, model.prompt_tokens = note_open, HIGH
    before = await nodes_json(rt, sid)
    third = await turn(rt, sid, 3)
    model.prompt_tokens = LOW
    # Written alongside turn 3 (the turn was open), recorded after it, not yet applied.
    assert third.committed and "summary.candidate_ready" in codes(third)
    assert open_during == [{third.turn.turn_id: await turn_start_seq(rt, sid, third.turn.turn_id)}]
    assert not await events_of(rt, sid, "compaction/checkpoint")
    assert (await nodes_json(rt, sid)).startswith(before[:-1])  # turn 3 only appended
    state_before = state_document((await rt.service.projection(sid, "rp/state")).state)
    head = await rt.store.head(sid)
    pending_before = await pending_note(rt, sid)
    assert await rt.store.head(sid) == head

    fourth = await turn(rt, sid, 4)
    assert fourth.committed and "summary.checkpoint_landed" in codes(fourth)
    [checkpoint] = await events_of(rt, sid, "compaction/checkpoint")
    end3 = next(e.seq for e in await events_of(rt, sid, "turn/end") if e.payload["turnId"] == third.turn.turn_id)
    assert end3 < checkpoint.seq < await turn_start_seq(rt, sid, fourth.turn.turn_id)
    # Compaction never changes the story state.
    at_checkpoint = await rt.service.projection(sid, "rp/state", until_seq=checkpoint.seq)
    assert state_document(at_checkpoint.state) == state_before
    # The surface: the summary, then turn 3 verbatim (the latest completed exchange), then turn 4.
    nodes = (await rt.service.surface(sid))["nodes"]
    assert nodes[0]["kind"] == SUMMARY_KIND and nodes[0]["id"] == checkpoint.payload["checkpointId"]
    users = [n for n in nodes if n["role"] == "user" and n.get("kind") is None and "rpRunContext" not in (n.get("source") or {})]
    assert [u["content"][0]["text"][:5] for u in users] == ["（第3轮）", "（第4轮）"]
    # The summariser read turns 1 and 2 (and the opening), in the story's language.
    assert "（第2轮）" in model.summariser_requests[0].messages[-1].text()
    assert "（第3轮）" not in model.summariser_requests[0].messages[-1].text()
    assert "演示" in checkpoint.payload["summary"] and "（第1轮）" in checkpoint.payload["summary"]
    # The Writer of turn 4 saw the summary plus the recent verbatim messages.
    sections = {src: s.text for s in fourth.prepared.build.sections for src in s.source_ids}
    assert checkpoint.payload["summary"] in sections[SUMMARY] and "（第3轮）" in sections[CONVERSATION]
    assert "（第2轮）" not in sections[CONVERSATION]
    prompt = fourth.prepared.build.writer_prompt
    assert (
        checkpoint.payload["summary"] in prompt
        and "（第3轮）" in prompt
        and "（第1轮）我推开" not in prompt.split(checkpoint.payload["summary"])[1]
    )
    # The parent of turn 4 was sent the summary and turn 3, not turns 1 and 2.
    first = next(r for r in model.parent_requests if "（第4轮）" in r.messages[-2].text())
    sent = "\n".join(m.text() for m in first.messages)
    assert checkpoint.payload["summary"] in sent and "（第3轮）" in sent
    assert "compressed record of earlier conversation" in first.messages[1].text()  # noted, not the user's words
    assert "（第2轮）" not in sent.replace(checkpoint.payload["summary"], "")
    # Between turns 3 and 4 a preview said the summary was coming (and wrote nothing).
    assert pending_before is not None and pending_before.code == "summary.pending"
    assert pending_before.details["candidateId"] == checkpoint.payload["checkpointId"].replace("cp_", "sumc_")
    assert await pending_note(rt, sid) is None  # landed: nothing pending
    # `rp prompt` (the next turn's preview) shows the summary slot.
    preview = await prepare_run(rt, sid, "我看着她。", parent_route=DEMO)
    assert checkpoint.payload["summary"] in preview.build.writer_prompt
    await rt.aclose()


async def test_without_reported_usage_the_estimate_of_the_request_is_the_pressure(store: EventStore) -> None:
    rt, sid, model = await story(store, window=7_500)
    model.prompt_tokens = None
    first = await turn(rt, sid, 1)
    assert "summary.candidate_ready" in codes(first)
    [record] = [r for r in (await rt.service.projection(sid, commands_projection)).state["succeeded"] if r["name"] == CANDIDATE]
    pressure = record["args"]["pressure"]
    request = next(r for r in model.parent_requests if "（第1轮）" in r.messages[-2].text())
    estimate = sum(message_tokens(m) for m in request.messages) + tools_tokens(request.tools)
    # The request as sent, plus the opening the bounded history left out of it.
    opening = (await events_of(rt, sid, "assistant/message"))[0].payload["content"][0]["text"]
    omitted = message_tokens(ChatMessage("assistant", opening))
    assert pressure == {"tokens": estimate + omitted, "reported": False, "window": 7_500, "threshold": 6_000}
    await rt.aclose()


async def test_an_old_checkpoint_and_the_originals_after_it_merge_into_one_summary(store: EventStore) -> None:
    rt, sid, model = await story(store)
    await turn(rt, sid, 1)
    model.prompt_tokens = HIGH
    await turn(rt, sid, 2)  # candidate over the opening and turn 1
    await turn(rt, sid, 3)  # lands it; a new candidate over [summary, turn 2]
    model.prompt_tokens = LOW
    fourth = await turn(rt, sid, 4)  # lands the merged one
    first, second = await events_of(rt, sid, "compaction/checkpoint")
    merged_input = model.summariser_requests[1].messages[-1].text()
    assert "<previous_summary>" in merged_input and first.payload["summary"] in merged_input and "（第2轮）" in merged_input
    assert first.seq in second.payload["sourceEventSeqs"]  # the old summary node is replaced too
    nodes = (await rt.service.surface(sid))["nodes"]
    assert [n.get("kind") for n in nodes].count(SUMMARY_KIND) == 1 and nodes[0]["id"] == second.payload["checkpointId"]
    assert summary_text(nodes) == second.payload["summary"] and "summary.checkpoint_landed" in codes(fourth)
    await rt.aclose()


# -- rejected candidates -------------------------------------------------------------------------

LONG = "很长的摘要。" * 1_200  # about 7,200 tokens: over a quarter of WINDOW
LONGER = "长摘要" * 700  # about 2,100 tokens: under the quarter, longer than turns 1-2


@pytest.mark.parametrize(
    ("code", "summariser"),
    [
        ("summary.failed", lambda r: {"text": "对不起，我做不到。"}),
        ("summary.failed", lambda r: RpError("model.server_error", "the provider is down")),
        ("summary.truncated", lambda r: {"text": '{"summary": "雾港的故事', "finish_reason": "length"}),
        ("summary.oversized", lambda r: {"text": json.dumps({"summary": LONG}, ensure_ascii=False)}),
        ("summary.not_shorter", lambda r: {"text": json.dumps({"summary": LONGER}, ensure_ascii=False)}),
    ],
)
async def test_a_rejected_candidate_leaves_the_surface_byte_identical(store: EventStore, code: str, summariser: Any) -> None:
    rt, sid, model = await story(store)
    await turn(rt, sid, 1)
    await turn(rt, sid, 2)
    model.summariser, model.prompt_tokens = summariser, HIGH
    third = await turn(rt, sid, 3)
    assert third.committed and code in codes(third)
    model.prompt_tokens = LOW
    before = await nodes_json(rt, sid)
    fourth = await turn(rt, sid, 4)
    assert not await events_of(rt, sid, "compaction/checkpoint")
    assert await nodes_json(rt, sid, await turn_start_seq(rt, sid, fourth.turn.turn_id) - 1) == before
    failed = (await rt.service.projection(sid, commands_projection)).state["failed"]
    assert [f["error"]["code"] for f in failed if f["name"] == CANDIDATE] == [code]
    assert (await rt.service.projection(sid, summary_projection)).state["pending"] is None
    await rt.aclose()


async def test_a_cancelled_turn_cancels_its_candidate(store: EventStore) -> None:
    rt, sid, model = await story(store)
    await turn(rt, sid, 1)
    await turn(rt, sid, 2)
    abort = asyncio.Event()

    async def abort_the_turn() -> None:
        abort.set()
        await asyncio.sleep(0.05)

    model.on_summariser, model.prompt_tokens = abort_the_turn, HIGH
    third = await turn(rt, sid, 3, abort=abort)
    assert third.turn.outcome == "aborted" and "summary.cancelled" in codes(third)
    model.on_summariser, model.prompt_tokens = None, LOW
    before = await nodes_json(rt, sid)
    fourth = await turn(rt, sid, 4)
    assert not await events_of(rt, sid, "compaction/checkpoint")
    assert await nodes_json(rt, sid, await turn_start_seq(rt, sid, fourth.turn.turn_id) - 1) == before
    await rt.aclose()


async def test_a_turn_that_breaks_takes_its_summariser_with_it(store: EventStore) -> None:
    rt, sid, model = await story(store)
    await turn(rt, sid, 1)
    started = asyncio.Event()

    async def slow() -> None:
        started.set()
        await asyncio.sleep(5)

    model.on_summariser, model.prompt_tokens = slow, HIGH
    model.crash_at = len(model.parent_requests) + 2  # the step after the threshold was crossed
    with pytest.raises(RuntimeError):
        await turn(rt, sid, 2)
    assert started.is_set()
    await asyncio.sleep(0)
    assert not [t for t in asyncio.all_tasks() if "_candidate" in repr(t.get_coro())]
    [child] = [c for c in await rt.service.children(sid) if c.preset == "rp-summariser"]
    assert (await rt.service.projection(child.id, turns_projection)).state["open"] == {}  # closed, readable
    assert not [r for r in (await rt.service.projection(sid, commands_projection)).state["succeeded"] if r["name"] == CANDIDATE]
    await rt.aclose()


@pytest.mark.parametrize("action", ["edit", "undo"])
async def test_a_stale_candidate_is_discarded_and_the_surface_stays_byte_identical(store: EventStore, action: str) -> None:
    rt, sid, model = await story(store)
    await turn(rt, sid, 1)
    await turn(rt, sid, 2)
    model.prompt_tokens = HIGH
    third = await turn(rt, sid, 3)
    assert "summary.candidate_ready" in codes(third)
    model.prompt_tokens = LOW
    nodes = (await rt.service.surface(sid))["nodes"]
    if action == "edit":  # a message the summary covers changed
        first_input = next(n for n in nodes if n["role"] == "user" and "（第1轮）" in n["content"][0]["text"])
        await edit_message(rt, sid, first_input["id"], "（第1轮）我改了主意，转身离开。")
    else:  # the exchange that was to stay verbatim is gone
        await undo_last_turn(rt, sid)
    before = await nodes_json(rt, sid)
    note = await pending_note(rt, sid)
    assert note is not None and note.code == "summary.pending_stale"
    fourth = await turn(rt, sid, 4)
    assert "summary.stale" in codes(fourth) and fourth.committed
    assert not await events_of(rt, sid, "compaction/checkpoint")
    assert await nodes_json(rt, sid, await turn_start_seq(rt, sid, fourth.turn.turn_id) - 1) == before
    assert (await rt.service.projection(sid, summary_projection)).state["pending"] is None
    await rt.aclose()


# -- message actions on a compacted surface ------------------------------------------------------


async def test_compacted_messages_are_not_found_and_the_checkpoint_cannot_be_edited_or_deleted(store: EventStore) -> None:
    rt, sid, model = await story(store)
    first = await turn(rt, sid, 1)
    model.prompt_tokens = HIGH
    await turn(rt, sid, 2)
    model.prompt_tokens = LOW
    await turn(rt, sid, 3)
    [checkpoint] = await events_of(rt, sid, "compaction/checkpoint")
    old = next(e for e in await events_of(rt, sid, "user/message") if e.payload.get("turnId") == first.turn.turn_id)
    for act in (lambda: delete_from(rt, sid, old.payload["messageId"]), lambda: edit_message(rt, sid, old.payload["messageId"], "改写")):
        with pytest.raises(RpError) as err:
            await act()
        assert err.value.code == "message.not_found"
    cp = checkpoint.payload["checkpointId"]
    for act in (lambda: delete_from(rt, sid, cp), lambda: edit_message(rt, sid, cp, "改写摘要")):
        with pytest.raises(RpError) as err:
            await act()
        assert err.value.code in ("message.not_deletable", "message.not_editable", "surface.target_not_replaceable")
    await rt.aclose()


# -- overflow ------------------------------------------------------------------------------------


async def test_a_confirmed_overflow_compresses_the_balanced_prefix_and_retries(store: EventStore) -> None:
    model = Story()
    rt, sid = await sample_story(store, model)  # no window known: no threshold, only the provider's word
    results = [await turn(rt, sid, n) for n in range(1, 7)]
    limit = max(sum(message_tokens(m) for m in r.messages) for r in model.parent_requests) - 1
    model.overflow_above, before = limit, len(model.parent_requests)
    seventh = await turn(rt, sid, 7)
    assert seventh.committed and seventh.turn.outcome == "completed", seventh.turn.error
    assert "summary.checkpoint_landed" in codes(seventh)
    [checkpoint] = await events_of(rt, sid, "compaction/checkpoint")
    ends = [e.seq for e in await events_of(rt, sid, "turn/end")]
    assert await turn_start_seq(rt, sid, seventh.turn.turn_id) < checkpoint.seq < ends[-1]  # inside the turn
    nodes = (await rt.service.surface(sid))["nodes"]
    texts = [
        n["content"][0]["text"]
        for n in nodes
        if n["role"] == "user" and n.get("kind") is None and "rpRunContext" not in (n.get("source") or {})
    ]
    # Turn 6, the latest completed exchange before the overflow, stays verbatim.
    assert [t[:5] for t in texts] == ["（第6轮）", "（第7轮）"]
    assert results[5].reply in json.dumps(nodes, ensure_ascii=False)
    # The retried step and the rest of the turn fit; the commit accepted the compacted surface.
    sizes = [sum(message_tokens(m) for m in r.messages) for r in model.parent_requests[before:]]
    assert sizes and all(size <= limit for size in sizes)
    assert checkpoint.payload["summary"] in model.parent_requests[-1].messages[1].text()
    await rt.aclose()


async def test_an_overflow_compaction_supersedes_the_threshold_candidate_of_its_turn(store: EventStore) -> None:
    rt, sid, model = await story(store)
    for n in range(1, 7):
        await turn(rt, sid, n)
    limit = max(sum(message_tokens(m) for m in r.messages) for r in model.parent_requests) - 1
    model.prompt_tokens, model.overflow_above = HIGH, limit
    seventh = await turn(rt, sid, 7)
    assert seventh.committed, seventh.turn.error
    assert "summary.checkpoint_landed" in codes(seventh) and "summary.cancelled" in codes(seventh)
    model.prompt_tokens, model.overflow_above = LOW, None
    eighth = await turn(rt, sid, 8)
    assert not [c for c in codes(eighth) if c.startswith("summary.")]
    assert len(await events_of(rt, sid, "compaction/checkpoint")) == 1
    await rt.aclose()


async def test_an_overflow_with_no_earlier_prefix_stands(store: EventStore) -> None:
    model = Story()
    rt, sid = await sample_story(store, model)
    await turn(rt, sid, 1)
    model.overflow_above = 10
    second = await turn(rt, sid, 2)  # only the opening and turn 1 before it: turn 1 is the style anchor
    assert second.turn.outcome == "error" and (second.turn.error or {}).get("code") == "model.context_overflow"
    assert not await events_of(rt, sid, "compaction/checkpoint")
    await rt.aclose()


# -- the fake OpenAI-compatible server -----------------------------------------------------------


async def test_the_same_flow_through_the_fake_openai_server(store: EventStore) -> None:
    from roleplay.harness.models.deepseek import deepseek_model

    rt, sid = await sample_story(store, DemoModel())
    with serve_fake_openai(flavor="deepseek") as fake:
        route, writer = Route("deepseek", "deepseek-flash"), Route("deepseek", "deepseek-v4-pro")
        rt.models[route.spec] = deepseek_model(api_key="sk-test", base_url=fake.base_url)
        rt.models[writer.spec] = deepseek_model(model="deepseek-v4-pro", api_key="sk-test", base_url=fake.base_url)
        # The Writer on a model of its own, so the small window below is the parent's only.
        await SettingsStore(rt.store).set("writer.defaultRoute", writer.spec)
        first = await play_turn(rt, sid, INPUTS[0], parent_route=route)
        steps = [e.payload for e in await events_of(rt, sid, "step/end") if e.payload.get("turnId") == first.turn.turn_id]
        reported = steps[0]["usage"]["prompt_tokens"]  # the fake reports usage
        # A window whose 80% the next turn's first request passes.
        await SettingsStore(rt.store).set("context.windows", {"deepseek/deepseek-flash": int(reported / 0.8) + 1})
        second = await play_turn(rt, sid, INPUTS[1], parent_route=route)
        assert "summary.candidate_ready" in codes(second)
        third = await play_turn(rt, sid, INPUTS[2], parent_route=route)
        assert third.committed and "summary.checkpoint_landed" in codes(third)
        await rt.aclose()
    bodies = [r.body for r in fake.chat_requests]
    summariser = [b for b in bodies if SUMMARISER_MARKER in b["messages"][0]["content"]]
    assert len(summariser) >= 1
    [checkpoint] = await events_of(rt, sid, "compaction/checkpoint")
    assert checkpoint.payload["summary"].startswith("[fake server: not a real model]")
    writer = [b for b in bodies if "You are the Writer" in b["messages"][0]["content"]][-1]["messages"][-1]["content"]
    text = writer if isinstance(writer, str) else "".join(p.get("text", "") for p in writer)
    assert checkpoint.payload["summary"] in text and INPUTS[1] in text and INPUTS[0] not in text.split(checkpoint.payload["summary"])[1]


async def test_an_overflow_confirmed_by_the_fake_server_compresses_and_retries(store: EventStore) -> None:
    from roleplay.harness.models.deepseek import deepseek_model
    from roleplay.testing.fake_openai import FakeError

    rt, sid = await sample_story(store, DemoModel())
    sizes: list[int] = []
    limit: list[int] = []

    def responder(record: Any) -> Any:
        # The provider's own words for a parent request over the limit (no window is configured).
        size = len(json.dumps(record.body["messages"], ensure_ascii=False))
        if record.body.get("tools"):
            sizes.append(size)
            if limit and size > limit[0]:
                return FakeError.context_overflow(limit[0], size)
        return None

    with serve_fake_openai(flavor="deepseek", responder=responder) as fake:
        route = Route("deepseek", "deepseek-flash")
        rt.models[route.spec] = deepseek_model(api_key="sk-test", base_url=fake.base_url)
        await SettingsStore(rt.store).set("context.windows", {"deepseek/deepseek-flash": 100_000_000})  # never by threshold
        for text in INPUTS[:4]:
            assert (await play_turn(rt, sid, text, parent_route=route)).committed
        limit.append(max(sizes) - 1)
        fifth = await play_turn(rt, sid, INPUTS[4], parent_route=route)
        await rt.aclose()
    assert fifth.committed, fifth.turn.error
    assert "summary.checkpoint_landed" in codes(fifth)
    [checkpoint] = await events_of(rt, sid, "compaction/checkpoint")
    assert checkpoint.payload["summary"].startswith("[fake server: not a real model]")
    nodes = (await rt.service.surface(sid))["nodes"]
    assert nodes[0]["id"] == checkpoint.payload["checkpointId"] and INPUTS[3] in json.dumps(nodes, ensure_ascii=False)


async def test_the_summariser_route_is_configurable_and_follows_the_conversation_by_default(store: EventStore) -> None:
    rt, sid, model = await story(store)
    other = Story()
    rt.models[Route("demo", "summariser").spec] = other  # type: ignore[assignment]
    await SettingsStore(rt.store).set("summary.route", "demo/summariser")
    await turn(rt, sid, 1)
    model.prompt_tokens = HIGH
    await turn(rt, sid, 2)
    assert len(other.summariser_requests) == 1 and not model.summariser_requests
    await SettingsStore(rt.store).reset("summary.route")
    await turn(rt, sid, 3)
    assert len(model.summariser_requests) == 1
    await rt.aclose()


async def test_with_the_feature_off_nothing_is_written_or_landed(store: EventStore) -> None:
    rt, sid, model = await story(store)
    await turn(rt, sid, 1)
    model.prompt_tokens = HIGH
    assert "summary.candidate_ready" in codes(await turn(rt, sid, 2))
    await SettingsStore(rt.store).set("features.enabled", [f for f in FEATURES if f != "rp-conversation-summary"])
    third = await turn(rt, sid, 3)  # above the threshold again, with a candidate pending
    assert not [c for c in codes(third) if c.startswith("summary.")] and len(model.summariser_requests) == 1
    assert not await events_of(rt, sid, "compaction/checkpoint")
    await SettingsStore(rt.store).reset("features.enabled")
    fourth = await turn(rt, sid, 4)  # on again: the candidate still covers an untouched prefix
    assert "summary.checkpoint_landed" in codes(fourth) and len(await events_of(rt, sid, "compaction/checkpoint")) == 1
    await rt.aclose()


# -- replay --------------------------------------------------------------------------------------


async def test_replay_from_the_log_equals_the_live_projections(store: EventStore) -> None:
    rt, sid, model = await story(store)
    for n in range(1, 7):
        model.prompt_tokens = HIGH if n % 2 == 0 else LOW
        await turn(rt, sid, n)
    assert len(await events_of(rt, sid, "compaction/checkpoint")) >= 2
    for name in ("harness/surface", "harness/commands", "rp/state", "rp/replies", summary_projection.name):
        live = (await rt.service.projection(sid, name)).state
        assert live == (await rt.service.projection(sid, name, use_snapshot=False)).state, name
    await rt.aclose()


async def test_a_fork_before_the_checkpoint_restores_the_originals_and_one_after_keeps_it(store: EventStore) -> None:
    rt, sid, model = await story(store)
    await turn(rt, sid, 1)
    model.prompt_tokens = HIGH
    second = await turn(rt, sid, 2)
    model.prompt_tokens = LOW
    await turn(rt, sid, 3)
    [checkpoint] = await events_of(rt, sid, "compaction/checkpoint")
    end2 = next(e.seq for e in await events_of(rt, sid, "turn/end") if e.payload["turnId"] == second.turn.turn_id)
    for at, kept in ((end2, False), (checkpoint.seq, True)):
        fork, point = await rt.service.fork_between_turns(sid, at)
        assert point.at_seq == at
        nodes = (await rt.service.surface(fork.id))["nodes"]
        assert nodes == (await rt.service.projection(sid, "harness/surface", until_seq=at)).state["nodes"]
        mine = state_document((await rt.service.projection(fork.id, "rp/state")).state)
        assert mine == state_document((await rt.service.projection(sid, "rp/state", until_seq=at)).state)
        preview = await prepare_run(rt, fork.id, "我看着远处的海。", parent_route=DEMO)
        sources = {src for s in preview.build.sections for src in s.source_ids}
        assert (SUMMARY in sources) is kept and (nodes[0].get("kind") == SUMMARY_KIND) is kept
        assert ("（第1轮）" in preview.build.writer_prompt.replace(checkpoint.payload["summary"], "")) is not kept
    await rt.aclose()


# -- forks (property) ----------------------------------------------------------------------------

_BUILT: dict[str, Any] = {}


def _built_story() -> dict[str, Any]:
    """One story with two landed checkpoints and one pending candidate, built once on SQLite."""
    if _BUILT:
        return _BUILT

    async def build(path: Path) -> dict[str, Any]:
        store = open_store(f"sqlite:///{path}", clock=FixedClock(), ids=CountingIds())
        await store.migrate()
        rt, sid, model = await story(store)
        for n in range(1, 7):
            model.prompt_tokens = HIGH if n in (2, 4, 6) else LOW
            await turn(rt, sid, n)
        events = await rt.service.events(sid)
        await rt.aclose()
        await store.close()
        return {
            "path": path,
            "sid": sid,
            "head": events[-1].seq,
            "checkpoints": [e.seq for e in events if e.type == "compaction/checkpoint"],
            # Seqs between turns: candidates recorded, checkpoints landed.
            "between": [e.seq for e in events if e.type in ("command/done", "compaction/checkpoint")],
        }

    path = Path(tempfile.mkdtemp()) / "forks.db"
    _BUILT.update(asyncio.run(build(path)))
    return _BUILT


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_forks_before_and_after_checkpoints_restore_the_state_and_the_slots(data: st.DataObject) -> None:
    built = _built_story()
    assert len(built["checkpoints"]) == 2
    first = built["checkpoints"][0]
    before = data.draw(st.booleans(), label="before the first checkpoint")
    low, high = (1, first - 1) if before else (first, built["head"])
    special = [seq for seq in built["between"] if low <= seq <= high]
    anywhere = st.integers(min_value=low, max_value=high)
    at = data.draw(st.one_of(anywhere, st.sampled_from(special)) if special else anywhere, label="fork at")

    async def check() -> None:
        store = open_store(f"sqlite:///{built['path']}", clock=FixedClock())  # fresh ids: the story used the counter
        await store.migrate()
        rt = build_runtime(store, entry_points=False)
        rt.models[DEMO.spec] = Story()  # type: ignore[assignment]
        try:
            sid = built["sid"]
            try:
                fork, point = await rt.service.fork_between_turns(sid, at)
            except RpError as exc:
                assert exc.code == "session.fork_mid_turn"
                return
            cut = point.at_seq
            # The fork's surface and state are exactly the original's at the cut.
            assert (await rt.service.surface(fork.id)) == (await load(store, sid, surface_projection, until_seq=cut)).state
            mine = state_document((await rt.service.projection(fork.id, "rp/state")).state)
            theirs = state_document((await rt.service.projection(sid, "rp/state", until_seq=cut)).state)
            assert mine == theirs
            nodes = (await rt.service.surface(fork.id))["nodes"]
            landed = [c for c in built["checkpoints"] if c <= cut]
            preview = await prepare_run(rt, fork.id, "我看着远处的海。", parent_route=DEMO)
            sources = [src for s in preview.build.sections for src in s.source_ids]
            if not landed:
                # Before any checkpoint: the original messages are back and there is no summary slot.
                assert all(n.get("kind") != SUMMARY_KIND for n in nodes)
                assert SUMMARY not in sources and "Conversation summary" not in preview.build.writer_prompt
                if any(n["role"] == "user" for n in nodes):
                    assert "（第1轮）" in preview.build.writer_prompt and CONVERSATION in sources
            else:
                # After one: the latest checkpoint before the cut is kept, with its summary slot.
                events = await rt.service.events(sid, after_seq=landed[-1] - 1, until_seq=landed[-1])
                assert nodes[0]["kind"] == SUMMARY_KIND and nodes[0]["seq"] == landed[-1]
                assert events[0].payload["summary"] in preview.build.writer_prompt and SUMMARY in sources
            pending = (await rt.service.projection(fork.id, summary_projection)).state["pending"]
            event(f"checkpoints before the cut: {len(landed)}; pending candidate: {pending is not None}")
            if pending is not None:
                # A candidate written before the cut lands in the branch's next turn, as it would have.
                result = await play_turn(rt, fork.id, "我看着远处的海。", parent_route=DEMO)
                assert "summary.checkpoint_landed" in codes(result)
                assert (await rt.service.surface(fork.id))["nodes"][0]["id"] == pending["checkpointId"]
        finally:
            await rt.aclose()
            await store.close()

    asyncio.run(check())
