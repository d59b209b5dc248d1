"""Agent mode over HTTP: execution mode and Writer route per story, the sub-agent catalog with
revision CAS, and 404 while the sub-agent manager is off."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from web.web_support import api_client, new_story

pytestmark = pytest.mark.anyio

API = "/api/v1"


async def test_mode_and_writer_route(api: tuple[httpx.AsyncClient, Any]) -> None:
    client, _ = api
    sid = await new_story(client)
    revision = (await client.get(f"{API}/sessions/{sid}/profile")).json()["revision"]
    agent = await client.put(f"{API}/sessions/{sid}/mode", json={"mode": "agent", "revision": revision})
    assert agent.status_code == 200 and agent.json()["executionMode"] == "agent"
    stale = await client.put(f"{API}/sessions/{sid}/mode", json={"mode": "chat", "revision": revision})
    assert stale.status_code == 409
    bad = await client.put(f"{API}/sessions/{sid}/mode", json={"mode": "dance"})
    assert bad.status_code == 422 and bad.json()["code"] == "mode.invalid"
    routed = await client.put(f"{API}/sessions/{sid}/writer-route", json={"route": "demo"})
    assert routed.status_code == 200 and routed.json()["writerRoute"]["provider"] == "demo"
    assert (await client.put(f"{API}/sessions/ses_nope/mode", json={"mode": "agent"})).status_code == 404


async def test_subagent_catalog_crud_with_revisions(api: tuple[httpx.AsyncClient, Any]) -> None:
    client, _ = api
    catalog = (await client.get(f"{API}/subagents")).json()
    assert catalog["items"] and catalog["revision"] >= 1  # the built-in specialists, seeded on first read
    item = {
        "name": "Cartographer",
        "usageContract": "Call to draw maps.",
        "instructions": "Draw the map as text.",
        "revision": catalog["revision"],
    }
    added = await client.post(f"{API}/subagents", json=item)
    assert added.status_code == 201 and added.json()["items"][-1]["name"] == "Cartographer"
    stale = await client.post(f"{API}/subagents", json={**item, "name": "Other"})
    assert stale.status_code == 409 and stale.json()["code"] == "subagents.conflict"
    dup = await client.post(f"{API}/subagents", json={**item, "revision": None})
    assert dup.status_code == 409 and dup.json()["code"] == "subagents.duplicate_name"
    edited = await client.put(f"{API}/subagents/cartographer", json={"enabled": False})
    assert edited.status_code == 200 and edited.json()["items"][-1]["enabled"] is False
    missing = await client.put(f"{API}/subagents/nobody", json={"enabled": False})
    assert missing.status_code == 404 and missing.json()["code"] == "subagents.unknown"
    invalid = await client.post(f"{API}/subagents", json={"name": "X", "usageContract": "", "instructions": "y"})
    assert invalid.status_code == 422 and invalid.json()["code"] == "subagents.invalid" and invalid.json()["pointer"] == "/usageContract"
    gone = await client.delete(f"{API}/subagents/Cartographer")
    assert gone.status_code == 200 and all(i["name"] != "Cartographer" for i in gone.json()["items"])


async def test_the_catalog_is_404_while_its_feature_is_off(db_url: str) -> None:
    async with api_client(db_url) as (client, _):
        assert (await client.post(f"{API}/features/rp-subagent-manager/disable")).status_code == 200
    async with api_client(db_url) as (client, _):
        off = await client.get(f"{API}/subagents")
        assert off.status_code == 404 and off.json()["code"] == "feature.off"
