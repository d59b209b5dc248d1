"""The asset store on SQLite and PostgreSQL: CRUD, revision CAS, validation, blobs, defaults, and
writers racing from several processes."""

from __future__ import annotations

import asyncio
import io
import multiprocessing
from typing import Any

import pytest
from PIL import Image

from roleplay.assets.cards.png_chunks import read_text_chunks, rewrite_png
from roleplay.assets.store import AssetStore
from roleplay.errors import ConflictError, NotFoundError, RpError, ValidationError
from roleplay.harness.store import EventStore, open_store
from roleplay.harness.store.migrations import LATEST, MIGRATIONS

pytestmark = pytest.mark.anyio


@pytest.fixture
def events(store: EventStore) -> EventStore:
    """The shared two-backend store fixture of ``tests/conftest.py``."""
    return store


@pytest.fixture
def assets(events: EventStore) -> AssetStore:
    return AssetStore(events)


def persona(name: str = "Mira", description: str = "") -> dict[str, Any]:
    return {"name": name, "description": description}


def png_with_text(keyword: str = "chara", text: bytes = b"secret") -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (8, 8), (200, 10, 10)).save(out, format="PNG")
    return rewrite_png(out.getvalue(), [(keyword, text)])


# -- schema and basic CRUD ---------------------------------------------------------------------------


async def test_migration_3_adds_the_asset_tables(events: EventStore) -> None:
    # Later subsystems (settings, …) append their own numbers after it.
    assert MIGRATIONS[2].number == 3 and MIGRATIONS[2].name == "assets"
    assert await events.schema_version() == LATEST
    assert await events.migrate() == []


async def test_create_get_and_list_pages_by_kind(assets: AssetStore) -> None:
    made = [await assets.create("persona", persona(f"P{i}")) for i in range(5)]
    style = await assets.create("writing-style", {"name": "Terse", "requirements": "Short sentences."})
    assert [m.revision for m in made] == [1] * 5
    got = await assets.get(made[2].id)
    assert got == made[2]
    assert got.data == {"name": "P2", "description": "", "avatar": None}  # normalised by the parser
    first = await assets.list("persona", limit=2)
    second = await assets.list("persona", limit=2, offset=2)
    assert first.total == second.total == 5
    assert [r.name for r in first.items + second.items] == ["P0", "P1", "P2", "P3"]
    assert [r.id for r in (await assets.list("writing-style")).items] == [style.id]
    with pytest.raises(NotFoundError) as exc:
        await assets.get(style.id, kind="persona")
    assert exc.value.code == "asset.not_found"


async def test_unknown_kind_and_bad_page_are_rejected(assets: AssetStore) -> None:
    with pytest.raises(ValidationError) as exc:
        await assets.create("character", {"name": "x"})
    assert (exc.value.code, exc.value.pointer) == ("asset.unknown_kind", "/kind")
    with pytest.raises(ValidationError) as exc:
        await assets.list("persona", limit=0)
    assert (exc.value.code, exc.value.pointer) == ("asset.invalid_page", "/limit")


# -- validation: bad input writes nothing ------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "data", "code", "pointer"),
    [
        ("persona", {"name": "   "}, "persona.invalid", "/name"),
        ("preset", {"name": "P", "fields": [{"id": "a", "title": "T", "position": "middle"}]}, "preset.invalid", "/fields/0/position"),
        ("writing-style", {"name": "S", "requirements": 5}, "writing_style.invalid", "/requirements"),
        ("card", {"name": "C", "alternate_greetings": "hi"}, "card.invalid", "/alternate_greetings"),
        ("card", {"name": "  "}, "card.invalid", "/name"),
        ("lorebook", {"name": "B", "book": {"entries": [3]}}, "lore.entry.invalid", "/book/entries/0"),
        ("lorebook", {"name": "B"}, "lorebook.invalid", "/book"),
    ],
)
async def test_invalid_data_is_rejected_with_a_pointer(assets: AssetStore, kind: str, data: Any, code: str, pointer: str) -> None:
    before = await assets.dump()
    with pytest.raises(ValidationError) as exc:
        await assets.create(kind, data)
    assert (exc.value.code, exc.value.pointer) == (code, pointer)
    assert await assets.dump() == before


async def test_invalid_update_leaves_the_asset_byte_identical(assets: AssetStore) -> None:
    rec = await assets.create("persona", persona())
    before = await assets.dump()
    with pytest.raises(ValidationError) as exc:
        await assets.update(rec.id, {"name": "ok", "avatar": "https://evil.example/x.png"}, expected_revision=1)
    assert exc.value.pointer == "/avatar"
    assert await assets.dump() == before


# -- revision CAS --------------------------------------------------------------------------------


async def test_update_bumps_revision_and_stale_revision_conflicts(assets: AssetStore) -> None:
    rec = await assets.create("persona", persona())
    updated = await assets.update(rec.id, persona("Mira", "tall"), expected_revision=1)
    assert (updated.revision, updated.data["description"]) == (2, "tall")
    assert updated.content_hash != rec.content_hash
    before = await assets.dump()
    with pytest.raises(ConflictError) as exc:
        await assets.update(rec.id, persona("Mira", "short"), expected_revision=1)
    assert exc.value.code == "asset.revision_conflict"
    assert exc.value.details == {"assetId": rec.id, "expectedRevision": 1, "currentRevision": 2}
    assert await assets.dump() == before


async def test_update_and_delete_of_missing_asset(assets: AssetStore) -> None:
    with pytest.raises(NotFoundError):
        await assets.update("ast_nope", persona(), expected_revision=1)
    with pytest.raises(NotFoundError):
        await assets.delete("ast_nope")
    with pytest.raises(ValidationError) as exc:
        await assets.update("ast_nope", persona(), expected_revision=0)
    assert exc.value.code == "asset.invalid_revision"


async def test_delete_with_stale_revision_writes_nothing_then_deletes(assets: AssetStore) -> None:
    rec = await assets.create("persona", persona())
    await assets.update(rec.id, persona("B"), expected_revision=1)
    before = await assets.dump()
    with pytest.raises(ConflictError):
        await assets.delete(rec.id, expected_revision=1)
    assert await assets.dump() == before
    deleted = await assets.delete(rec.id, expected_revision=2)
    assert deleted.name == "B"
    with pytest.raises(NotFoundError):
        await assets.get(rec.id)
    assert await assets.dump() == []


async def test_concurrent_updates_in_one_process_lose_nothing(assets: AssetStore) -> None:
    rec = await assets.create("persona", persona(description=""))

    async def writer(w: int) -> int:
        conflicts = 0
        for n in range(10):
            while True:
                cur = await assets.get(rec.id)
                try:
                    await assets.update(rec.id, persona(description=cur.data["description"] + f"w{w}.{n};"), expected_revision=cur.revision)
                    break
                except ConflictError:
                    conflicts += 1
        return conflicts

    await asyncio.gather(*(writer(w) for w in range(4)))
    final = await assets.get(rec.id)
    assert final.revision == 41
    assert sorted(final.data["description"].rstrip(";").split(";")) == sorted(f"w{w}.{n}" for w in range(4) for n in range(10))


def _update_process(url: str, asset_id: str, n: int, worker: int) -> int:
    """Append ``n`` tokens to a persona's description with CAS retries; return conflicts seen."""

    async def run() -> int:
        events = open_store(url)
        store = AssetStore(events)
        conflicts = 0
        try:
            for i in range(n):
                while True:
                    cur = await store.get(asset_id)
                    text = cur.data["description"] + f"p{worker}.{i};"
                    try:
                        await store.update(asset_id, {"name": "Race", "description": text}, expected_revision=cur.revision)
                        break
                    except ConflictError:
                        conflicts += 1
        finally:
            await events.close()
        return conflicts

    return asyncio.run(run())


@pytest.mark.slow
async def test_processes_racing_updates_on_one_asset_lose_nothing(assets: AssetStore, store_url: str) -> None:
    rec = await assets.create("persona", {"name": "Race", "description": ""})
    ctx = multiprocessing.get_context("spawn")
    loop = asyncio.get_running_loop()
    with ctx.Pool(4) as pool:
        results = [pool.apply_async(_update_process, (store_url, rec.id, 15, w)) for w in range(4)]
        await loop.run_in_executor(None, lambda: [r.get(timeout=240) for r in results])
    final = await assets.get(rec.id)
    tokens = final.data["description"].rstrip(";").split(";")
    assert sorted(tokens) == sorted(f"p{w}.{i}" for w in range(4) for i in range(15))
    for w in range(4):  # each writer's own updates stay in its order
        assert [t for t in tokens if t.startswith(f"p{w}.")] == [f"p{w}.{i}" for i in range(15)]
    assert final.revision == 1 + 60


# -- blobs ---------------------------------------------------------------------------------------------


async def test_avatar_blob_is_sanitised_and_bumps_revision(assets: AssetStore) -> None:
    rec = await assets.create("persona", persona())
    source = png_with_text(text=b"card json with secrets")
    updated = await assets.put_blob(rec.id, "avatar", source, media_type="image/png", expected_revision=1)
    assert updated.revision == 2
    blob = await assets.get_blob(rec.id, "avatar")
    assert blob.media_type == "image/png" and blob.data != source
    assert read_text_chunks(blob.data).texts == []  # text chunks are gone
    assert Image.open(io.BytesIO(blob.data)).size == (8, 8)
    assert [(b.role, b.size) for b in await assets.list_blobs(rec.id)] == [("avatar", len(blob.data))]


async def test_blob_errors(assets: AssetStore) -> None:
    rec = await assets.create("persona", persona())
    before = await assets.dump()
    for role, code in (("isolated-prompts", "asset.blob_reserved"), ("Bad Role", "asset.blob_invalid_role")):
        with pytest.raises(ValidationError) as exc:
            await assets.put_blob(rec.id, role, b"x", media_type="text/plain")
        assert exc.value.code == code
    with pytest.raises(RpError) as err:
        await assets.put_blob(rec.id, "avatar", b"not an image", media_type="image/png")
    assert err.value.code == "card.avatar.invalid"
    with pytest.raises(ConflictError):
        await assets.put_blob(rec.id, "notes", b"x", media_type="text/plain", expected_revision=7)
    assert await assets.dump() == before
    with pytest.raises(NotFoundError) as nf:
        await assets.get_blob(rec.id, "avatar")
    assert nf.value.code == "asset.blob_not_found"


async def test_deleting_an_asset_deletes_its_blobs(assets: AssetStore) -> None:
    rec = await assets.create("persona", persona())
    await assets.put_blob(rec.id, "notes", b"hello", media_type="text/plain")
    await assets.delete(rec.id)
    assert await assets.dump() == []


async def test_revisions_and_blobs_read_both_in_one_statement(assets: AssetStore) -> None:
    a = await assets.create("persona", persona("A"))
    b = await assets.create("persona", persona("B"))
    style = await assets.create("writing-style", {"name": "S"})
    await assets.put_blob(a.id, "notes", b"hello", media_type="text/plain")
    await assets.put_blob(a.id, "other", b"not this role", media_type="text/plain")
    await assets.put_blob(style.id, "notes", b"not this kind", media_type="text/plain")
    ids = [b.id, a.id, style.id, "ast_never"]
    revisions, blobs = await assets.read(lambda tx: tx.revisions_and_blobs(ids, "persona", "notes"))
    assert revisions == await assets.revisions(ids) == {a.id: 3, b.id: 1, style.id: 2}  # a blob is a revision
    assert list(blobs) == [a.id]
    got = blobs[a.id]
    assert (got.data, got.role, got.media_type) == (b"hello", "notes", "text/plain")
    assert got == await assets.read(lambda tx: tx.blob(a.id, "notes"))
    many = [a.id, *(f"ast_{i:05d}" for i in range(1200))]  # more ids than one IN list holds
    assert await assets.read(lambda tx: tx.revisions_and_blobs(many, "persona", "notes")) == ({a.id: 3}, {a.id: got})


# -- defaults ----------------------------------------------------------------------------------------


async def test_defaults_per_kind(assets: AssetStore) -> None:
    a = await assets.create("persona", persona("A"))
    style = await assets.create("writing-style", {"name": "S"})
    assert await assets.get_default("persona") is None
    await assets.set_default("persona", a.id)
    assert (await assets.get_default("persona")).id == a.id  # type: ignore[union-attr]
    with pytest.raises(ValidationError) as exc:
        await assets.set_default("persona", style.id)
    assert (exc.value.code, exc.value.pointer) == ("asset.kind_mismatch", "/assetId")
    with pytest.raises(ValidationError) as exc:
        await assets.get_default("card")
    assert exc.value.code == "asset.default_unsupported"
    await assets.delete(a.id)
    assert await assets.get_default("persona") is None  # no silent replacement


async def test_revisions_reads_the_current_revision_of_the_assets_that_exist(assets: AssetStore) -> None:
    a = await assets.create("persona", persona("A"))
    b = await assets.create("persona", persona("B"))
    await assets.update(b.id, persona("B2"), expected_revision=1)
    gone = await assets.create("persona", persona("C"))
    await assets.delete(gone.id)
    assert await assets.revisions([b.id, a.id, gone.id, "ast_never", a.id]) == {a.id: 1, b.id: 2}
    assert await assets.revisions([]) == {}
    many = [a.id, *(f"ast_{i:05d}" for i in range(1200))]  # more ids than one IN list holds
    assert await assets.revisions(many) == {a.id: 1}
