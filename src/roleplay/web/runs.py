"""Turns running in the server's background, so ``POST …/turns`` can answer 202 at once.

A turn-shaped call (a turn, a Continue, a regeneration) is started as a task with its own abort
event. The request waits only until the call has either failed before its turn began (``run.busy``,
an archived story, a bad input: the request gets that error) or appended its ``turn/start`` (the
request gets the turn id); the reply itself reaches clients through the session's event stream.

The lease (``harness/leases.py``) keeps one run per session across processes; this registry only
holds what this process started, so an abort or a shutdown can reach it. On shutdown every running
call's abort event is set and the tasks are awaited: each turn ends ``aborted`` in the log.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from roleplay.errors import NotFoundError, RpError
from roleplay.redact import redact_urls
from roleplay.harness.store.base import EventStore
from roleplay.harness.names import TURN_START

log = logging.getLogger("roleplay.web")

StartCall = Callable[[asyncio.Event], Awaitable[Any]]


@dataclass(eq=False)
class ActiveRun:
    session_id: str
    turn_id: str
    kind: str
    task: "asyncio.Task[Any]"
    abort: asyncio.Event = field(default_factory=asyncio.Event)


class TurnRunner:
    def __init__(self, store: EventStore) -> None:
        self.store = store
        self.active: dict[str, ActiveRun] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self.closing = False

    async def start(self, session_id: str, kind: str, call: StartCall) -> ActiveRun:
        """Start ``call(abort)``; return once its turn has begun, or raise what it raised first."""
        abort = asyncio.Event()
        # The subscription reads the session's head first: an unknown session is 404 here, before
        # anything starts (and before a stopping server's 503, as the route's own check was).
        async with self.store.subscribe(session_id) as sub:
            if self.closing:
                raise RpError("server.shutting_down", "the server is shutting down; try again on another instance")
            task: asyncio.Task[Any] = asyncio.ensure_future(call(abort))
            self._tasks.add(task)
            task.add_done_callback(self._finished)
            turn_id = await _first_turn_id(sub, task)  # an error raised before is the request's answer
        run = ActiveRun(session_id, turn_id, kind, task, abort)
        task.add_done_callback(_log_failure)  # after the turn began, nobody else hears of it
        if not task.done():
            self.active[session_id] = run
            task.add_done_callback(lambda _t: self._forget(run))
        return run

    def _forget(self, run: ActiveRun) -> None:
        if self.active.get(run.session_id) is run:
            del self.active[run.session_id]

    def _finished(self, task: "asyncio.Task[Any]") -> None:
        self._tasks.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved, so asyncio never reports it as lost

    def abort(self, session_id: str, turn_id: str | None = None) -> ActiveRun:
        run = self.active.get(session_id)
        if run is None or (turn_id is not None and run.turn_id != turn_id):
            raise NotFoundError(
                "run.not_running",
                f"no turn of session {session_id} is running on this server" + (f" as {turn_id}" if turn_id else ""),
                details={"sessionId": session_id, **({"turnId": turn_id} if turn_id else {})},
            )
        run.abort.set()
        return run

    async def shutdown(self, timeout: float = 30.0) -> None:
        """Abort every running call and wait for them to log their end."""
        self.closing = True
        for run in list(self.active.values()):
            run.abort.set()
        pending = [t for t in self._tasks if not t.done()]
        if pending:
            done, still = await asyncio.wait(pending, timeout=timeout)
            for task in still:
                task.cancel()
            if still:
                await asyncio.wait(still, timeout=5)


def _log_failure(task: "asyncio.Task[Any]") -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("a background turn failed after it began: %s", redact_urls(str(task.exception())))


async def _first_turn_id(sub: Any, task: "asyncio.Task[Any]") -> str:
    """The id of the first ``turn/start`` the subscription sees, or the task's own outcome when it
    ends first (its error is re-raised; a call that finished that fast still names its turn)."""
    while True:
        getter = asyncio.ensure_future(sub.next())
        done, _ = await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
        if getter in done:
            note = getter.result()
            if note.kind == "event" and note.event.type == TURN_START:
                return str(note.event.payload["turnId"])
            continue
        getter.cancel()
        result = task.result()  # raises the call's error
        # Finished before we saw its turn/start (it was queued): drain what was published.
        while True:
            try:
                note = await sub.next(timeout=0.05)
            except asyncio.TimeoutError:
                break
            if note.kind == "event" and note.event.type == TURN_START:
                return str(note.event.payload["turnId"])
        turn = getattr(result, "turn", None)
        if turn is not None:
            return str(turn.turn_id)
        raise RpError("run.no_turn", "the call ended without starting a turn")


__all__ = ["ActiveRun", "TurnRunner"]
