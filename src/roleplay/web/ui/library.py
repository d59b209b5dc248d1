"""Library pages: the five asset kinds, each a list and a full-width detail page.

Import (file picker or drag and drop), export, default and delete are done by ``library.js``
through the JSON API (``/api/v1/assets…``); these routes only paint. Card fields are shown as
text (Jinja2 escapes) and long prose through the markdown sanitiser, never as raw HTML.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse

from roleplay.assets.kinds import CARD, DEFAULT_KINDS, KINDS, LOREBOOK, PERSONA, PRESET, WRITING_STYLE
from roleplay.errors import ValidationError

from ..app import Web
from . import page
from .render import render_markdown

router = APIRouter(include_in_schema=False)

LABELS = {CARD: "Characters", LOREBOOK: "Lorebooks", PERSONA: "Personas", PRESET: "Presets", WRITING_STYLE: "Styles"}
# The fields shown on a detail page, per kind (label, data key); prose goes through markdown.
FIELDS: dict[str, list[tuple[str, str]]] = {
    CARD: [
        ("Description", "description"), ("Personality", "personality"), ("Scenario", "scenario"),
        ("First message", "first_mes"), ("Example messages", "mes_example"), ("Creator notes", "creator_notes"),
        ("Creator", "creator"), ("Version", "character_version"),
    ],
    PERSONA: [("Description", "description")],
    WRITING_STYLE: [("Usage note", "applicability"), ("Requirements", "requirements")],
    PRESET: [("Description", "description")],
    LOREBOOK: [],
}  # fmt: skip


def _kind(kind: str) -> str:
    if kind not in KINDS:
        raise ValidationError("asset.unknown_kind", f"kind must be one of {', '.join(KINDS)} (got {kind!r})", pointer="/kind")
    return kind


@router.get("/library", response_class=HTMLResponse)
async def library_home(request: Request, w: Web) -> HTMLResponse:
    return await library_kind(request, w, CARD)


@router.get("/library/{kind}", response_class=HTMLResponse)
async def library_kind(request: Request, w: Web, kind: str) -> HTMLResponse:
    store = w.assets.store
    default = await store.get_default(kind) if _kind(kind) in DEFAULT_KINDS else None
    rows = list((await store.list(kind, limit=500)).items)
    items = []
    for r in rows:
        blobs = await store.list_blobs(r.id) if kind in (CARD, PERSONA) else []
        items.append({"id": r.id, "name": r.name, "updatedAt": r.updated_at, "default": default is not None and default.id == r.id,
                      "avatar": any(b.role == "avatar" for b in blobs)})  # fmt: skip
    return page(request, "library.html", {"nav": "library", "kind": kind, "labels": LABELS, "items": items})


@router.get("/library/asset/{asset_id}", response_class=HTMLResponse)
async def asset_page(request: Request, w: Web, asset_id: str) -> HTMLResponse:
    store = w.assets.store
    record = await store.get(asset_id)
    data: dict[str, Any] = record.data if isinstance(record.data, dict) else {}
    fields = [{"label": label, "html": render_markdown(str(data[key]))} for label, key in FIELDS.get(record.kind, []) if data.get(key)]
    greetings = [render_markdown(str(g)) for g in data.get("alternate_greetings") or [] if str(g).strip()]
    entries: list[dict[str, Any]] = []
    if record.kind == LOREBOOK:
        book = data.get("book") or {}
        entries = [
            {"name": e.get("name") or e.get("comment") or f"#{e.get('id')}", "keys": ", ".join(map(str, e.get("keys") or [])),
             "enabled": e.get("enabled", True), "constant": e.get("constant", False), "html": render_markdown(str(e.get("content") or ""))}
            for e in book.get("entries") or []
        ]  # fmt: skip
    preset_fields = []
    if record.kind == PRESET:
        preset_fields = [
            {"title": f.get("title") or f.get("id"), "html": render_markdown(str(f.get("content") or ""))} for f in data.get("fields") or []
        ]
    default = await store.get_default(record.kind) if record.kind in DEFAULT_KINDS else None
    blobs = await store.list_blobs(asset_id)
    linked = [b for b in await w.assets.linked_lorebooks(asset_id)] if record.kind == CARD else []
    return page(
        request,
        "asset.html",
        {
            "nav": "library",
            "kind": record.kind,
            "labels": LABELS,
            "asset": record,
            "fields": fields,
            "greetings": greetings,
            "entries": entries,
            "presetFields": preset_fields,
            "isDefault": default is not None and default.id == asset_id,
            "canDefault": record.kind in DEFAULT_KINDS,
            "avatar": any(b.role == "avatar" for b in blobs),
            "linked": linked,
        },
    )


__all__ = ["router", "LABELS"]


# -- editors ---------------------------------------------------------------------------------------

# The text fields each editor shows (label, data key, multi-line); everything else in the stored
# data (extensions, sources, unknown keys) is carried through a save untouched.
EDIT_FIELDS: dict[str, list[tuple[str, str, bool]]] = {
    CARD: [
        ("Name", "name", False), ("Nickname", "nickname", False), ("Description", "description", True),
        ("Personality", "personality", True), ("Scenario", "scenario", True), ("First message", "first_mes", True),
        ("Example messages", "mes_example", True), ("Creator notes", "creator_notes", True), ("Creator", "creator", False),
        ("Version", "character_version", False),
    ],
    PERSONA: [("Name", "name", False), ("Description", "description", True)],
    WRITING_STYLE: [("Name", "name", False), ("Usage note", "applicability", True), ("Requirements", "requirements", True)],
    PRESET: [("Name", "name", False), ("Description", "description", True)],
    LOREBOOK: [("Name", "name", False)],
}  # fmt: skip
SAMPLERS = [("Temperature", "temperature", "0.01"), ("Top P", "topP", "0.01"), ("Frequency penalty", "frequencyPenalty", "0.01"),
            ("Presence penalty", "presencePenalty", "0.01"), ("Max tokens", "maxTokens", "1"), ("Context size", "contextSize", "1")]  # fmt: skip


@router.get("/library/asset/{asset_id}/edit", response_class=HTMLResponse)
async def editor_page(request: Request, w: Web, asset_id: str) -> HTMLResponse:
    return await _editor(request, w, asset_id, None, None)


@router.post("/library/asset/{asset_id}/edit", response_class=HTMLResponse)
async def editor_with_draft(
    request: Request, w: Web, asset_id: str, draft: Annotated[str, Form()], base: Annotated[int, Form()]
) -> HTMLResponse:
    """The editor filled from the browser's unsaved local draft (nothing is saved here). Its save
    still names the revision the draft was based on, so a change made since is never overwritten."""
    try:
        data = json.loads(draft)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise ValidationError("editor.bad_draft", "the draft is not a JSON object", pointer="/draft")
    return await _editor(request, w, asset_id, data, base)


async def _editor(request: Request, w: Web, asset_id: str, draft: dict[str, Any] | None, base: int | None) -> HTMLResponse:
    record = await w.assets.store.get(asset_id)
    data: dict[str, Any] = draft if draft is not None else record.data if isinstance(record.data, dict) else {}
    fields = [
        {"label": label, "key": key, "multiline": multi, "value": data.get(key) or ""} for label, key, multi in EDIT_FIELDS[record.kind]
    ]
    book = data.get("book") if record.kind == LOREBOOK else None
    return page(
        request,
        "editor.html",
        {
            "nav": "library",
            "kind": record.kind,
            "labels": LABELS,
            "asset": record,
            "data": data,
            "fields": fields,
            "samplers": [
                {"label": label, "key": key, "step": step, "value": (data.get("sampling") or {}).get(key)} for label, key, step in SAMPLERS
            ],
            "entries": (book or {}).get("entries") or [],
            "hasAvatar": record.kind in (CARD, PERSONA),
            "revision": base if base is not None else record.revision,
            "restored": draft is not None,
            "stale": base is not None and base != record.revision,
        },
    )
