"""Pages of the stories: the start page (sessions), the two-step setup and the live chat.

The chat page paints the story from the log (messages rendered and sanitised here) and hands the
browser the log's head seq; ``chat.js`` follows the SSE tail from exactly that seq, so a reload or
a dropped connection resumes with no gap. After every turn and message action the script fetches
``/s/{id}/fragment``, the same server-rendered message list, instead of rendering markdown itself.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from roleplay.assets.kinds import CARD, DEFAULT_KINDS, LOREBOOK, PERSONA, PRESET, WRITING_STYLE
from roleplay.core.message_actions import visible_messages
from roleplay.core.profile import profile_of, session_projection
from roleplay.core.turn_surface import live_turns
from roleplay.errors import RpError
from roleplay.harness.store.base import SessionFilter
from roleplay.names import (
    DIALOGUE_HIGHLIGHT_FEATURE,
    MESSAGE_ACTIONS_FEATURE,
    MESSAGE_AVATAR_FEATURE,
    QUICK_REPLIES_FEATURE,
    STATE_PROJECTION,
)

from ..app import Web, WebState
from . import page
from .display_scripts import display_scripts
from .render import render_markdown

router = APIRouter(include_in_schema=False)

WINDOW = 200  # messages painted at first; older ones on demand (?show=), so a long story opens fast


async def has_avatar(w: WebState, asset_id: str | None) -> bool:
    if not asset_id:
        return False
    try:
        return any(b.role == "avatar" for b in await w.assets.store.list_blobs(asset_id))
    except RpError:
        return False


async def asset_name(w: WebState, asset_id: str | None) -> str | None:
    if not asset_id:
        return None
    try:
        return (await w.assets.store.get(asset_id)).name
    except RpError:
        return None


async def story_profile(w: WebState, session_id: str) -> Any:
    try:
        loaded = await w.rt.service.projection(session_id, session_projection)
    except RpError:
        return None
    return profile_of(loaded.state) if loaded.state else None


# -- start page ------------------------------------------------------------------------------------


@router.get("/", response_class=HTMLResponse)
async def sessions_page(request: Request, w: Web, archived: bool = False, q: str = "") -> HTMLResponse:
    rows = await w.rt.store.list_sessions(SessionFilter(archived=archived, roots_only=True, limit=200))
    if q.strip():
        needle = q.strip().casefold()
        rows = [r for r in rows if needle in (r.title or "").casefold()]
    stories = []
    for r in rows:
        profile = await story_profile(w, r.id)
        card = profile.resources.card if profile is not None else None
        stories.append(
            {
                "id": r.id,
                "title": r.title or r.id,
                "updatedAt": r.updated_at,
                "card": card,
                "cardName": await asset_name(w, card),
                "avatar": await has_avatar(w, card),
                "kind": r.preset,
            }
        )
    return page(request, "sessions.html", {"stories": stories, "archived": archived, "q": q, "nav": "stories"})


# -- two-step setup --------------------------------------------------------------------------------


async def _assets(w: WebState, kind: str) -> list[Any]:
    return list((await w.assets.store.list(kind, limit=500)).items)


@router.get("/new", response_class=HTMLResponse)
async def setup_step1(request: Request, w: Web, card: str | None = None) -> HTMLResponse:
    defaults = {k: (await w.assets.store.get_default(k)) for k in DEFAULT_KINDS}
    cards = await _assets(w, CARD)
    chosen = card or (cards[0].id if cards else None)
    lorebooks = await _assets(w, LOREBOOK)
    linked = {b.id for b in await w.assets.linked_lorebooks(chosen)} if chosen else set()
    return page(
        request,
        "setup.html",
        {
            "nav": "new",
            "cards": cards,
            "chosen": chosen,
            "lorebooks": lorebooks,
            "linked": linked,
            "personas": await _assets(w, PERSONA),
            "presets": await _assets(w, PRESET),
            "styles": await _assets(w, WRITING_STYLE),
            "defaults": {k: (r.id if r else None) for k, r in defaults.items()},
        },
    )


LEAVE_OUT = "none"  # the setup form's "None" choice (asset ids are prefixed, so never this)


def _macros(text: str, char: str, user: str) -> str:
    # A preview only: the story's opening is expanded by the runtime's own macros when it starts.
    return text.replace("{{char}}", char).replace("{{user}}", user)


@router.get("/new/opening", response_class=HTMLResponse)
async def setup_step2(
    request: Request,
    w: Web,
    lorebook: Annotated[list[str], Query(default_factory=list)],
    style: Annotated[list[str], Query(default_factory=list)],
    card: str = LEAVE_OUT,
    persona: str | None = None,
    preset: str | None = None,
    no_lorebooks: bool = False,
    no_styles: bool = False,
) -> HTMLResponse:
    record = None if card == LEAVE_OUT else await w.assets.store.get(card)
    greetings_html = []
    if record is not None:
        persona_name = (await asset_name(w, persona)) if persona != LEAVE_OUT else None
        greetings = [record.data.get("first_mes") or ""] + list(record.data.get("alternate_greetings") or [])
        greetings_html = [
            {"index": i, "html": render_markdown(_macros(g, record.name, persona_name or "User"))}
            for i, g in enumerate(greetings)
            if g.strip()
        ]
    # The API's three answers per kind: an id, null (left out explicitly) or absent (the default).
    choice: dict[str, Any] = {"card": None if record is None else card}
    for key, value in (("persona", persona), ("preset", preset)):
        if value == LEAVE_OUT:
            choice[key] = None
        elif value:
            choice[key] = value
    choice["lorebooks"] = [] if no_lorebooks else lorebook
    choice["writingStyles"] = [] if no_styles else style
    return page(
        request,
        "opening.html",
        {
            "nav": "new",
            "card": record,
            "greetings": greetings_html,
            "choice": choice,
            "avatar": record is not None and await has_avatar(w, card),
        },
    )


# -- chat ------------------------------------------------------------------------------------------


async def _state(w: WebState, session_id: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]], bool]:
    """The current value of each namespace, this turn's changes (namespace, path, before, after,
    reason), and whether rp-state is off (the saved state is then folded from the log to be shown
    read-only; nothing can change it)."""
    from roleplay.state.events import activity_document, state_document, state_projection

    off = False
    try:
        tracker = (await w.rt.service.projection(session_id, STATE_PROJECTION)).state
    except RpError:
        off = True
        try:
            tracker = (await w.rt.service.projection(session_id, state_projection)).state
        except RpError:
            return None, [], True
    doc = state_document(tracker)
    values = {name: ns["value"] for name, ns in doc.get("namespaces", {}).items()}
    changes = [
        {"namespace": name, **change} for name, listed in (activity_document(tracker).get("namespaces") or {}).items() for change in listed
    ]
    return values, changes, off


async def _reply_options(w: WebState, session_id: str, message_id: str | None) -> list[str]:
    if message_id is None:
        return []
    from roleplay.reply_options.projection import PROJECTION, options_for_message

    try:
        state = (await w.rt.service.projection(session_id, PROJECTION)).state
    except RpError:
        return []  # reply options are off on this server
    return [str(o) for o in options_for_message(state, message_id)]


async def _card_data(w: WebState, card: str | None) -> Any:
    if not card:
        return None
    try:
        return (await w.assets.store.get(card)).data
    except RpError:
        return None


async def chat_context(w: WebState, session_id: str, show: int) -> dict[str, Any]:
    record = await w.rt.store.get_session(session_id)
    head = await w.rt.store.head(session_id)  # read before the messages: the tail resumes after it
    profile = await story_profile(w, session_id)
    listed = await visible_messages(w.rt, session_id)
    res = profile.resources if profile is not None else None
    card, persona = (res.card, res.persona) if res is not None else (None, None)
    names = {"assistant": await asset_name(w, card) or "Narrator", "user": await asset_name(w, persona) or "You"}
    features = set(w.rt.features)
    show_avatars = MESSAGE_AVATAR_FEATURE in features  # each display feature can be turned off
    avatars = {
        "assistant": card if show_avatars and await has_avatar(w, card) else None,
        "user": persona if show_avatars and await has_avatar(w, persona) else None,
    }
    last_reply = next((m for m in reversed(listed) if m.get("role", "assistant") == "assistant"), None)
    last = listed[-1] if listed else None
    scripts = display_scripts(await _card_data(w, card))
    last_user = listed[-2] if len(listed) >= 2 and listed[-2].get("role") == "user" and last is last_reply else None
    messages = []
    shown = listed[-show:] if show else listed
    for depth, m in zip(range(len(shown) - 1, -1, -1), shown):
        role = m.get("role") or ("user" if m.get("speaker") == "user" else "assistant")
        text = m.get("text") or ""
        displayed = scripts.apply(text, role, depth) if scripts.scripts else text
        messages.append(
            {
                **m,
                "role": role,
                "name": names[role],
                "avatar": avatars[role],
                "html": render_markdown(displayed, html=displayed != text),
                "isLast": m is last,
                "isLastUser": m is last_user,
                "isLastReply": m is last_reply and m is last and role == "assistant" and m.get("turnId") is not None and len(listed) > 1,
            }
        )
    # A run here is in runs.active; one in another process (another server, `rp say`) only holds
    # the story's lease: the page shows it as writing and asks until it lets go.
    run = w.runs.active.get(session_id)
    live = await live_turns(w.rt, session_id) if run is None else None
    elsewhere = bool(live and live["running"])
    active_turn = run.turn_id if run else (live["activeTurnId"] if live else None)
    state, changes, state_off = await _state(w, session_id)
    return {
        "session": record,
        "head": head,
        "messages": messages,
        "hidden": max(0, len(listed) - len(messages)),
        "total": len(listed),
        "replyOptions": await _reply_options(w, session_id, last["messageId"] if last and last.get("role") == "assistant" else None),
        "state": state,
        "changes": changes,
        "stateOff": state_off,
        "running": active_turn or ("running" if elsewhere else None),
        "runningElsewhere": elsewhere,
        "activeTurn": active_turn,
        "mode": profile.execution_mode if profile is not None else "chat",
        "writerRoute": _writer_route_text(profile),
        "cardName": names["assistant"],
        "show": show,
        "scriptNotes": scripts.skipped,
        "avatarsOn": show_avatars,
        "actionsOn": MESSAGE_ACTIONS_FEATURE in features,
        "dialogueOn": DIALOGUE_HIGHLIGHT_FEATURE in features,
    }


def _writer_route_text(profile: Any) -> str:
    route = profile.runtime.writer_route if profile is not None else None
    if route is None:
        return "the global default"
    if route.follow_conversation:
        return "follows the conversation's route"
    return "/".join(p for p in (route.provider, route.model, route.reasoning_effort) if p)


@router.get("/s/{session_id}", response_class=HTMLResponse)
async def chat_page(request: Request, w: Web, session_id: str, show: Annotated[int, Query(ge=0)] = WINDOW) -> HTMLResponse:
    from roleplay.quick_replies import QuickReplies

    await w.fresh_runtime()  # (re)opening a story: a feature change since applies from here
    items: list[dict[str, str]] = []
    cursor = "end"
    if QUICK_REPLIES_FEATURE in w.rt.features:
        quick = await QuickReplies(w.rt.store).list()
        items, cursor = quick.items, quick.cursor
    context = {"nav": "stories", "quickReplies": items, "quickCursor": cursor, **await chat_context(w, session_id, show)}
    return page(request, "chat.html", context)


@router.get("/s/{session_id}/fragment", response_class=HTMLResponse)
async def chat_fragment(request: Request, w: Web, session_id: str, show: Annotated[int, Query(ge=0)] = WINDOW) -> HTMLResponse:
    """The message list, reply options and state panel, as the chat page paints them."""
    return page(request, "chat_update.html", await chat_context(w, session_id, show))


__all__ = ["router", "chat_context"]
