"""Inspection tools: the lorebook activation test, MVU inspect, sub-agent sessions.

These read stored assets and write nothing, like their CLI twins (``rp lorebook test``,
``rp mvu inspect``). MVU inspect reads a stored card as exported (its linked lorebooks embedded) or
an uploaded file.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, File, Form, UploadFile

from roleplay.assets.cards import import_card_bytes
from roleplay.assets.lorebook.activation import LoreEngine, ScanSettings, TurnInput
from roleplay.assets.lorebook.importer import import_lorebook
from roleplay.compat.mvu.adapter import inspect_card
from roleplay.errors import ValidationError
from roleplay.harness.store.base import SessionFilter

from .app import Web
from .models import Body
from .routes_assets import _upload

router = APIRouter(tags=["tools"])


class LoreTest(Body):
    texts: list[str]
    run_id: str = "lorebook-test"
    scan_depth: int | None = None
    all: bool = False


@router.post("/lorebooks/{lorebook_id}/test")
async def lorebook_test(w: Web, lorebook_id: str, body: LoreTest) -> dict[str, Any]:
    """Which entries activate for these texts (the latest message last), and why. Probability rolls
    are seeded by ``runId``: the same id gives the same result."""
    record = await w.assets.store.get(lorebook_id, kind="lorebook")
    book = import_lorebook(record.data["book"], book_id=record.id, name=record.data.get("name"))
    settings = ScanSettings(scan_depth=body.scan_depth) if body.scan_depth is not None else None
    result = LoreEngine([book], settings).activate(TurnInput(run_id=body.run_id, messages=list(body.texts)))
    titles = {e.id: e.comment or ", ".join(e.keys[:3]) for e in book.entries}
    activated = [
        {"entryId": a.entry_id, "title": titles.get(a.entry_id, ""), "slot": str(getattr(a.slot, "value", a.slot)),
         "reason": a.reason, "sweep": a.sweep, "details": dict(a.details)}
        for a in result.activated
    ]  # fmt: skip
    decisions = [d.to_dict() | {"title": titles.get(d.entry_id, "")} for d in result.report()]
    return {
        "lorebookId": record.id,
        "activated": activated,
        "decisions": decisions if body.all else [d for d in decisions if d["activated"]],
        "diagnostics": [p.to_dict() for p in result.diagnostics],
        "sweeps": result.sweeps,
    }


@router.get("/cards/{card_id}/mvu")
async def mvu_inspect_stored(w: Web, card_id: str, user: str = "User") -> dict[str, Any]:
    """What the MVU adapter makes of a stored card: variables, schema, update rules, diagnostics."""
    png = await w.assets.export_card(card_id)
    return {"ok": True, "card": card_id, **inspect_card(import_card_bytes(png, "card.png"), [], user=user).to_dict()}


@router.post("/mvu/inspect")
async def mvu_inspect_upload(w: Web, file: Annotated[UploadFile, File()], user: Annotated[str, Form()] = "User") -> dict[str, Any]:
    """MVU inspect for a card file that is not imported (nothing is stored)."""
    data, name = await _upload(file, w)
    if not data:
        raise ValidationError("asset.import.empty", "the file is empty")
    return {"ok": True, "card": name, **inspect_card(import_card_bytes(data, name or "card"), [], user=user).to_dict()}


@router.get("/sessions/{session_id}/subagents")
async def subagents(w: Web, session_id: str) -> list[dict[str, Any]]:
    """The sub-agent runs of a session (the Writer of each turn, summaries, reply options): child sessions."""
    await w.rt.store.get_session(session_id)
    rows = await w.rt.store.list_sessions(SessionFilter(archived=None, parent_id=session_id, limit=10_000))
    return [r.to_dict() for r in rows]
