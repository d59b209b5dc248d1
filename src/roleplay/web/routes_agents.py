"""Agent mode over HTTP: a story's execution mode and Writer route, and the sub-agent catalog.

The catalog is one list shared by every story (the ``subagents.catalog`` setting, created with the
built-in specialists in the user's language on first read); a change applies from the next turn.
Writes name the revision they were based on (``revision`` or ``If-Match``): 409 when stale. The
catalog belongs to ``rp-subagent-manager``: while that feature is off its routes are 404.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

from fastapi import APIRouter, Header
from pydantic import Field
from pydantic import ValidationError as PydanticValidationError

from roleplay.core.execution_mode import set_mode, set_writer_route
from roleplay.core.settings import SettingsStore, read_settings
from roleplay.core.subagent_catalog import (
    SUBAGENT_MANAGER,
    Catalog,
    SubagentItem,
    add_item,
    delete_item,
    edit_item,
    load_catalog,
    save_catalog,
)
from roleplay.errors import ConflictError, NotFoundError, Problem, ValidationError, pointer_from_parts

from .app import Web, WebState
from .models import Body
from .routes_assets import expected_revision, revision_pointer

router = APIRouter(tags=["agents"])


class ModeBody(Body):
    mode: str = Field(description="chat or agent")
    revision: int | None = Field(None, description="the profile revision read")


class WriterRouteBody(Body):
    route: str = Field(description="provider/model[/effort], follow (the conversation's) or default (the global one)")
    revision: int | None = None


class SubagentBody(Body):
    name: str
    usage_contract: str
    instructions: str
    enabled: bool = True
    tools: list[str] = Field(default_factory=list)
    route: str | None = None
    revision: int | None = Field(None, description="the catalog revision read")


class SubagentEdit(Body):
    name: str | None = None
    usage_contract: str | None = None
    instructions: str | None = None
    enabled: bool | None = None
    tools: list[str] | None = None
    route: str | None = None
    revision: int | None = None


@router.put("/sessions/{session_id}/mode")
async def mode(w: Web, session_id: str, body: ModeBody, if_match: Annotated[str | None, Header()] = None) -> dict[str, Any]:
    """Switch the story between Chat and Agent mode (refused with run.busy while a turn runs)."""
    revision = expected_revision(if_match, body.revision, required=False, prefix="profile")
    await w.rt.store.get_session(session_id)
    with revision_pointer():
        return {"sessionId": session_id, **await set_mode(w.rt, session_id, body.mode, revision)}


@router.put("/sessions/{session_id}/writer-route")
async def writer_route(w: Web, session_id: str, body: WriterRouteBody, if_match: Annotated[str | None, Header()] = None) -> dict[str, Any]:
    """The story's own Writer route, ``follow`` or ``default``."""
    revision = expected_revision(if_match, body.revision, required=False, prefix="profile")
    await w.rt.store.get_session(session_id)
    with revision_pointer():
        return {"sessionId": session_id, **await set_writer_route(w.rt, session_id, body.route, revision)}


async def _catalog(w: WebState) -> tuple[SettingsStore, Catalog]:
    if SUBAGENT_MANAGER not in w.rt.features:
        raise NotFoundError("feature.off", f"{SUBAGENT_MANAGER} is turned off on this server", details={"feature": SUBAGENT_MANAGER})
    settings = SettingsStore(w.rt.store)
    return settings, await load_catalog(settings, (await read_settings(w.rt.store)).language())


@contextmanager
def invalid_item() -> Iterator[None]:
    """A catalog item the model refuses is the client's 422, with a pointer per problem."""
    try:
        yield
    except PydanticValidationError as exc:
        problems = [
            Problem("subagents.invalid", str(e.get("msg", "invalid")), pointer_from_parts(list(e.get("loc", ())))) for e in exc.errors()
        ]
        raise ValidationError("subagents.invalid", f"the sub-agent is not valid: {problems[0].message}", pointer=problems[0].pointer,
                              problems=problems) from None  # fmt: skip


def _check(catalog: Catalog, revision: int | None) -> None:
    if revision is not None and revision != catalog.revision:
        raise ConflictError(
            "subagents.conflict",
            f"the catalog is at revision {catalog.revision}, not {revision}; re-read and retry",
            details={"expectedRevision": revision, "currentRevision": catalog.revision},
        )


@router.get("/subagents")
async def list_subagents(w: Web) -> dict[str, Any]:
    """The task sub-agents Agent mode may call, in order, with the catalog's revision."""
    return (await _catalog(w))[1].to_dict()


@router.post("/subagents", status_code=201)
async def add_subagent(w: Web, body: SubagentBody) -> dict[str, Any]:
    settings, catalog = await _catalog(w)
    _check(catalog, body.revision)
    with invalid_item():
        item = SubagentItem.model_validate(body.model_dump(by_alias=True, exclude={"revision"}))
    return (await save_catalog(settings, add_item(catalog, item), catalog.revision)).to_dict()


@router.put("/subagents/{name}")
async def edit_subagent(w: Web, name: str, body: SubagentEdit) -> dict[str, Any]:
    settings, catalog = await _catalog(w)
    _check(catalog, body.revision)
    changes = body.model_dump(by_alias=True, exclude={"revision"}, exclude_unset=True)
    with invalid_item():
        items = edit_item(catalog, name, changes)
    return (await save_catalog(settings, items, catalog.revision)).to_dict()


@router.delete("/subagents/{name}")
async def delete_subagent(w: Web, name: str, revision: int | None = None) -> dict[str, Any]:
    settings, catalog = await _catalog(w)
    _check(catalog, revision)
    return (await save_catalog(settings, delete_item(catalog, name), catalog.revision)).to_dict()
