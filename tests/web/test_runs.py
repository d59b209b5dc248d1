"""The turn runner: a call's turn id once it began, its early error as the request's answer,
abort, and shutdown aborting what runs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from roleplay.errors import ConflictError, RpError
from roleplay.harness.events import EventDraft
from roleplay.harness.store import open_store
from roleplay.web.runs import TurnRunner

pytestmark = pytest.mark.anyio


async def fake_turn(store: Any, sid: str, abort: asyncio.Event, *, turn_id: str = "turn_1") -> str:
    """A stand-in for a turn: ``turn/start``, then ``turn/end`` when aborted."""
    await store.append_at_head(sid, [EventDraft("turn/start", {"turnId": turn_id, "mode": "chat"})])
    await abort.wait()
    await store.append_at_head(sid, [EventDraft("turn/end", {"turnId": turn_id, "outcome": "aborted"})])
    return "done"


async def test_start_returns_the_turn_id_and_abort_and_shutdown_end_it(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'rp.db'}")
    await store.migrate()
    try:
        sid = (await store.create_session(preset="t")).id
        runner = TurnRunner(store)
        run = await runner.start(sid, "turn", lambda abort: fake_turn(store, sid, abort))
        assert run.turn_id == "turn_1" and runner.active[sid] is run
        with pytest.raises(RpError) as wrong:
            runner.abort(sid, "turn_other")
        assert wrong.value.code == "run.not_running"
        runner.abort(sid, "turn_1")
        assert await run.task == "done"
        await asyncio.sleep(0)
        assert sid not in runner.active
        # shutdown aborts what still runs, then refuses new starts
        second = await runner.start(sid, "turn", lambda abort: fake_turn(store, sid, abort, turn_id="turn_2"))
        await runner.shutdown(timeout=5)
        assert second.task.done() and (await store.read(sid))[-1].payload == {"turnId": "turn_2", "outcome": "aborted"}
        with pytest.raises(RpError) as closing:
            await runner.start(sid, "turn", lambda abort: fake_turn(store, sid, abort))
        assert closing.value.code == "server.shutting_down"
    finally:
        await store.close()


async def test_an_error_before_the_turn_began_is_raised_to_the_caller(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'rp.db'}")
    await store.migrate()
    try:
        sid = (await store.create_session(preset="t")).id
        runner = TurnRunner(store)

        async def busy(abort: asyncio.Event) -> None:
            raise ConflictError("run.busy", "already running")

        with pytest.raises(ConflictError):
            await runner.start(sid, "turn", busy)
        assert sid not in runner.active
    finally:
        await store.close()
