"""The lorebook activation test, MVU inspect (stored card and upload) and sub-agent sessions."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from roleplay.samples import SAMPLE_CARD, sample_card_bytes

pytestmark = pytest.mark.anyio

API = "/api/v1"
WORLD = {"entries": {"0": {"uid": 0, "key": ["lighthouse"], "content": "The lighthouse is old.", "comment": "Lighthouse"}}}


async def test_lorebook_activation_test(api: tuple[httpx.AsyncClient, Any]) -> None:
    client, _ = api
    r = await client.post(f"{API}/assets/import", files=[("files", ("world.json", json.dumps(WORLD).encode(), "application/json"))])
    book = r.json()[0]["assetId"]
    hit = (await client.post(f"{API}/lorebooks/{book}/test", json={"texts": ["We walk to the lighthouse."]})).json()
    assert [a["title"] for a in hit["activated"]] == ["Lighthouse"]
    miss = (await client.post(f"{API}/lorebooks/{book}/test", json={"texts": ["Nothing here."], "all": True})).json()
    assert miss["activated"] == [] and miss["decisions"] and not miss["decisions"][0]["activated"]
    assert (await client.post(f"{API}/lorebooks/ast_nope/test", json={"texts": ["x"]})).status_code == 404


async def test_mvu_inspect_stored_and_uploaded(api: tuple[httpx.AsyncClient, Any]) -> None:
    client, _ = api
    card = (await client.post(f"{API}/assets/import", files=[("files", (SAMPLE_CARD, sample_card_bytes(), "image/png"))])).json()[0]
    stored = (await client.get(f"{API}/cards/{card['assetId']}/mvu")).json()
    assert stored["ok"] is True and stored["detected"] is False  # the sample is not an MVU card
    uploaded = await client.post(f"{API}/mvu/inspect", files={"file": ("c.png", sample_card_bytes(), "image/png")})
    assert uploaded.status_code == 200 and uploaded.json()["detected"] is False
    junk = await client.post(f"{API}/mvu/inspect", files={"file": ("c.png", b"junk", "image/png")})
    assert 400 <= junk.status_code < 500 and junk.json()["code"]
    assert (await client.get(f"{API}/cards/ast_nope/mvu")).status_code == 404
