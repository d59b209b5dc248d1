"""Assets of the five kinds: list, get, create, update, delete with its impact, import, export, avatars.

**Revisions.** ``GET /assets/{id}`` sends the revision as the ``ETag``; an update or delete names
the revision it was based on with ``If-Match`` (or a ``revision`` field/parameter). A stale one is
409 ``asset.revision_conflict``, so two tabs editing the same card never overwrite each other; an
update without any is 422 ``asset.revision_required``.

**Uploads** (``POST /assets/import``, ``PUT /assets/{id}/avatar``) are multipart files capped at the
server's upload limit (413 ``upload.too_large``); the importers cap what a file unpacks to (PNG text
chunks, CHARX members) as well. An uploaded file's name is only a hint for the format and the
asset's default name: nothing is ever written under it.

Card and lorebook fields are returned as JSON data; nothing here renders them as HTML.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import PurePath
from urllib.parse import quote
from typing import Annotated, Any

from fastapi import APIRouter, File, Form, Header, Query, UploadFile
from fastapi.responses import JSONResponse, Response

from roleplay.assets.kinds import CARD, DEFAULT_KINDS, KINDS
from roleplay.core.asset_users import sessions_using
from roleplay.errors import RpError, ValidationError

from .app import Web, WebState
from .models import AssetCreate, AssetUpdate, DefaultBody, TrustBody

router = APIRouter(tags=["assets"])


def etag(revision: int) -> str:
    return f'"{revision}"'


def expected_revision(if_match: str | None, field: int | None, *, required: bool, prefix: str = "asset") -> int | None:
    """The revision the client's change is based on: ``If-Match`` or the explicit field.
    ``prefix`` starts the error codes (``asset.revision_required``, ``profile.…``)."""
    from_header: int | None = None
    if if_match is not None and if_match.strip() != "*":
        text = if_match.strip().removeprefix("W/").strip('"')
        if not text.isdecimal():
            raise ValidationError(
                f"{prefix}.invalid_if_match", f"If-Match must be an ETag read here (got {if_match!r})", pointer="/If-Match"
            )
        from_header = int(text)
    if from_header is not None and field is not None and from_header != field:
        raise ValidationError(f"{prefix}.revision_mismatch", "If-Match and revision name different revisions", pointer="/revision")
    found = from_header if from_header is not None else field
    if found is None and required:
        raise ValidationError(
            f"{prefix}.revision_required",
            "say which revision this change is based on: If-Match: ETAG or a revision field",
            pointer="/revision",
        )
    return found


@contextmanager
def revision_pointer() -> Iterator[None]:
    """A profile change's engine error points at its tool argument ``/expectedRevision``: for the
    client that is the request's ``/revision`` (or its If-Match)."""
    try:
        yield
    except RpError as exc:
        if exc.pointer == "/expectedRevision":
            exc.pointer = "/revision"
        raise


def _kind(kind: str | None) -> str | None:
    if kind is not None and kind not in KINDS:
        raise ValidationError("asset.unknown_kind", f"kind must be one of {', '.join(KINDS)} (got {kind!r})", pointer="/kind")
    return kind


async def _upload(file: UploadFile, w: WebState) -> tuple[bytes, str | None]:
    limit = w.config.max_upload_bytes
    data = await file.read(limit + 1)
    if len(data) > limit:
        raise RpError("upload.too_large", f"the upload is over the server's limit of {limit} bytes", details={"limit": limit})
    # Only the last path component, as text: a hint for the format and the default name, never a path.
    name = PurePath(file.filename.replace("\\", "/")).name if file.filename else None
    return data, name or None


@router.get("/assets")
async def list_assets(
    w: Web,
    kind: str | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> list[dict[str, Any]]:
    """Assets, oldest first (every kind unless ``kind``); the default of each kind is marked."""
    store = w.assets.store
    defaults = {k: (await store.get_default(k)) for k in DEFAULT_KINDS}
    default_ids = {r.id for r in defaults.values() if r is not None}
    rows: list[dict[str, Any]] = []
    for k in [_kind(kind)] if kind else KINDS:
        assert k is not None
        page = await store.list(k, limit=limit, offset=offset)
        rows += [{**r.to_dict(with_data=False), "default": r.id in default_ids} for r in page.items]
    return rows


@router.post("/assets", status_code=201)
async def create_asset(w: Web, body: AssetCreate) -> JSONResponse:
    """Create an asset of a kind from its data (validated as an import would be)."""
    record = await w.assets.store.create(_kind(body.kind) or body.kind, body.data)
    return JSONResponse(record.to_dict(), status_code=201, headers={"ETag": etag(record.revision)})


@router.post("/assets/import")
async def import_assets(
    w: Web,
    files: Annotated[list[UploadFile], File(description="character cards (PNG/JSON/CHARX), SillyTavern lorebooks and presets")],
    repair: Annotated[bool, Form(description="repair broken JSON by guessing (the warnings say what was lost)")] = False,
    trust: Annotated[bool, Form(description="also trust the cards' own system prompt and post-history instructions")] = False,
) -> list[dict[str, Any]]:
    """Import files, each on its own, all or nothing; a failed file carries its error."""
    results: list[dict[str, Any]] = []
    failed: RpError | None = None
    for upload in files:
        data, name = await _upload(upload, w)
        try:
            result = await w.assets.import_file(data, name, allow_repair=repair)
        except RpError as exc:
            if exc.code == "upload.too_large":
                raise
            results.append({"file": name, "error": exc.to_dict()})
            failed = exc
            continue
        item = {"file": name, **result.to_dict()}
        if result.kind == CARD and result.isolated_prompts and trust:
            prompts = await w.assets.isolated_prompts(result.asset_id)
            if not prompts.trusted:
                await w.assets.trust_isolated_prompts(result.asset_id, True)
            item["trusted"] = True
        results.append(item)
    if failed is not None and len(results) == 1:
        # The importer's own error, so its class keeps its status (an empty file is 422, not 400).
        failed.details = {**failed.details, "file": results[0]["file"]}
        raise failed
    return results


@router.get("/assets/{asset_id}")
async def get_asset(w: Web, asset_id: str) -> JSONResponse:
    """One asset with its data and blobs; ``ETag`` is its revision."""
    record = await w.assets.store.get(asset_id)
    blobs = await w.assets.store.list_blobs(asset_id)
    out = record.to_dict()
    out["blobs"] = [{"role": b.role, "mediaType": b.media_type, "size": b.size, "sha256": b.sha256} for b in blobs]
    if record.kind == CARD:
        out["linkedLorebooks"] = [b.id for b in await w.assets.linked_lorebooks(asset_id)]
    return JSONResponse(out, headers={"ETag": etag(record.revision)})


@router.put("/assets/{asset_id}")
async def update_asset(w: Web, asset_id: str, body: AssetUpdate, if_match: Annotated[str | None, Header()] = None) -> JSONResponse:
    """Replace an asset's data, if it is still at the revision the client read."""
    revision = expected_revision(if_match, body.revision, required=True)
    assert revision is not None
    record = await w.assets.store.update(asset_id, body.data, expected_revision=revision)
    return JSONResponse(record.to_dict(), headers={"ETag": etag(record.revision)})


@router.get("/assets/{asset_id}/impact")
async def impact(w: Web, asset_id: str, keep_lorebooks: Annotated[bool, Query(alias="keepLorebooks")] = False) -> dict[str, Any]:
    """What deleting the asset would touch: the assets deleted with it and the stories that bind them."""
    return await _impact(w, asset_id, keep_lorebooks)


async def _impact(w: WebState, asset_id: str, keep_lorebooks: bool) -> dict[str, Any]:
    record = await w.assets.store.get(asset_id)
    also = [] if record.kind != CARD or keep_lorebooks else await w.assets.linked_lorebooks(asset_id)
    users = await sessions_using(w.rt.store, {asset_id, *(b.id for b in also)})
    return {
        "asset": record.to_dict(with_data=False),
        "alsoDeleted": [b.to_dict(with_data=False) for b in also],
        "sessions": [u.to_dict() for u in users],
    }


@router.delete("/assets/{asset_id}")
async def delete_asset(
    w: Web,
    asset_id: str,
    revision: Annotated[int | None, Query(ge=1)] = None,
    keep_lorebooks: Annotated[bool, Query(alias="keepLorebooks")] = False,
    force: Annotated[bool, Query(description="delete even when stories bind it (they keep running, unbound)")] = False,
    if_match: Annotated[str | None, Header()] = None,
) -> dict[str, Any]:
    """Delete an asset (a card also deletes its imported lorebooks unless keepLorebooks). When stories
    use it, 409 ``asset.in_use`` with the impact report, unless ``force``."""
    expected = expected_revision(if_match, revision, required=False)
    report = await _impact(w, asset_id, keep_lorebooks)
    if report["sessions"] and not force:
        stories = len({s["sessionId"] for s in report["sessions"]})
        raise RpError(
            "asset.in_use",
            f"{asset_id} is used by {stories} stor{'y' if stories == 1 else 'ies'}; not deleted (force=true deletes anyway)",
            details={"impact": report},
        )
    result = await w.assets.delete(asset_id, expected_revision=expected, cascade_lorebooks=not keep_lorebooks)
    return {**result.to_dict(), "impact": report}


@router.get("/assets/{asset_id}/export", response_class=Response, responses={200: {"content": {"image/png": {}}}})
async def export_card(w: Web, asset_id: str) -> Response:
    """The card as a V3 PNG (V2 backfill) with its linked lorebooks; isolated prompts are never exported."""
    png = await w.assets.export_card(asset_id)
    record = await w.assets.store.get(asset_id)
    # The card's name is a stranger's text: ASCII fallback plus the RFC 5987 UTF-8 form, quoted.
    name = "".join(c for c in record.name if c.isalnum() or c in " -_")[:60].strip() or "card"
    ascii_name = name.encode("ascii", "ignore").decode().strip() or "card"
    disposition = f"attachment; filename=\"{ascii_name}.png\"; filename*=UTF-8''{quote(name + '.png')}"
    return Response(png, media_type="image/png", headers={"Content-Disposition": disposition})


@router.get("/assets/{asset_id}/avatar", response_class=Response, responses={200: {"content": {"image/png": {}}}})
async def get_avatar(w: Web, asset_id: str) -> Response:
    blob = await w.assets.store.get_blob(asset_id, "avatar")
    return Response(blob.data, media_type=blob.media_type, headers={"X-Content-Type-Options": "nosniff"})


@router.put("/assets/{asset_id}/avatar")
async def put_avatar(
    w: Web,
    asset_id: str,
    file: Annotated[UploadFile, File()],
    revision: Annotated[int | None, Form()] = None,
    if_match: Annotated[str | None, Header()] = None,
) -> JSONResponse:
    """Replace the avatar (re-encoded as a metadata-free PNG)."""
    expected = expected_revision(if_match, revision, required=False)
    data, _ = await _upload(file, w)
    record = await w.assets.store.put_blob(
        asset_id, "avatar", data, media_type=file.content_type or "image/png", expected_revision=expected
    )
    return JSONResponse(record.to_dict(with_data=False), headers={"ETag": etag(record.revision)})


@router.post("/assets/{asset_id}/trust")
async def trust(w: Web, asset_id: str, body: TrustBody) -> dict[str, Any]:
    """Trust (or stop trusting) a card's own system prompt and post-history instructions."""
    prompts = await w.assets.trust_isolated_prompts(asset_id, body.trusted)
    return {"cardId": asset_id, "trusted": prompts.trusted}


@router.get("/defaults")
async def defaults(w: Web) -> dict[str, Any]:
    """The default persona, preset and writing style."""
    out: dict[str, Any] = {}
    for k in DEFAULT_KINDS:
        record = await w.assets.store.get_default(k)
        out[k] = record.id if record else None
    return out


@router.put("/defaults/{kind}")
async def set_default(w: Web, kind: str, body: DefaultBody) -> dict[str, Any]:
    """Make an asset the default of its kind (persona, preset, writing-style)."""
    record = await w.assets.store.set_default(kind, body.asset_id)
    return {"kind": kind, "assetId": record.id}
