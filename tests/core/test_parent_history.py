"""The parent's request stays bounded in a long story (issue 12, item 1): earlier turns reach it
as (user input, final reply) pairs, and the route's context window cuts the oldest exchanges."""

from __future__ import annotations

from typing import Any, AsyncIterator

import pytest

from roleplay.core.run import RUN_CONTEXT, play_turn
from roleplay.core.settings import SettingsStore
from roleplay.harness.history import fit_history, message_tokens, tools_tokens
from roleplay.harness.models.demo import DemoModel
from roleplay.harness.models.routes import Route
from roleplay.harness.models.types import ModelRequest, StreamEvent
from roleplay.harness.store import EventStore

from .test_run import INPUTS, sample_story

pytestmark = pytest.mark.anyio


class Recorder:
    """The demo model, keeping every parent request (the Writer's carry no tools)."""

    def __init__(self) -> None:
        self.inner = DemoModel()
        self.provider, self.model, self.label, self.capabilities = (
            self.inner.provider,
            self.inner.model,
            self.inner.label,
            self.inner.capabilities,
        )
        self.parent: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        if request.tools:
            self.parent.append(request)
        async for event in self.inner.stream(request):
            yield event


def request_tokens(request: ModelRequest) -> int:
    return sum(message_tokens(m) for m in request.messages) + tools_tokens(request.tools)


async def play(store: EventStore, turns: int, route: Route) -> tuple[Any, str, Recorder, list[Any]]:
    rt, sid = await sample_story(store)
    recorder = Recorder()
    rt.models[route.spec] = recorder  # type: ignore[assignment]
    results = []
    for n in range(turns):
        recorder.parent.clear()
        result = await play_turn(rt, sid, f"（第{n + 1}轮）{INPUTS[n % len(INPUTS)]}", parent_route=route)
        assert result.committed, result.turn.error
        results.append(result)
    return rt, sid, recorder, results


async def test_at_turn_30_earlier_turns_reach_the_parent_as_input_and_reply_pairs_only(store: EventStore) -> None:
    rt, sid, recorder, results = await play(store, 30, Route("demo", "demo"))
    request = recorder.parent[-1]  # the last step of turn 30: the commit retry after the Writer
    messages = request.messages[1:]
    current = max(i for i, m in enumerate(messages) if m.role == "user" and "<roleplay_request" in m.text()) - 1
    earlier, this_turn = messages[:current], messages[current:]
    assert this_turn[0].text() == f"（第30轮）{INPUTS[29 % len(INPUTS)]}"
    # This turn keeps its own run context, Writer result and commit calls whole.
    assert any(m.role == "tool" for m in this_turn) and any(m.tool_calls for m in this_turn)
    # Earlier turns: no run-context block, no tool call or result, no reasoning; alternating pairs.
    assert not any("<roleplay_request" in m.text() for m in earlier)
    assert all(m.role in ("user", "assistant") and not m.tool_calls and not m.reasoning for m in earlier)
    opening, pairs = earlier[0], earlier[1:]
    assert opening.role == "assistant"
    assert [m.role for m in pairs] == ["user", "assistant"] * 29
    assert [m.text() for m in pairs[0::2]] == [f"（第{n + 1}轮）{INPUTS[n % len(INPUTS)]}" for n in range(29)]
    assert [m.text() for m in pairs[1::2]] == [r.reply for r in results[:29]]
    # The log still holds every earlier run context (only the request view is projected).
    events = await rt.service.events(sid)
    assert sum(1 for e in events if e.type == "user/message" and RUN_CONTEXT in (e.payload.get("source") or {})) == 30
    await rt.aclose()


async def test_a_small_window_keeps_the_parent_request_under_it_with_the_newest_exchanges(store: EventStore) -> None:
    window = 12_000
    rt, sid, recorder, results = await play(store, 30, Route("demo", "demo", context_window=window))
    for request in recorder.parent:
        assert request_tokens(request) <= window - min(16_384, window // 4)
    request = recorder.parent[-1]
    users = [m.text() for m in request.messages if m.role == "user" and "<roleplay_request" not in m.text()]
    # The newest exchanges survive, contiguous up to this turn; the oldest are gone.
    assert users[-1].startswith("（第30轮）") and users[-2].startswith("（第29轮）")
    numbers = [int(u.split("第")[1].split("轮")[0]) for u in users]
    assert numbers == list(range(numbers[0], 31)) and numbers[0] > 1
    note = [d for d in results[-1].diagnostics if d["code"] == "run.parent_history_trimmed"]
    assert note and note[0]["details"]["window"] == window and note[0]["details"]["omitted"] > 0
    # The fit is logged on the request, so an inspector (and a replay) can tell what was left out.
    events = await rt.service.events(sid)
    logged = [e.payload["history"] for e in events if e.type == "model/request" and "history" in e.payload]
    assert logged and logged[-1]["omitted"] == note[0]["details"]["omitted"]
    await rt.aclose()


async def test_the_context_windows_setting_bounds_the_parent_like_the_writer(store: EventStore) -> None:
    window = 12_000
    rt, sid = await sample_story(store)
    route = Route("demo", "demo")
    await SettingsStore(rt.store).set("context.windows", {"demo/demo": window})
    recorder = Recorder()
    rt.models[route.spec] = recorder  # type: ignore[assignment]
    for n in range(20):
        recorder.parent.clear()
        result = await play_turn(rt, sid, f"（第{n + 1}轮）{INPUTS[n % len(INPUTS)]}", parent_route=route)
    assert all(request_tokens(r) <= window for r in recorder.parent)
    assert any(d["code"] == "run.parent_history_trimmed" for d in result.diagnostics)
    assert result.prepared.parent_window == window
    await rt.aclose()


async def test_the_parent_request_stops_growing_once_the_budget_is_full(store: EventStore) -> None:
    window = 12_000
    rt, sid, recorder, results = await play(store, 40, Route("demo", "demo", context_window=window))
    del results
    last = request_tokens(recorder.parent[-1])
    assert last <= window and last >= 0.5 * (window - window // 4)
    await rt.aclose()


def test_fit_history_never_moves_back_before_the_floor_of_an_earlier_step() -> None:
    from roleplay.harness.models.types import ChatMessage

    earlier = [ChatMessage("user", "a " * 50), ChatMessage("assistant", "b " * 50)] * 4
    cut, fit = fit_history(earlier, window=10_000, reply_reserve=0, fixed_tokens=0)
    assert cut == 0 and fit.omitted == 0
    cut, fit = fit_history(earlier, window=10_000, reply_reserve=0, fixed_tokens=0, floor=4)
    assert cut == 4 and fit.omitted == 4  # a later step of the turn keeps the earlier step's prefix
