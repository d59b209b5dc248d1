"""Forks cut only between turns: a seq inside a turn snaps back to the end of the last closed
turn and says so; inside the first turn it is refused. Through the service and `rp sessions fork`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from roleplay.cli import cli
from roleplay.cli_context import CliState
from roleplay.errors import RpError
from roleplay.harness.events import EventDraft
from roleplay.harness.fork_points import after_turn_fork_point
from roleplay.harness.sessions import SessionService
from roleplay.harness.store import EventStore, open_store
from roleplay.harness.turns import turns_projection

pytestmark = pytest.mark.anyio


def turn(n: int, *, close: bool = True) -> list[EventDraft]:
    tid = f"turn_{n}"
    drafts = [
        EventDraft("turn/start", {"turnId": tid, "inputMessageId": f"u{n}"}),
        EventDraft("user/message", {"messageId": f"u{n}", "content": [{"type": "text", "text": f"question {n}"}], "turnId": tid}),
        EventDraft("assistant/message", {"messageId": f"a{n}", "content": [{"type": "text", "text": f"answer {n}"}], "turnId": tid}),
    ]
    return drafts + ([EventDraft("turn/end", {"turnId": tid, "outcome": "completed"})] if close else [])


async def two_turns(service: SessionService, *, close_second: bool = True) -> str:
    """seq 1 a setup command; turn 1 at 2..5; turn 2 at 6..9 (6..8 when still open)."""
    setup = [EventDraft("command/run", {"commandId": "c1", "name": "x", "args": {}})]
    rec = await service.store.create_session(preset="roleplay", title="story", events=setup + turn(1) + turn(2, close=close_second))
    return rec.id


async def test_a_seq_between_turns_forks_exactly_there(store: EventStore) -> None:
    service = SessionService(store)
    sid = await two_turns(service)
    for at in (1, 5, 9):
        rec, point = await service.fork_between_turns(sid, at)
        assert rec.forked_at_seq == rec.head_seq == at and not point.snapped


async def test_a_seq_inside_a_turn_snaps_back_to_the_last_closed_turn(store: EventStore) -> None:
    service = SessionService(store)
    sid = await two_turns(service)
    rec, point = await service.fork_between_turns(sid, 7)  # the user message of turn 2
    assert rec.head_seq == 5 and point.snapped
    assert point.to_dict() == {"requestedSeq": 7, "atSeq": 5, "snapped": True, "turn": {"turnId": "turn_2", "startSeq": 6, "endSeq": 9}}
    assert "--at 9" in point.describe()
    surface = await service.surface(rec.id)
    assert [n["id"] for n in surface["nodes"]] == ["u1", "a1"]  # no unanswered user message
    assert (await service.projection(rec.id, turns_projection)).state["open"] == {}
    assert (await service.fork(sid, 8)).head_seq == 5  # the plain fork snaps the same way


async def test_a_turn_still_running_in_the_source_is_left_out(store: EventStore) -> None:
    service = SessionService(store)
    sid = await two_turns(service, close_second=False)
    rec, point = await service.fork_between_turns(sid, 8)
    assert rec.head_seq == 5 and point.turn_end_seq is None and "--at" not in point.describe()


async def test_a_seq_inside_the_first_turn_is_refused(store: EventStore) -> None:
    rec = await store.create_session(preset="roleplay", events=turn(1) + turn(2))
    before = await store.dump()
    with pytest.raises(RpError) as exc:
        await SessionService(store).fork(rec.id, 2)
    assert exc.value.code == "session.fork_mid_turn" and exc.value.details["turnEndSeq"] == 4
    assert await store.dump() == before  # nothing was created


# -- the CLI -----------------------------------------------------------------------------------------


def invoke(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env=env, obj=CliState())
    return result.exit_code, result.stdout, result.stderr


def seed(store_url: str) -> str:
    async def go() -> str:
        store = open_store(store_url)
        await store.migrate()
        try:
            return await two_turns(SessionService(store))
        finally:
            await store.close()

    return asyncio.run(go())


def test_rp_sessions_fork_says_when_it_snapped(store_url: str, tmp_path: Path) -> None:
    env = {"RP_DATABASE_URL": store_url, "RP_HOME": str(tmp_path / "home")}
    sid = seed(store_url)
    code, out, _ = invoke(env, "sessions", "fork", sid, "--at", "7", "--json")
    fork: dict[str, Any] = json.loads(out)
    assert code == 0 and fork["headSeq"] == fork["forkedAtSeq"] == 5 and fork["forkPoint"]["snapped"] is True
    code, out, _ = invoke(env, "sessions", "fork", sid, "--at", "7")
    assert code == 0 and "seq 7 is inside turn turn_2" in out and "snapped back" in out and "--at 9" in out
    code, out, _ = invoke(env, "sessions", "fork", sid, "--at", "9", "--json")
    assert json.loads(out)["forkPoint"] == {"requestedSeq": 9, "atSeq": 9, "snapped": False}
    code, out, _ = invoke(env, "sessions", "fork", sid, "--at", "3", "--json")
    assert json.loads(out)["headSeq"] == 1  # inside turn 1: only the setup before it is kept


async def test_after_turn_keeps_the_events_between_turns(store: EventStore) -> None:
    service = SessionService(store)
    sid = await two_turns(service)
    point = await after_turn_fork_point(store, sid, 5)  # turn 1 ends at 5, turn 2 starts at 6
    assert (point.at_seq, point.snapped) == (5, False)
    edit = {
        "messageId": "a2e",
        "content": [{"type": "text", "text": "edited"}],
        "surfaceOp": {"op": "replace", "range": "node", "targetMessageId": "a2"},
    }
    await service.append(sid, [EventDraft("assistant/message", edit)], expected_seq=9)
    point = await after_turn_fork_point(store, sid, 9)
    assert (point.requested_seq, point.at_seq, point.snapped) == (9, 10, False)
    assert point.to_dict()["betweenTurns"] == 1 and "kept" in point.describe()
