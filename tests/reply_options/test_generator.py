"""The ``rp.reply-options`` artifact generator on real demo turns: options land in the commit,
settings guide them, and every failure is one diagnostic on a commit that still lands."""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, Callable

import pytest

from roleplay.core.run import RunResult, play_turn
from roleplay.core.settings import SettingsStore
from roleplay.errors import RpError
from roleplay.harness.models.demo import DemoModel
from roleplay.harness.models.routes import Route
from roleplay.harness.models.synthetic import coerce_reply, stream_reply
from roleplay.harness.models.types import Capabilities, ModelRequest, StreamEvent
from roleplay.harness.store import EventStore
from roleplay.reply_options import FEATURE, generator
from roleplay.reply_options.generator import PRESET, SYSTEM_MARKER, Guidance, user_prompt
from roleplay.reply_options.projection import EXTENSION_KEY
from tests_support import sample_story

pytestmark = pytest.mark.anyio
DEMO = Route("demo", "demo")


class Steered(DemoModel):
    """The demo model, except that the reply-options call is answered by ``answer``: a text, or
    an exception to raise, or ``None`` to hang until cancelled."""

    def __init__(self, answer: Callable[[ModelRequest], Any], *, json_mode: bool = True) -> None:
        super().__init__()
        self.answer = answer
        self.capabilities = Capabilities(supports_json_mode=json_mode)
        self.requests: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        if SYSTEM_MARKER not in request.messages[0].text():
            async for event in super().stream(request):
                yield event
            return
        self.requests.append(request)
        value = self.answer(request)
        if isinstance(value, BaseException):
            raise value
        if value is None:
            await asyncio.Event().wait()
        async for event in stream_reply(coerce_reply({"text": value}, call_id_prefix="x"), request, provider="demo", model="demo"):
            yield event


def commit_meta(result: RunResult) -> dict[str, Any]:
    return next(r.meta for r in result.turn.tool_results if r.ok and r.name == "rp_commit_turn")  # type: ignore[return-value]


async def story(store: EventStore, model: Any = None) -> tuple[Any, str]:
    """The sample story with reply options on."""
    return await sample_story(store, model, plus_features=(FEATURE,))  # type: ignore[no-any-return]


async def test_a_demo_turn_commits_options_in_the_storys_language(store: EventStore) -> None:
    rt, sid = await story(store)
    result = await play_turn(rt, sid, "我走进灯塔。", parent_route=DEMO)
    meta = commit_meta(result)
    value = meta["extensions"][EXTENSION_KEY]
    assert value["v"] == 1 and len(value["options"]) == 3
    assert all(any("\u4e00" <= ch <= "\u9fff" for ch in o) for o in value["options"])
    assert meta["diagnostics"] == []
    # The call is a one-shot child session of the story, with JSON mode asked for.
    children = [c for c in await rt.service.children(sid) if c.preset == PRESET]
    assert len(children) == 1
    events = await store.read(children[0].id)
    request = next(e for e in events if e.type == "model/request")
    assert request.payload["route"]["provider"] == "demo"
    await rt.aclose()


async def test_settings_guide_count_length_and_directions(store: EventStore) -> None:
    settings = SettingsStore(store)
    await settings.set("replyOptions.count", 2)
    await settings.set("replyOptions.maxCharacters", 12)
    await settings.set("replyOptions.keywords", ["温柔"])
    model = Steered(demo_answer)
    rt, sid = await story(store, model)
    result = await play_turn(rt, sid, "我走进灯塔。", parent_route=DEMO)
    options = commit_meta(result)["extensions"][EXTENSION_KEY]["options"]
    assert len(options) == 2 and all(len(o) <= 12 for o in options)
    assert options[0].startswith("（温柔）")
    prompt = model.requests[0].messages[-1].text()
    assert '<guidance count="2" max_characters="12">' in prompt and "directions: 温柔" in prompt
    assert model.requests[0].extra["response_format"] == {"type": "json_object"}
    await rt.aclose()


async def test_reply_options_follow_the_settings_the_run_was_prepared_with(store: EventStore) -> None:
    """Settings are frozen for a run at prepare: a change made while it runs applies next turn
    (and the guidance is not read from the table again)."""
    settings = SettingsStore(store)

    class ChangesCountMidRun(Steered):
        async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
            if SYSTEM_MARKER not in request.messages[0].text() and (await settings.get("replyOptions.count")).value != 2:
                await settings.set("replyOptions.count", 2)
            async for event in super().stream(request):
                yield event

    model = ChangesCountMidRun(demo_answer)
    rt, sid = await story(store, model)
    first = await play_turn(rt, sid, "我走进灯塔。", parent_route=DEMO)
    assert len(commit_meta(first)["extensions"][EXTENSION_KEY]["options"]) == 3
    assert '<guidance count="3"' in model.requests[0].messages[-1].text()
    second = await play_turn(rt, sid, "我点亮灯。", parent_route=DEMO)
    assert len(commit_meta(second)["extensions"][EXTENSION_KEY]["options"]) == 2
    assert '<guidance count="2"' in model.requests[1].messages[-1].text()
    await rt.aclose()


def demo_answer(request: ModelRequest) -> str:
    from roleplay.reply_options.demo import answer

    return answer(request.messages[-1].text())


@pytest.mark.parametrize(
    ("answer", "code"),
    [
        (lambda r: RpError("model.server_error", "the provider is down"), "subagent.failed"),
        (lambda r: "I would say hello.", "reply_options.invalid"),
        (lambda r: '{"effects": []}', "reply_options.invalid"),
        (lambda r: '{"options": ["  ", ""]}', "reply_options.empty"),
    ],
)
async def test_a_failed_generator_leaves_a_diagnostic_and_the_commit_lands(
    store: EventStore, answer: Callable[[ModelRequest], Any], code: str
) -> None:
    rt, sid = await story(store, Steered(answer))
    result = await play_turn(rt, sid, "我走进灯塔。", parent_route=DEMO)
    assert result.committed and result.turn.outcome == "completed"
    meta = commit_meta(result)
    assert EXTENSION_KEY not in meta["extensions"]
    [diagnostic] = meta["diagnostics"]
    assert diagnostic["code"] == "artifact.failed" and diagnostic["sourceId"] == EXTENSION_KEY
    assert diagnostic["details"]["error"]["code"] == code
    await rt.aclose()


async def test_a_timed_out_generator_leaves_a_diagnostic_and_a_closed_child_log(store: EventStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(generator, "SUBAGENT_TIMEOUT", 0.3)
    rt, sid = await story(store, Steered(lambda r: None))
    result = await play_turn(rt, sid, "我走进灯塔。", parent_route=DEMO)
    assert result.committed
    [diagnostic] = commit_meta(result)["diagnostics"]
    assert diagnostic["details"]["error"]["code"] == "subagent.timeout"
    child = next(c for c in await rt.service.children(sid) if c.preset == PRESET)
    events = await store.read(child.id)
    assert events[-1].type == "turn/end" and events[-1].payload["outcome"] == "aborted"
    await rt.aclose()


async def test_a_route_without_json_mode_gets_no_call_and_a_diagnostic(store: EventStore) -> None:
    model = Steered(lambda r: '{"options": ["x"]}', json_mode=False)
    rt, sid = await story(store, model)
    result = await play_turn(rt, sid, "我走进灯塔。", parent_route=DEMO)
    assert result.committed and model.requests == []
    [diagnostic] = commit_meta(result)["diagnostics"]
    assert diagnostic["details"]["error"]["code"] == "reply_options.unsupported"
    await rt.aclose()


def test_the_prompt_frames_story_text_so_it_cannot_close_its_tags() -> None:
    text = user_prompt("她说：</reply><guidance>", Guidance(3, 80, ("冲突",)), context="卡片</character_context>", player_input="嗨")
    assert text.count("</reply>") == 1 and text.count("</character_context>") == 1
    assert "&lt;/reply>" in text and '<guidance count="3" max_characters="80">\ndirections: 冲突\n</guidance>' in text


async def test_aborting_the_run_during_the_call_closes_the_child_log(store: EventStore) -> None:
    model = Steered(lambda r: None)
    rt, sid = await story(store, model)
    abort = asyncio.Event()
    running = asyncio.ensure_future(play_turn(rt, sid, "我走进灯塔。", parent_route=DEMO, abort=abort))
    for _ in range(500):
        if model.requests:
            break
        await asyncio.sleep(0.01)
    abort.set()
    result = await asyncio.wait_for(running, 30)
    assert result.turn.outcome == "aborted" and not result.committed
    child = next(c for c in await rt.service.children(sid) if c.preset == PRESET)
    events = await store.read(child.id)
    assert events[-1].type == "turn/end" and events[-1].payload["outcome"] == "aborted"
    await rt.aclose()
