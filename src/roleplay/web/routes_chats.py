"""Conversations: plain chats with a model (``rp chat``'s sessions), outside any story.

A chat is a ``chat`` session; each message is a turn on the harness loop, answered 202 like a
story turn and streamed on ``GET /sessions/{id}/events``. The route is the request's, else the
server's default; model clients are the runtime's, shared across requests.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from roleplay.errors import ValidationError
from roleplay.harness.plain_chat import CHAT_PRESET, chat_spec
from roleplay.harness.loop import AgentLoop
from roleplay.harness.models.routes import resolve_route, route_context_window

from .app import API, Web, on_runtime
from .models import Body, TurnAccepted, TurnBody

router = APIRouter(tags=["chats"])


class ChatCreate(Body):
    model: str | None = None
    title: str | None = None


@router.post("/chats", status_code=201)
async def create_chat(w: Web, body: ChatCreate | None = None) -> dict[str, Any]:
    """Start a chat (no story, no roleplay features): its messages are turns with the model."""
    body = body or ChatCreate.model_validate({})
    route = resolve_route(body.model) if body.model else w.config.default_route
    record = await w.rt.service.create(CHAT_PRESET, title=body.title or f"chat with {route.spec}")
    return {"sessionId": record.id, "route": route.spec, "session": record.to_dict()}


@router.post("/chats/{session_id}/messages", status_code=202, response_model=TurnAccepted)
async def send_message(w: Web, session_id: str, body: TurnBody) -> JSONResponse:
    """Send a message; the reply streams on the session's events."""
    record = await w.rt.store.get_session(session_id)
    if record.preset != CHAT_PRESET:
        raise ValidationError("chat.not_a_chat", f"session {session_id} is a {record.preset} session; story turns go to …/turns")
    if not body.text.strip():
        raise ValidationError("chat.empty_message", "the message is empty", pointer="/text")
    route = resolve_route(body.model) if body.model else w.config.default_route
    rt = w.rt  # a chat has no features; its model client is this runtime's, held until the reply ends
    loop = AgentLoop(rt.service, rt.model_for(route), chat_spec(route_context_window(route)))
    run = await w.runs.start(session_id, "chat", on_runtime(w, rt, lambda _rt, abort: loop.run_turn(session_id, body.text, abort=abort)))
    out = TurnAccepted(session_id=session_id, turn_id=run.turn_id, kind="chat", events=f"{API}/sessions/{session_id}/events")
    return JSONResponse(out.model_dump(by_alias=True), status_code=202, headers={"Location": out.events})
