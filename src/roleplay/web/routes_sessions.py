"""Sessions: create (the two-step setup), list and filter, show, archive, fork and branch, the log.

Creating a story is the spec's two steps: ``POST /sessions`` binds the live assets and runs the
materializers (profile, State bootstrap, opening) in one creating append; while no turn has been
played, ``PUT /sessions/{id}/opening`` may choose another opening (``rechoose_opening``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, Query
from fastapi.responses import JSONResponse

from roleplay.core.branch import branch, branch_tree
from roleplay.core.message_actions import message_by_number
from roleplay.core.profile import apply_profile, profile_of, session_projection
from roleplay.core.session_create import StoryRequest, create_story, rechoose_opening
from roleplay.core.sources import StoreAssetReader
from roleplay.errors import ConflictError, ValidationError
from roleplay.harness.models.routes import resolve_route
from roleplay.harness.store.base import SessionFilter, SessionRecord
from roleplay.samples import SAMPLE_CARD, sample_card_bytes

from .app import Web
from .routes_assets import etag, expected_revision, revision_pointer
from .models import BranchBody, ProfilePatch, ForkBody, OpeningChoice, SessionCreate, SessionCreated, SessionOut

router = APIRouter(tags=["sessions"])


def session_out(record: SessionRecord) -> SessionOut:
    return SessionOut.model_validate(record.to_dict())


@router.post("/sessions", status_code=201, response_model=SessionCreated)
async def create_session(w: Web, body: SessionCreate) -> SessionCreated:
    """Start a story: bind the card and the other live assets, and open it."""
    route = resolve_route(body.model) if body.model else None  # a bad route creates nothing
    card = body.card
    if body.sample and card is None:
        card = (await w.assets.import_file(sample_card_bytes(), SAMPLE_CARD)).asset_id  # once; a re-import finds it
    if card is None and not body.left_out("card"):
        raise ValidationError(
            "story.card_required", "choose a card (card: ID), the bundled sample (sample: true) or none (card: null)", pointer="/card"
        )
    request = StoryRequest(
        card=card,
        persona=False if body.left_out("persona") else body.persona,
        preset=False if body.left_out("preset") else body.preset,
        lorebooks=[] if body.left_out("lorebooks") else body.lorebooks,
        writing_styles=[] if body.left_out("writing_styles") else body.writing_styles,
        opening=body.opening, opening_index=body.opening_index, opening_text=body.opening_text,
        participation=body.participation, title=body.title, route=route,
    )  # fmt: skip
    record, m = await create_story(await w.fresh_runtime(), request)  # a new story: the saved features
    return SessionCreated(
        session_id=record.id,
        title=record.title,
        participation=body.participation,
        route=route.spec if route else None,
        opening=m.opening_message_text,
        diagnostics=m.diagnostics,
        session=session_out(record),
    )


@router.put("/sessions/{session_id}/opening")
async def choose_opening(w: Web, session_id: str, body: OpeningChoice) -> dict[str, Any]:
    """Choose another opening before the first turn (replaces the opening message and the State bootstrap)."""
    m = await rechoose_opening(await w.fresh_runtime(), session_id, body.opening, index=body.opening_index, text=body.opening_text)
    return {"sessionId": session_id, "opening": m.opening_message_text, "diagnostics": m.diagnostics}


@router.get("/sessions/{session_id}/profile")
async def get_profile(w: Web, session_id: str) -> JSONResponse:
    """The story's profile (bound assets, scene, runtime, context build); ``ETag`` is its revision."""
    await w.rt.store.get_session(session_id)
    state = (await w.rt.service.projection(session_id, session_projection)).state
    body = {"sessionId": session_id, "revision": state["revision"], "profile": profile_of(state).to_json_dict()}
    return JSONResponse(body, headers={"ETag": etag(state["revision"])})


@router.patch("/sessions/{session_id}/profile")
async def patch_profile(w: Web, session_id: str, body: ProfilePatch, if_match: Annotated[str | None, Header()] = None) -> JSONResponse:
    """Change the profile with a JSON merge patch (``rp-session-apply``), if it is still at the
    revision the client read (``If-Match`` or ``revision``: required). Refused while a turn runs."""
    revision = expected_revision(if_match, body.revision, required=True, prefix="profile")
    await w.rt.store.get_session(session_id)
    applied = await apply_profile(
        w.rt.service, session_id, {"patch": body.patch, "expectedRevision": revision}, StoreAssetReader(w.rt.assets)
    )
    if not applied.outcome.ok:
        error = applied.outcome.error or {}
        code = str(error.get("code", "profile.rejected"))
        kind = ConflictError if code.endswith("conflict") else ValidationError
        with revision_pointer():
            raise kind(
                code, str(error.get("message", "the change was refused")), pointer=error.get("pointer"), details=error.get("details") or {}
            )
    if not applied.applied:
        raise ConflictError("profile.revision_conflict", "another profile change took effect first; re-read and retry")
    state = applied.state
    out = {"sessionId": session_id, "revision": state["revision"], "profile": profile_of(state).to_json_dict()}
    return JSONResponse(out, headers={"ETag": etag(state["revision"])})


@router.get("/sessions", response_model=list[SessionOut])
async def list_sessions(
    w: Web,
    archived: Literal["false", "true", "all"] = "false",
    parent: str | None = None,
    children: Annotated[bool, Query(description="also Writer and sub-agent child sessions")] = False,
    q: Annotated[str | None, Query(description="only sessions whose title contains this text")] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
) -> list[SessionOut]:
    """Stories and chats, most recently updated first."""
    flag = {"false": False, "true": True, "all": None}[archived]
    if parent is not None:
        await w.rt.store.get_session(parent)
    # A title filter reads the whole listing first, so the limit counts matches, not rows read.
    rows = await w.rt.store.list_sessions(
        SessionFilter(archived=flag, parent_id=parent, roots_only=parent is None and not children, limit=10_000 if q else limit)
    )
    if q:
        needle = q.casefold()
        rows = [r for r in rows if needle in (r.title or "").casefold()][:limit]
    return [session_out(r) for r in rows]


@router.get("/sessions/{session_id}")
async def show_session(w: Web, session_id: str) -> dict[str, Any]:
    """The session's record, its children and (for a story) its profile."""
    record = await w.rt.store.get_session(session_id)
    children = await w.rt.store.list_sessions(SessionFilter(archived=None, parent_id=session_id, limit=10_000))
    out: dict[str, Any] = {**record.to_dict(), "children": [c.to_dict() for c in children]}
    if record.parent_id is None:
        loaded = await w.rt.service.projection(session_id, session_projection)
        out["profile"] = profile_of(loaded.state).to_json_dict() if loaded.state else None
    return out


@router.post("/sessions/{session_id}/archive", response_model=SessionOut)
async def archive(w: Web, session_id: str) -> SessionOut:
    """Hide the session from the default listing (never deleted)."""
    return session_out(await w.rt.store.set_archived(session_id, True))


@router.post("/sessions/{session_id}/unarchive", response_model=SessionOut)
async def unarchive(w: Web, session_id: str) -> SessionOut:
    return session_out(await w.rt.store.set_archived(session_id, False))


@router.post("/sessions/{session_id}/fork", status_code=201)
async def fork(w: Web, session_id: str, body: ForkBody) -> dict[str, Any]:
    """A new session with events 1..atSeq (snapped back to the end of the last closed turn)."""
    record, point = await w.rt.service.fork_between_turns(session_id, body.at_seq, title=body.title)
    return {**record.to_dict(), "forkPoint": point.to_dict()}


@router.post("/sessions/{session_id}/branch", status_code=201)
async def make_branch(w: Web, session_id: str, body: BranchBody) -> dict[str, Any]:
    """A new story from this one as it stood after a turn (default: the last); the source is untouched."""
    message_id = await message_by_number(w.rt, session_id, body.at) if body.at else None
    made = await branch(await w.fresh_runtime(), session_id, at_message=message_id, at_turn=body.at_turn, title=body.title)
    return {"branch": made.to_dict(), "tree": await branch_tree(w.rt, made.record.id)}


@router.get("/sessions/{session_id}/branches")
async def branches(w: Web, session_id: str) -> dict[str, Any]:
    """The story's branches as a tree from its root."""
    return await branch_tree(w.rt, session_id)


@router.get("/sessions/{session_id}/log")
async def log(
    w: Web,
    session_id: str,
    after: Annotated[int, Query(ge=0)] = 0,
    until: Annotated[int | None, Query(ge=0)] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
) -> list[dict[str, Any]]:
    """A page of the session's events (the durable log, as the stream sends it)."""
    await w.rt.store.get_session(session_id)
    return [e.to_dict() for e in await w.rt.store.read(session_id, after_seq=after, until_seq=until, limit=limit)]
