"""Settings, features, plugins, quick replies and models over HTTP, with revision CAS."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import httpx
import pytest

from roleplay.harness.models.routes import use_key_file
from roleplay.harness.models.secrets import KeyFile
from web.web_support import new_story

pytestmark = pytest.mark.anyio

API = "/api/v1"
KEY = "sk-stored-in-the-home-0123456789"


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


async def test_model_keys_are_write_only_and_kept_out_of_responses_and_the_log(
    api: tuple[httpx.AsyncClient, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    client, rt = api
    for name in ("DEEPSEEK_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "RP_MODEL"):
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    unavailable = await client.put(f"{API}/models/keys/deepseek", json={"key": KEY})
    assert unavailable.status_code == 400 and unavailable.json()["code"] == "keys.unavailable"  # no home: the environment only
    use_key_file(KeyFile(home))
    try:
        seen: list[str] = []
        stored = await client.put(f"{API}/models/keys/deepseek", json={"key": KEY})
        assert stored.status_code == 204 and stored.content == b""
        status = await client.get(f"{API}/models/keys")
        assert status.json() == {
            "keys": {"deepseek": {"stored": True, "environment": False}, "openai": {"stored": False, "environment": False}}
        }
        listed = await client.get(f"{API}/models")
        assert next(p for p in listed.json()["providers"] if p["provider"] == "deepseek")["configured"] is True
        sid = await new_story(client)  # something in the log after the key was stored
        seen += [stored.text, status.text, listed.text, (await client.get(f"{API}/sessions/{sid}/log")).text]
        seen += [(await client.get(f"{API}/settings")).text, (await client.get("/settings")).text]
        assert not [text for text in seen if KEY in text]
        events = json.dumps([e.payload for e in await rt.service.events(sid)])
        assert KEY not in events
        on_disk = [p for p in tmp_path.rglob("*") if p.is_file() and p.name != "secrets.json" and KEY.encode() in p.read_bytes()]
        assert on_disk == []  # only the secrets file holds it
        assert stat.S_IMODE((home / "secrets.json").stat().st_mode) == 0o600
        unknown = await client.put(f"{API}/models/keys/nowhere", json={"key": KEY})
        assert unknown.status_code == 404 and KEY not in unknown.text
        blank = await client.put(f"{API}/models/keys/openai", json={"key": "  "})
        assert blank.status_code == 422 and blank.json()["pointer"] == "/key"
        assert (await client.delete(f"{API}/models/keys/deepseek")).status_code == 204
        assert (await client.get(f"{API}/models/keys")).json()["keys"]["deepseek"]["stored"] is False
    finally:
        use_key_file(None)
