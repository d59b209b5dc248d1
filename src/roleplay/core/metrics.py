"""Reply metrics: tokens in and out, latency, route and cost, per reply and per session.

Everything comes from the log. A turn's parent steps log ``model/request`` (the route) and
``step/end {usage}``; its Writer runs in a child session whose id the ``rp_write_turn`` result
names (``meta.childSessionId``), with its own requests and usage; any other child a tool result
names (a sub-agent) is counted the same way. Latency is the time between logged events:
``turn/start`` → ``turn/end`` for the whole reply, and per model call its ``model/request`` → the
``assistant/message`` that answered it. Time to first token: the Writer records on its result
(``meta.firstTokenAt``, by the store's injected clock) when its first text delta arrived; a
Writer call's ``firstTokenMs`` counts from its ``model/request``, a reply's from ``turn/start`` (what
the player waited before text appeared; Chat mode only: in Agent mode the Writer's draft is not
the reply the player sees). Logs from before that field, and replies whose Writer streamed no text,
have ``firstTokenMs`` None rather than a guess.

Cost needs prices, which no built-in route declares; ``prices`` maps ``provider/model`` to
``{"input": …, "output": …}`` per million tokens (``rp metrics --price``), and a call whose route
has none has no cost (the total says how many calls were unpriced).

Per session: the replies on the conversation now (``live``), and everything spent, retired
alternatives, deleted and failed turns included (``all``); each with token and latency sums and
the median and mean of total latency and of time to first token over the replies that have one.
"""

from __future__ import annotations

from datetime import datetime
from statistics import fmean, median
from typing import Any

from roleplay.errors import RpError
from roleplay.harness.events import Event
from roleplay.names import WRITE_TURN_TOOL
from roleplay.harness.names import ASSISTANT_MESSAGE, MODEL_REQUEST, STEP_END, TOOL_RESULT, TURN_END

from .runtime import RoleplayRuntime
from .turn_surface import outcome, turn_is_live, turn_surface_projection

USAGE_IN = ("prompt_tokens", "input_tokens")
USAGE_OUT = ("completion_tokens", "output_tokens")


def parse_prices(specs: list[str] | tuple[str, ...]) -> dict[str, dict[str, float]]:
    """``provider/model=IN,OUT`` (per million tokens) → the ``prices`` mapping."""
    prices: dict[str, dict[str, float]] = {}
    for spec in specs:
        route, sep, values = spec.partition("=")
        parts = values.split(",")
        try:
            if not sep or "/" not in route or len(parts) != 2:
                raise ValueError(spec)
            prices[route.strip()] = {"input": float(parts[0]), "output": float(parts[1])}
        except ValueError:
            raise RpError(
                "metrics.invalid_price", f"a price is provider/model=INPUT,OUTPUT per million tokens (got {spec!r})", pointer="/price"
            ) from None
    return prices


def _ms(start: str | None, end: str | None) -> int | None:
    if not start or not end:
        return None
    a = datetime.fromisoformat(start.replace("Z", "+00:00"))
    b = datetime.fromisoformat(end.replace("Z", "+00:00"))
    return max(0, round((b - a).total_seconds() * 1000))


def _tokens(usage: dict[str, Any] | None, keys: tuple[str, ...]) -> int:
    if not isinstance(usage, dict):
        return 0
    for key in keys:
        value = usage.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return 0


def calls_of(events: list[Event], *, role: str, first_token_at: str | None = None) -> list[dict[str, Any]]:
    """Each model call in ``events``: route, tokens in/out, its latency and (for the first call,
    when ``first_token_at`` says when its first text arrived) its time to first token."""
    calls: list[dict[str, Any]] = []
    by_step: dict[str, dict[str, Any]] = {}
    for event in events:
        p = event.payload
        if event.type == MODEL_REQUEST:
            route = p.get("route") or {}
            call: dict[str, Any] = {
                "role": role,
                "route": f"{route.get('provider')}/{route.get('model')}",
                "tokensIn": 0,
                "tokensOut": 0,
                "latencyMs": None,
                "firstTokenMs": None,
                "_at": event.created_at,
            }
            calls.append(call)
            by_step[p["stepId"]] = call
        elif event.type == ASSISTANT_MESSAGE and p.get("stepId") in by_step:
            call = by_step[p["stepId"]]
            if call["latencyMs"] is None:
                call["latencyMs"] = _ms(call["_at"], event.created_at)
        elif event.type == STEP_END and p.get("stepId") in by_step:
            call = by_step[p["stepId"]]
            call["tokensIn"] += _tokens(p.get("usage"), USAGE_IN)
            call["tokensOut"] += _tokens(p.get("usage"), USAGE_OUT)
    if calls and first_token_at:
        calls[0]["firstTokenMs"] = _ms(calls[0]["_at"], first_token_at)
    for call in calls:
        call.pop("_at", None)
    return calls


def _price(calls: list[dict[str, Any]], prices: dict[str, dict[str, float]]) -> tuple[float | None, int]:
    total, unpriced = 0.0, 0
    for call in calls:
        price = prices.get(call["route"])
        if price is None:
            unpriced += 1
            continue
        call["cost"] = round((call["tokensIn"] * price["input"] + call["tokensOut"] * price["output"]) / 1_000_000, 8)
        total += call["cost"]
    return (round(total, 8) if unpriced < len(calls) else None), unpriced


async def turn_metrics(
    rt: RoleplayRuntime, session_id: str, turn: dict[str, Any], prices: dict[str, dict[str, float]] | None = None
) -> dict[str, Any]:
    end = turn["endSeq"] or await rt.store.head(session_id)
    events = await rt.service.events(session_id, after_seq=turn["startSeq"] - 1, until_seq=end)
    calls = calls_of(events, role="parent")
    first_token: str | None = None
    for event in events:
        meta = event.payload.get("meta") if event.type == TOOL_RESULT else None
        child = meta.get("childSessionId") if isinstance(meta, dict) else None
        if isinstance(meta, dict) and isinstance(child, str):
            role = "writer" if event.payload["name"] == WRITE_TURN_TOOL else event.payload["name"]
            at = meta.get("firstTokenAt") if role == "writer" else None
            at = at if isinstance(at, str) else None
            if at and event.payload["ok"]:
                first_token = at  # the accepted draft's (a run has one)
            calls += calls_of(await rt.service.events(child), role=role, first_token_at=at)
    cost, unpriced = _price(calls, prices or {})
    started = events[0].created_at if events else None
    finished = events[-1].created_at if events and events[-1].type == TURN_END else None
    parent_routes = [c["route"] for c in calls if c["role"] == "parent"]
    writer_routes = [c["route"] for c in calls if c["role"] == "writer"]
    return {
        "turnId": turn["turnId"],
        "outcome": outcome(turn),
        "route": parent_routes[0] if parent_routes else None,
        "writerRoute": writer_routes[-1] if writer_routes else None,
        "tokensIn": sum(c["tokensIn"] for c in calls),
        "tokensOut": sum(c["tokensOut"] for c in calls),
        "latencyMs": _ms(started, finished),
        "firstTokenMs": _ms(started, first_token) if turn["mode"] in ("chat", None) else None,
        "cost": cost,
        "unpricedCalls": unpriced,
        "calls": calls,
    }


def spread(values: list[int]) -> dict[str, Any] | None:
    """``{p50, mean, replies}`` of the measured values (None when none was measured)."""
    if not values:
        return None
    return {"p50": round(median(values), 1), "mean": round(fmean(values), 1), "replies": len(values)}


def _sum(replies: list[dict[str, Any]]) -> dict[str, Any]:
    costs = [r["cost"] for r in replies if r["cost"] is not None]
    return {
        "replies": len(replies),
        "tokensIn": sum(r["tokensIn"] for r in replies),
        "tokensOut": sum(r["tokensOut"] for r in replies),
        "latencyMs": sum(r["latencyMs"] or 0 for r in replies),
        "latency": spread([r["latencyMs"] for r in replies if r["latencyMs"] is not None]),
        "firstToken": spread([r["firstTokenMs"] for r in replies if r["firstTokenMs"] is not None]),
        "cost": round(sum(costs), 8) if costs else None,
        "unpricedCalls": sum(r["unpricedCalls"] for r in replies),
    }


async def session_metrics(rt: RoleplayRuntime, session_id: str, prices: dict[str, dict[str, float]] | None = None) -> dict[str, Any]:
    """Per reply (every turn that made a model call, oldest first, each marked ``live`` when it is
    on the conversation now) and the session totals for the live ones and for all."""
    state = (await rt.service.projection(session_id, turn_surface_projection)).state
    live = {t for t in state["order"] if turn_is_live(state, state["turns"][t])}
    for group in state["groups"].values():
        for alt in group["alts"]:
            if alt["current"] in live:
                live.add(alt["turnId"])  # a swiped-back alternative: its reply is the one that was paid for
    replies = []
    for turn_id in state["order"]:
        turn = state["turns"][turn_id]
        if turn["mode"] not in ("chat", "agent", None):
            continue  # openings and swipes call no model
        metrics = await turn_metrics(rt, session_id, turn, prices)
        metrics["live"] = turn_id in live
        replies.append(metrics)
    return {
        "sessionId": session_id,
        "replies": replies,
        "live": _sum([r for r in replies if r["live"]]),
        "all": _sum(replies),
    }
