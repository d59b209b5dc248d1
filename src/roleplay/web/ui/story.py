"""A story's own panels: the Session Wiki (its bound assets and its state) and the prompt workbench.

Both read the library directly and change the story only through the JSON API
(``PATCH /api/v1/sessions/{id}/profile``, one kind or the slot list at a time, revision-checked).

The workbench shows the session's effective slot layout, the one list Chat and Agent mode share,
and a preview of the exact Writer prompt the next turn would build (``prepare_run``, which writes
nothing). Only the Writer's prompt is shown: the commit-only material (state revision, update
protocol, schema, rules, diagnostics) goes to the parent agent's commit context, never here.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from roleplay.assets.kinds import CARD, LOREBOOK, PERSONA, PRESET, WRITING_STYLE
from roleplay.core.context_build import effective_layout
from roleplay.core.profile import session_projection
from roleplay.core.run import prepare_run
from roleplay.core.types import Slot
from roleplay.errors import RpError

from ..app import Web, WebState
from ..routes_turns import session_route
from . import page
from .library import FIELDS
from .pages import chat_context, story_profile
from .render import render_markdown

router = APIRouter(include_in_schema=False)

WIKI_VIEWS = [("card", "Card"), ("lorebooks", "Lorebooks"), ("persona", "My persona"), ("preset", "Preset"), ("styles", "Styles"),
              ("state", "State")]  # fmt: skip


async def _bound(w: WebState, kind: str, asset_id: str) -> dict[str, Any]:
    """One binding as the wiki shows it: the asset read-only, or why it is missing."""
    try:
        record = await w.assets.store.get(asset_id)
    except RpError as exc:
        return {"id": asset_id, "missing": True, "reason": exc.message}
    if record.kind != kind:
        return {"id": asset_id, "missing": True, "reason": f"{asset_id} is a {record.kind}, not a {kind}"}
    data: dict[str, Any] = record.data if isinstance(record.data, dict) else {}
    fields = [{"label": label, "html": render_markdown(str(data[key]))} for label, key in FIELDS.get(kind, []) if data.get(key)]
    if kind == PRESET:
        fields += [
            {"label": f.get("title") or f.get("id"), "html": render_markdown(str(f.get("content") or ""))} for f in data.get("fields") or []
        ]
    if kind == LOREBOOK:
        fields += [
            {"label": e.get("comment") or e.get("name") or f"#{e.get('id')}", "html": render_markdown(str(e.get("content") or ""))}
            for e in (data.get("book") or {}).get("entries") or []
        ]
    return {"id": asset_id, "missing": False, "name": record.name, "fields": fields}


@router.get("/s/{session_id}/wiki", response_class=HTMLResponse)
async def wiki(request: Request, w: Web, session_id: str) -> HTMLResponse:
    """The Session Wiki's six views (a fragment the chat page shows in its modal)."""
    await w.rt.store.get_session(session_id)
    loaded = await w.rt.service.projection(session_id, session_projection)
    profile = await story_profile(w, session_id)
    res = profile.resources if profile is not None else None
    views: dict[str, dict[str, Any]] = {}
    for view, kind, ids in (
        ("card", CARD, [res.card] if res and res.card else []),
        ("lorebooks", LOREBOOK, list(res.lorebooks) if res else []),
        ("persona", PERSONA, [res.persona] if res and res.persona else []),
        ("preset", PRESET, [res.preset] if res and res.preset else []),
        ("styles", WRITING_STYLE, list(res.writing_styles) if res else []),
    ):
        bound = [await _bound(w, kind, i) for i in ids]
        choices = [{"id": r.id, "name": r.name} for r in (await w.assets.store.list(kind, limit=500)).items]
        views[view] = {"kind": kind, "bound": bound, "broken": any(b["missing"] for b in bound) or not bound, "choices": choices,
                       "many": view in ("lorebooks", "styles")}  # fmt: skip
    context = await chat_context(w, session_id, 1)
    return page(
        request,
        "wiki.html",
        {"session_id": session_id, "views": views, "names": WIKI_VIEWS, "revision": loaded.state["revision"],
         "state": context["state"], "changes": context["changes"], "stateOff": context["stateOff"]},
    )  # fmt: skip


# -- the prompt workbench --------------------------------------------------------------------------


async def _workbench(w: WebState, session_id: str) -> dict[str, Any]:
    route = await session_route(w, session_id, None)
    p = await prepare_run(w.rt, session_id, "(next input)", parent_route=route)
    build = p.profile.context_build
    saved = None if build is None else [Slot(s.id, s.name, tuple(s.sources), s.section_tag, s.idle) for s in build.slots]
    slots = effective_layout(saved, p.sources.sources, p.sources.preset_positions)
    loaded = await w.rt.service.projection(session_id, session_projection)
    return {
        "slots": [{"id": s.id, "name": s.name, "sources": list(s.sources), "sectionTag": s.section_tag, "idle": s.idle} for s in slots],
        "saved": build is not None,
        "revision": loaded.state["revision"],
        "writerSystem": p.writer_system,
        "writerPrompt": p.build.writer_prompt,
        "sections": [s.slot_id for s in p.build.sections],
        "mode": p.profile.execution_mode,
        "custom": [{"id": c.id, "title": c.title, "text": c.text} for c in p.profile.custom_prompts],
    }


@router.get("/s/{session_id}/workbench", response_class=HTMLResponse)
async def workbench(request: Request, w: Web, session_id: str) -> HTMLResponse:
    record = await w.rt.store.get_session(session_id)
    return page(request, "workbench.html", {"nav": "stories", "session": record, **await _workbench(w, session_id)})


@router.get("/s/{session_id}/workbench/preview", response_class=HTMLResponse)
async def workbench_preview(request: Request, w: Web, session_id: str) -> HTMLResponse:
    await w.rt.store.get_session(session_id)
    return page(request, "workbench_preview.html", await _workbench(w, session_id))


__all__ = ["router"]
