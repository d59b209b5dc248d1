"""Turns: send, continue, regenerate, abort, impersonate, and the SSE tail of the log.

``POST /sessions/{id}/turns`` answers 202 with the turn id as soon as the turn has begun; the reply
streams on ``GET /sessions/{id}/events``. A turn uses the route given with it, else the story's
remembered route, else the server's default (``rp serve --model``; the offline ``demo`` model when
no key is set). A second turn while one runs (here or in another server process sharing the
database) is 409 ``run.busy``.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query
from fastapi.responses import JSONResponse

from roleplay.core.continue_turn import continue_turn
from roleplay.core.impersonate import impersonate
from roleplay.core.regenerate import regenerate
from roleplay.core.run import RunResult, play_turn
from roleplay.core.runtime import RoleplayRuntime
from roleplay.core.session_route import resolve_session_route
from roleplay.harness.leases import lease_taken
from roleplay.harness.loop import abandon
from roleplay.harness.models.routes import Route, resolve_route

from .app import API, RunCall, Web, WebState, on_runtime
from .runs import ActiveRun
from .models import AbortBody, ContinueBody, RegenerateBody, TurnAccepted, TurnBody
from .sse import EventStream, stream_cursor

router = APIRouter(tags=["turns"])


async def session_route(w: WebState, session_id: str, spec: str | None) -> Route:
    """The route for a call that runs no turn (a draft, a preview): the request's, the story's own,
    or the server's default."""
    return await resolve_session_route(w.rt, session_id, spec, w.config.default_route)


def _given_route(w: WebState, spec: str | None) -> tuple[Route | None, Route | None]:
    """A run's route as the request gives it, and the server's default. Without one given, the
    run reads the story's own under its lease (``story_route``), not before it here: a route
    changed while the run waited would otherwise be played on the old one, and the turn makes
    that read of the log anyway."""
    return (resolve_route(spec) if spec else None), w.config.default_route


async def _accept(w: WebState, session_id: str, kind: str, call: RunCall) -> JSONResponse:
    return await _started(w, await w.fresh_runtime(), session_id, kind, call)  # a feature change applies from the next run


async def _started(w: WebState, rt: RoleplayRuntime, session_id: str, kind: str, call: RunCall) -> JSONResponse:
    # 404 before anything starts: the runner's subscription reads the session's head first.
    return _accepted(session_id, kind, await w.runs.start(session_id, kind, on_runtime(w, rt, call)))


def _accepted(session_id: str, kind: str, run: ActiveRun) -> JSONResponse:
    body = TurnAccepted(session_id=session_id, turn_id=run.turn_id, kind=kind, events=f"{API}/sessions/{session_id}/events")
    return JSONResponse(body.model_dump(by_alias=True), status_code=202, headers={"Location": body.events})


@router.post("/sessions/{session_id}/turns", status_code=202, response_model=TurnAccepted)
async def send_turn(w: Web, session_id: str, body: TurnBody) -> JSONResponse:
    """Play the player's text as the next turn; the reply streams on the session's events."""
    route, default = _given_route(w, body.model)
    # The global settings come with the features' revision, and the run freezes them (one read).
    # It is made while the run's start reads the session's head: two reads at once, not one
    # after the other, on the way to the turn's first token.
    pending = asyncio.ensure_future(w.fresh_runtime_and_settings())

    async def call(abort: asyncio.Event) -> RunResult:
        rt, settings = await pending
        async with w.runtime_in_use(rt):
            return await play_turn(rt, session_id, body.text, parent_route=route, default_route=default, settings=settings, abort=abort)

    try:
        run = await w.runs.start(session_id, "turn", call)
    except BaseException:
        # No run took the read (an unknown session, a stopping server): nobody waits for it.
        abandon(pending)
        raise
    return _accepted(session_id, "turn", run)


@router.post("/sessions/{session_id}/continue", status_code=202, response_model=TurnAccepted)
async def continue_reply(w: Web, session_id: str, body: ContinueBody | None = None) -> JSONResponse:
    """The Writer goes on with the last reply, as one more turn."""
    route, default = _given_route(w, body.model if body else None)
    return await _accept(
        w, session_id, "continue", lambda rt, abort: continue_turn(rt, session_id, parent_route=route, default_route=default, abort=abort)
    )


@router.post("/sessions/{session_id}/regenerate", status_code=202, response_model=TurnAccepted)
async def regenerate_reply(w: Web, session_id: str, body: RegenerateBody | None = None) -> JSONResponse:
    """Write the last reply again (the replaced one stays as an alternative); ``saveEdit`` edits your message first."""
    body = body or RegenerateBody.model_validate({})
    route, default = _given_route(w, body.model)
    return await _accept(
        w,
        session_id,
        "regenerate",
        lambda rt, abort: regenerate(rt, session_id, parent_route=route, default_route=default, save_edit=body.save_edit, abort=abort),
    )


@router.post("/sessions/{session_id}/abort")
async def abort_turn(w: Web, session_id: str, body: AbortBody | None = None) -> dict[str, Any]:
    """Abort the running turn (it ends ``aborted`` in the log). 404 ``run.not_running`` when none
    runs on this server."""
    await w.rt.store.get_session(session_id)
    run = w.runs.abort(session_id, body.turn_id if body else None)
    return {"sessionId": session_id, "turnId": run.turn_id, "aborting": True}


@router.get("/sessions/{session_id}/running")
async def running(w: Web, session_id: str) -> dict[str, Any]:
    """The turn this server is running for the session, if any; ``leased``: whether a run (or a
    message action) holds the story now in any process, this one or another sharing the store."""
    await w.rt.store.get_session(session_id)
    run = w.runs.active.get(session_id)
    leased = run is not None or await lease_taken(w.rt.store, session_id)
    return {"sessionId": session_id, "turnId": run.turn_id if run else None, "kind": run.kind if run else None, "leased": leased}


@router.post("/sessions/{session_id}/impersonate")
async def impersonate_draft(w: Web, session_id: str, body: ContinueBody | None = None) -> dict[str, Any]:
    """Draft the player's next message in their persona's voice; nothing is sent or stored in the story."""
    route = await session_route(w, session_id, body.model if body else None)
    async with w.runtime_in_use(await w.fresh_runtime()) as rt:
        drafted = await impersonate(rt, session_id, parent_route=route)
    return {"sessionId": session_id, **drafted.to_dict()}


@router.get(
    "/sessions/{session_id}/events",
    status_code=200,
    response_class=EventStream,
    responses={200: {"content": {"text/event-stream": {}}, "description": "id: seq / event: type / data: the event as JSON"}},
)
async def events(
    w: Web,
    session_id: str,
    after: Annotated[int | None, Query(ge=0, description="resume after this seq (Last-Event-ID wins); default: the current head")] = None,
    follow: Annotated[bool, Query(description="false: send the log up to the head, then end")] = True,
    last_event_id: Annotated[str | None, Header()] = None,
) -> EventStream:
    """Server-Sent Events: every durable event (``id: seq``, ``event: type``) and the transient
    ``assistant/chunk`` reply deltas (no id); ``: ping`` comments keep the connection open."""
    cursor = await stream_cursor(w.rt.store, session_id, last_event_id, after)
    return EventStream(
        w.rt.store,
        session_id,
        cursor,
        follow=follow,
        ping_seconds=w.config.ping_seconds,
        send_timeout=w.config.send_timeout,
        shutdown=w.shutdown,
    )
