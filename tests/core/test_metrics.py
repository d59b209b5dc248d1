"""Reply metrics from the log: tokens of the parent and its Writer, route, latency, cost."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, AsyncIterator, Callable

import pytest
from click.testing import CliRunner

from roleplay.cli import cli
from roleplay.cli_context import CliState

from roleplay.core.metrics import parse_prices, session_metrics
from roleplay.core.regenerate import regenerate
from roleplay.core.run import play_turn
from roleplay.errors import RpError
from roleplay.harness.models.demo import DemoModel
from roleplay.harness.models.routes import Route
from roleplay.harness.models.types import ModelRequest, StreamEvent
from roleplay.harness.store import EventStore
from roleplay.names import WRITE_TURN_TOOL
from roleplay.testing.fake_openai import serve_fake_openai
from tests_support import sample_story

pytestmark = pytest.mark.anyio
DEMO = Route("demo", "demo")


def test_prices_parse_and_refuse() -> None:
    assert parse_prices(["demo/demo=1,2.5"]) == {"demo/demo": {"input": 1.0, "output": 2.5}}
    for bad in ("demo=1,2", "demo/demo=1", "demo/demo=a,b", "demo/demo"):
        with pytest.raises(RpError) as exc:
            parse_prices([bad])
        assert exc.value.code == "metrics.invalid_price"


async def test_per_reply_and_session_totals(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    await play_turn(rt, sid, "我推开铁门。", parent_route=DEMO)
    await play_turn(rt, sid, "我帮她擦铜镜。", parent_route=DEMO)
    await regenerate(rt, sid, parent_route=DEMO)
    report = await session_metrics(rt, sid, parse_prices(["demo/demo=1000000,2000000"]))
    replies = report["replies"]
    assert [r["live"] for r in replies] == [True, False, True]  # the regenerated reply is spent, not live
    events = await rt.service.events(sid)
    first = replies[0]
    turn_events = [e for e in events if e.payload.get("turnId") == first["turnId"]]
    parent_in = sum(e.payload["usage"]["prompt_tokens"] for e in turn_events if e.type == "step/end")
    writer = [c for c in first["calls"] if c["role"] == "writer"]
    assert writer and first["writerRoute"] == "demo/demo" and first["route"] == "demo/demo"
    assert first["tokensIn"] == parent_in + sum(c["tokensIn"] for c in writer)
    assert first["cost"] == first["tokensIn"] * 1 + first["tokensOut"] * 2 and first["unpricedCalls"] == 0
    assert first["latencyMs"] is not None and first["firstTokenMs"] is not None
    assert all(c["firstTokenMs"] is None for c in first["calls"] if c["role"] == "parent")
    assert report["all"]["replies"] == 3 and report["live"]["replies"] == 2
    assert report["all"]["tokensIn"] == sum(r["tokensIn"] for r in replies)
    unpriced = await session_metrics(rt, sid)
    assert unpriced["live"]["cost"] is None and unpriced["live"]["unpricedCalls"] > 0
    await rt.aclose()


class SteppedClock:
    """Time stands still until a test moves it."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += timedelta(milliseconds=ms)


class Thinking:
    """The demo model, taking ``ms`` (by the store's clock) before the first event of each answer
    and ``tail`` more before the last one."""

    def __init__(self, clock: SteppedClock, ms: int, tail: int) -> None:
        self.inner, self.clock, self.ms, self.tail = DemoModel(), clock, ms, tail

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        self.clock.advance(self.ms)
        events = [e async for e in self.inner.stream(request)]
        for i, event in enumerate(events):
            if i == len(events) - 1:
                self.clock.advance(self.tail)
            yield event


async def test_time_to_first_token_by_the_injected_clock(make_store: Callable[..., EventStore]) -> None:
    clock = SteppedClock()
    store = make_store(clock=clock)
    await store.migrate()
    try:
        rt, sid = await sample_story(store, Thinking(clock, 250, 40))
        await play_turn(rt, sid, "我推开铁门。", parent_route=DEMO)
        await play_turn(rt, sid, "我帮她擦铜镜。", parent_route=DEMO)
        written = [e for e in await rt.service.events(sid) if e.type == "tool/result" and e.payload["name"] == WRITE_TURN_TOOL]
        assert [e.payload["meta"]["firstTokenAt"] for e in written]  # recorded on the Writer's result
        report = await session_metrics(rt, sid)
        for reply in report["replies"]:
            writer = [c for c in reply["calls"] if c["role"] == "writer"]
            assert [c["firstTokenMs"] for c in writer] == [250]  # its request → its first delta
            assert writer[0]["latencyMs"] == 290
            # The player waited for the parent's first call (250 + 40) and the Writer's 250.
            assert reply["firstTokenMs"] == 540 and reply["latencyMs"] > reply["firstTokenMs"]
        assert report["live"]["firstToken"] == {"p50": 540, "mean": 540, "replies": 2}
        assert report["all"]["latency"]["replies"] == 2
        # A Writer result from before the field (no firstTokenAt) reads as unmeasured, not as zero.
        from roleplay.core import metrics

        calls = metrics.calls_of(await rt.service.events(written[0].payload["meta"]["childSessionId"]), role="writer")
        assert calls[0]["firstTokenMs"] is None and calls[0]["latencyMs"] == 290
        assert metrics.spread([]) is None and metrics.spread([10, 20, 90]) == {"p50": 20, "mean": 40, "replies": 3}
        await rt.aclose()
    finally:
        await store.close()


CLEAN = {"DEEPSEEK_API_KEY": "", "OPENAI_API_KEY": "", "OPENAI_BASE_URL": "", "RP_MODEL": "", "RP_DATABASE_URL": ""}


def test_rp_metrics_measures_a_streamed_reply_from_the_fake_server(tmp_path: Path) -> None:
    def invoke(*args: str, env: dict[str, str]) -> Any:
        result = CliRunner().invoke(cli, ["--home", str(tmp_path), *args], env={**CLEAN, **env}, obj=CliState())
        assert result.exit_code == 0, result.output
        return result

    # Every streamed frame takes 30 ms: the Writer's first text arrives well before its last.
    with serve_fake_openai(chunk_delay=0.03) as fake:
        env = {"OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "x"}
        sid = json.loads(invoke("new", "--sample", "--model", "openai/fake", "--json", env=env).stdout)["sessionId"]
        invoke("say", sid, "我推开铁门。", env=env)
    report = json.loads(invoke("metrics", sid, "--json", env={}).stdout)
    (reply,) = report["replies"]
    (writer,) = [c for c in reply["calls"] if c["role"] == "writer"]
    assert writer["route"] == "openai/fake"
    assert 0 <= writer["firstTokenMs"] <= writer["latencyMs"] - 30
    assert writer["firstTokenMs"] < reply["firstTokenMs"] < reply["latencyMs"]
    assert report["live"]["firstToken"]["replies"] == 1
    shown = invoke("metrics", sid, env={}).stdout
    assert f"(first text {reply['firstTokenMs']} ms)" in shown and "first text p50" in shown
