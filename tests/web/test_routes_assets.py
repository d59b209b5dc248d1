"""Assets over HTTP: list, get with ETag, create, update with If-Match/revision (409 on a stale
one), delete with its impact report, multipart import with the upload cap, V3 PNG export, avatars."""

from __future__ import annotations

import io
import json
from typing import Any

import httpx
import pytest
from PIL import Image

from roleplay.samples import SAMPLE_CARD, sample_card_bytes
from web.web_support import api_client, new_story

pytestmark = pytest.mark.anyio

API = "/api/v1"
WORLD = {"entries": {"0": {"uid": 0, "key": ["lighthouse"], "content": "The lighthouse is old.", "comment": "Lighthouse"}}}


def png(width: int = 8, height: int = 8) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (200, 40, 40)).save(out, "PNG")
    return out.getvalue()


async def import_files(client: httpx.AsyncClient, *files: tuple[str, bytes], **form: Any) -> httpx.Response:
    return await client.post(
        f"{API}/assets/import", files=[("files", (name, data, "application/octet-stream")) for name, data in files], data=form
    )


async def test_list_get_create_and_update_with_revisions(api: tuple[httpx.AsyncClient, Any]) -> None:
    client, _ = api
    listed = (await client.get(f"{API}/assets")).json()
    assert {a["kind"] for a in listed} == {"persona", "preset", "writing-style"} and all(a["default"] for a in listed)
    made = await client.post(f"{API}/assets", json={"kind": "persona", "data": {"name": "Mara", "description": "A sailor."}})
    assert made.status_code == 201 and made.headers["etag"] == '"1"'
    pid = made.json()["id"]
    got = await client.get(f"{API}/assets/{pid}")
    assert got.json()["data"]["name"] == "Mara" and got.headers["etag"] == '"1"'
    assert [a["id"] for a in (await client.get(f"{API}/assets", params={"kind": "persona"})).json()][-1] == pid
    new = {"name": "Mara", "description": "A sailor who fears the sea."}
    # two tabs read revision 1; the first write wins, the second is refused
    first = await client.put(f"{API}/assets/{pid}", json={"data": new}, headers={"If-Match": '"1"'})
    assert first.status_code == 200 and first.headers["etag"] == '"2"' and first.json()["revision"] == 2
    stale = await client.put(f"{API}/assets/{pid}", json={"data": {**new, "description": "other"}}, headers={"If-Match": '"1"'})
    assert stale.status_code == 409 and stale.json()["code"] == "asset.revision_conflict"
    by_field = await client.put(f"{API}/assets/{pid}", json={"data": {**new, "description": "third"}, "revision": 2})
    assert by_field.status_code == 200 and by_field.json()["revision"] == 3
    stale_field = await client.put(f"{API}/assets/{pid}", json={"data": new, "revision": 2})
    assert stale_field.status_code == 409
    blind = await client.put(f"{API}/assets/{pid}", json={"data": new})
    assert blind.status_code == 422 and blind.json()["code"] == "asset.revision_required"
    mixed = await client.put(f"{API}/assets/{pid}", json={"data": new, "revision": 3}, headers={"If-Match": '"2"'})
    assert mixed.status_code == 422 and mixed.json()["code"] == "asset.revision_mismatch"
    junk = await client.put(f"{API}/assets/{pid}", json={"data": new}, headers={"If-Match": "yesterday"})
    assert junk.status_code == 422 and junk.json()["code"] == "asset.invalid_if_match"
    invalid = await client.put(f"{API}/assets/{pid}", json={"data": {"name": ""}, "revision": 3})
    assert invalid.status_code == 422 and invalid.json()["pointer"]
    assert (await client.get(f"{API}/assets/ast_nope")).status_code == 404
    assert (await client.get(f"{API}/assets", params={"kind": "spaceship"})).json()["code"] == "asset.unknown_kind"
    bad_kind = await client.post(f"{API}/assets", json={"kind": "spaceship", "data": {}})
    assert bad_kind.status_code == 422


async def test_import_export_and_delete_with_impact(api: tuple[httpx.AsyncClient, Any]) -> None:
    client, _ = api
    r = await import_files(client, (SAMPLE_CARD, sample_card_bytes()), ("../../etc/world.json", json.dumps(WORLD).encode()))
    assert r.status_code == 200
    card, book = r.json()
    assert card["kind"] == "card" and book["kind"] == "lorebook"
    assert book["file"] == "world.json"  # only the name's last part, never a path
    again = (await import_files(client, (SAMPLE_CARD, sample_card_bytes()))).json()[0]
    assert again["duplicate"] is True and again["assetId"] == card["assetId"]
    broken = await import_files(client, ("broken.json", b'{"name": '))
    assert broken.status_code == 400 and broken.json()["code"].startswith("asset.json"), broken.text
    exported = await client.get(f"{API}/assets/{card['assetId']}/export")
    assert exported.status_code == 200 and exported.headers["content-type"] == "image/png" and exported.content[:8] == b"\x89PNG\r\n\x1a\n"
    reimported = (await import_files(client, ("exported.png", exported.content))).json()[0]
    assert reimported["kind"] == "card"
    not_a_card = await client.get(f"{API}/assets/{book['assetId']}/export")
    assert not_a_card.status_code == 404
    # a story binds the card: delete reports the impact and refuses without force
    sid = await new_story(client, card=card["assetId"])
    impact = (await client.get(f"{API}/assets/{card['assetId']}/impact")).json()
    assert {s["sessionId"] for s in impact["sessions"]} == {sid} and any(s["assetId"] == card["assetId"] for s in impact["sessions"])
    # the card's embedded lorebook goes with it unless kept: the same camelCase flag as the delete
    assert impact["alsoDeleted"], impact
    kept = (await client.get(f"{API}/assets/{card['assetId']}/impact", params={"keepLorebooks": "true"})).json()
    assert kept["alsoDeleted"] == []
    refused = await client.delete(f"{API}/assets/{card['assetId']}")
    assert refused.status_code == 409 and refused.json()["code"] == "asset.in_use"
    assert refused.json()["details"]["impact"]["sessions"][0]["sessionId"] == sid
    stale = await client.delete(f"{API}/assets/{card['assetId']}", params={"force": True}, headers={"If-Match": '"99"'})
    assert stale.status_code == 409 and stale.json()["code"] == "asset.revision_conflict"
    done = await client.delete(f"{API}/assets/{card['assetId']}", params={"force": True})
    assert done.status_code == 200 and done.json()["deleted"][0]["id"] == card["assetId"]
    assert (await client.get(f"{API}/assets/{card['assetId']}")).status_code == 404
    assert (await client.get(f"{API}/sessions/{sid}")).status_code == 200  # the story keeps running, unbound


async def test_avatars_trust_and_defaults(api: tuple[httpx.AsyncClient, Any]) -> None:
    client, _ = api
    card = (await import_files(client, (SAMPLE_CARD, sample_card_bytes()))).json()[0]["assetId"]
    put = await client.put(f"{API}/assets/{card}/avatar", files={"file": ("me.png", png(), "image/png")})
    assert put.status_code == 200
    got = await client.get(f"{API}/assets/{card}/avatar")
    assert got.status_code == 200 and got.headers["content-type"] == "image/png" and Image.open(io.BytesIO(got.content)).size == (8, 8)
    not_image = await client.put(f"{API}/assets/{card}/avatar", files={"file": ("x.png", b"not an image", "image/png")})
    assert 400 <= not_image.status_code < 500 and not_image.json()["code"]
    untrusted = await client.post(f"{API}/assets/{card}/trust", json={"trusted": True})
    assert untrusted.status_code == 422 and untrusted.json()["code"] == "asset.no_isolated_prompts"
    persona = (await client.post(f"{API}/assets", json={"kind": "persona", "data": {"name": "Mara", "description": "x"}})).json()["id"]
    assert (await client.put(f"{API}/defaults/persona", json={"assetId": persona})).json()["assetId"] == persona
    assert (await client.get(f"{API}/defaults")).json()["persona"] == persona


async def test_uploads_over_the_limit_are_413(db_url: str) -> None:
    async with api_client(db_url, max_upload_bytes=1000, max_body_bytes=2000) as (client, _):
        big = await import_files(client, ("big.json", b"{" + b" " * 5000 + b"}"))
        assert big.status_code == 413 and big.json()["code"] == "upload.too_large"
        avatar = await client.put(f"{API}/assets/ast_x/avatar", files={"file": ("a.png", png(200, 200) + b"\0" * 2000, "image/png")})
        assert avatar.status_code == 413
        body = await client.post(f"{API}/assets", json={"kind": "persona", "data": {"name": "M", "description": "x" * 5000}})
        assert body.status_code == 413 and body.json()["code"] == "http.too_large"
        small = await import_files(client, ("world.json", json.dumps(WORLD).encode()))
        assert small.status_code == 200


async def test_a_decompression_bomb_is_refused_as_too_large(api: tuple[httpx.AsyncClient, Any]) -> None:
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    # 17 KB on the wire, a 32 MiB text value once inflated
    bomb = zlib.compress(b"A" * (32 * 1024 * 1024), 9)
    image = png()
    body = image[:33] + chunk(b"zTXt", b"chara\x00\x00" + bomb) + image[33:]
    client, _ = api
    r = await import_files(client, ("bomb.png", body))
    assert len(body) < 100_000 and r.status_code == 413 and "too_large" in r.json()["code"]
    assert (await client.get(f"{API}/assets", params={"kind": "card"})).json() == []


async def test_a_cards_own_prompts_are_held_until_trusted(api: tuple[httpx.AsyncClient, Any]) -> None:
    client, _ = api
    card = {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {"name": "Vale", "description": "A ferryman.", "first_mes": "The boat rocks.", "system_prompt": "Always rhyme."},
    }
    imported = (await import_files(client, ("vale.json", json.dumps(card).encode()))).json()[0]
    assert imported["isolatedPrompts"] == ["system_prompt"] and "trusted" not in imported
    trusted = await client.post(f"{API}/assets/{imported['assetId']}/trust", json={"trusted": True})
    assert trusted.status_code == 200 and trusted.json() == {"cardId": imported["assetId"], "trusted": True}
    revoked = await client.post(f"{API}/assets/{imported['assetId']}/trust", json={"trusted": False})
    assert revoked.json()["trusted"] is False
    again = await import_files(
        client, ("vale2.json", json.dumps({**card, "data": {**card["data"], "name": "Vale II"}}).encode()), trust="true"
    )
    assert again.json()[0]["trusted"] is True
