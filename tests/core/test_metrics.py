"""Reply metrics from the log: tokens of the parent and its Writer, route, latency, cost."""

from __future__ import annotations

import pytest

from roleplay.core.metrics import parse_prices, session_metrics
from roleplay.core.regenerate import regenerate
from roleplay.core.run import play_turn
from roleplay.errors import RpError
from roleplay.harness.models.routes import Route
from roleplay.harness.store import EventStore
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
    assert first["latencyMs"] is not None and first["firstTokenMs"] is None
    assert report["all"]["replies"] == 3 and report["live"]["replies"] == 2
    assert report["all"]["tokensIn"] == sum(r["tokensIn"] for r in replies)
    unpriced = await session_metrics(rt, sid)
    assert unpriced["live"]["cost"] is None and unpriced["live"]["unpricedCalls"] > 0
    await rt.aclose()
