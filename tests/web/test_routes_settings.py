"""Settings, features, plugins, quick replies and models over HTTP, with revision CAS."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.anyio

API = "/api/v1"


async def test_settings_get_set_with_revisions_and_reset(api: tuple[httpx.AsyncClient, Any]) -> None:
    client, _ = api
    keys = [s["key"] for s in (await client.get(f"{API}/settings")).json()]
    assert "writer.defaultRoute" in keys and "language" in keys
    one = (await client.get(f"{API}/settings/replyOptions.count")).json()
    assert one["isDefault"] is True and one["revision"] == 0
    put = await client.put(f"{API}/settings/replyOptions.count", json={"value": 2, "revision": 0})
    assert put.status_code == 200 and put.json()["value"] == 2 and put.json()["revision"] == 1
    stale = await client.put(f"{API}/settings/replyOptions.count", json={"value": 4}, headers={"If-Match": '"0"'})
    assert stale.status_code == 409 and stale.json()["code"] == "settings.conflict"
    invalid = await client.put(f"{API}/settings/replyOptions.count", json={"value": "many"})
    assert invalid.status_code == 422 and invalid.json()["code"].startswith("settings.")
    unknown = await client.get(f"{API}/settings/no.such.key")
    assert 400 <= unknown.status_code < 500 and unknown.json()["code"].startswith("settings.")
    reset = await client.delete(f"{API}/settings/replyOptions.count", params={"revision": 1})
    assert reset.status_code == 200 and reset.json()["isDefault"] is True


async def test_features_and_plugins(api: tuple[httpx.AsyncClient, Any]) -> None:
    client, rt = api
    state = (await client.get(f"{API}/features")).json()
    assert "rp-state" in state["enabled"] and sorted(rt.features) == state["running"]
    off = await client.post(f"{API}/features/rp-state/disable", json={"revision": state["revision"]})
    assert off.status_code == 200 and off.json()["on"] is False and "rp-compat-mvu" in off.json()["also"]
    stale = await client.post(f"{API}/features/rp-state/enable", json={"revision": state["revision"]})
    assert stale.status_code == 409
    on = await client.post(f"{API}/features/rp-state/enable")
    assert on.status_code == 200 and on.json()["on"] is True
    unknown = await client.post(f"{API}/features/rp-nothing/enable")
    assert 400 <= unknown.status_code < 500 and unknown.json()["code"]
    plugins = (await client.get(f"{API}/plugins")).json()
    assert any(p["name"] == "rp-state" for p in plugins)


async def test_quick_replies_crud_with_revisions(api: tuple[httpx.AsyncClient, Any]) -> None:
    client, _ = api
    added = await client.post(f"{API}/quick-replies", json={"label": "wave", "text": "I wave."})
    assert added.status_code == 201 and added.json()["items"] == [{"label": "wave", "text": "I wave."}]
    revision = added.json()["revision"]
    dup = await client.post(f"{API}/quick-replies", json={"label": "wave", "text": "again"})
    assert 400 <= dup.status_code < 500 and dup.json()["code"]
    edited = await client.put(f"{API}/quick-replies/wave", json={"text": "I wave back.", "revision": revision})
    assert edited.status_code == 200 and edited.json()["items"][0]["text"] == "I wave back."
    stale = await client.put(f"{API}/quick-replies/wave", json={"text": "x", "revision": revision})
    assert stale.status_code == 409
    assert (await client.delete(f"{API}/quick-replies/wave")).json()["items"] == []
    assert (await client.delete(f"{API}/quick-replies/wave")).status_code in (404, 422, 400)


async def test_models_list_and_test(api: tuple[httpx.AsyncClient, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    client, _ = api
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-very-secret-key")
    listed = (await client.get(f"{API}/models")).json()
    assert listed["defaultRoute"] == "demo/demo" and any(p["provider"] == "deepseek" and p["configured"] for p in listed["providers"])
    assert "sk-very-secret-key" not in str(listed)  # keys never appear in responses
    tried = await client.post(f"{API}/models/test", json={})
    assert tried.status_code == 200 and tried.json()["demo"] is True and tried.json()["reply"]
    bad = await client.post(f"{API}/models/test", json={"model": "nowhere/x"})
    assert 400 <= bad.status_code < 500 and bad.json()["code"].startswith("model.")
