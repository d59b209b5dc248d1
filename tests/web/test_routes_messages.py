"""Message actions over HTTP (edit, delete, undo, swipe), state and activity, reply options,
metrics and the prompt preview."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from web.web_support import api_client, new_story, turn_in_another_process, wait_idle

pytestmark = pytest.mark.anyio

API = "/api/v1"


async def played(client: httpx.AsyncClient, text: str = "I knock on the door.") -> str:
    sid = await new_story(client)
    assert (await client.post(f"{API}/sessions/{sid}/turns", json={"text": text})).status_code == 202
    await wait_idle(client, sid)
    return sid


async def texts(client: httpx.AsyncClient, sid: str) -> list[str]:
    return [m["text"] for m in (await client.get(f"{API}/sessions/{sid}/messages")).json()["messages"]]


async def test_edit_delete_and_undo(api: tuple[httpx.AsyncClient, Any]) -> None:
    client, _ = api
    sid = await played(client)
    listed = (await client.get(f"{API}/sessions/{sid}/messages")).json()["messages"]
    assert [m["number"] for m in listed] == [1, 2, 3] and listed[1]["text"] == "I knock on the door."
    edited = await client.put(f"{API}/sessions/{sid}/messages/2", json={"text": "I knock twice."})
    assert edited.status_code == 200 and edited.json()["messageId"] == listed[1]["messageId"]
    assert (await texts(client, sid))[1] == "I knock twice."
    by_id = await client.put(f"{API}/sessions/{sid}/messages/{listed[0]['messageId']}", json={"text": "Fog."})
    assert by_id.status_code == 200 and (await texts(client, sid))[0] == "Fog."
    missing = await client.put(f"{API}/sessions/{sid}/messages/99", json={"text": "x"})
    assert missing.status_code in (404, 422) and missing.json()["code"].startswith("message.")
    no_text = await client.put(f"{API}/sessions/{sid}/messages/2", json={})
    assert no_text.status_code == 422 and no_text.json()["pointer"] == "/text"
    deleted = await client.delete(f"{API}/sessions/{sid}/messages/3")
    assert deleted.status_code == 200 and deleted.json()["deleted"]
    assert len(await texts(client, sid)) == 2
    undone = await client.post(f"{API}/sessions/{sid}/undo")
    assert undone.status_code == 200 and await texts(client, sid) == ["Fog."]
    nothing = await client.post(f"{API}/sessions/{sid}/undo")
    assert 400 <= nothing.status_code < 500 and nothing.json()["code"]


async def test_swipe_between_regenerated_alternatives(api: tuple[httpx.AsyncClient, Any]) -> None:
    client, _ = api
    sid = await played(client)
    first = (await texts(client, sid))[-1]
    assert (await client.post(f"{API}/sessions/{sid}/regenerate")).status_code == 202
    await wait_idle(client, sid)
    left = await client.post(f"{API}/sessions/{sid}/swipe", json={"direction": "left"})
    assert left.status_code == 200 and left.json()["index"] == 0 and left.json()["count"] == 2
    assert left.json()["reply"]["text"] == first == (await texts(client, sid))[-1]
    second = await client.post(f"{API}/sessions/{sid}/swipe", json={"direction": 2})
    assert second.json()["index"] == 1
    bad = await client.post(f"{API}/sessions/{sid}/swipe", json={"direction": "up"})
    assert bad.status_code == 422 and bad.json()["pointer"].startswith("/direction")
    out = await client.post(f"{API}/sessions/{sid}/swipe", json={"direction": 9})
    assert 400 <= out.status_code < 500 and out.json()["code"]


async def test_state_activity_reply_options_and_metrics(api: tuple[httpx.AsyncClient, Any]) -> None:
    client, _ = api
    sid = await played(client)
    state = (await client.get(f"{API}/sessions/{sid}/state")).json()
    assert state["values"]["story"] and state["document"]["namespaces"]["story"]["value"] == state["values"]["story"]
    assert state["lastChanges"]["namespaces"]["story"]  # the demo turn committed a state change
    activity = (await client.get(f"{API}/sessions/{sid}/activity")).json()["activity"]
    assert activity["namespaces"]["story"]
    options = (await client.get(f"{API}/sessions/{sid}/reply-options")).json()["replyOptions"]
    assert options and options[-1]["options"]
    metrics = (await client.get(f"{API}/sessions/{sid}/metrics", params={"price": "demo/demo=1,2"})).json()
    assert metrics["replies"][0]["route"] == "demo/demo" and metrics["replies"][0]["tokensIn"] > 0
    bad_price = await client.get(f"{API}/sessions/{sid}/metrics", params={"price": "nonsense"})
    assert 400 <= bad_price.status_code < 500 and bad_price.json()["code"]
    assert (await client.get(f"{API}/sessions/ses_nope/state")).status_code == 404


async def test_prompt_preview_writes_nothing(api: tuple[httpx.AsyncClient, Any]) -> None:
    client, _ = api
    sid = await played(client)
    head = len((await client.get(f"{API}/sessions/{sid}/log")).json())
    view = (await client.get(f"{API}/sessions/{sid}/prompt", params={"text": "I look at the sea."})).json()
    assert "I look at the sea." in view["writer"]["user"] and view["writer"]["route"] == "demo/demo"
    assert view["parent"]["system"] and view["participation"] == "adaptive" and view["writer"]["sections"]
    assert len((await client.get(f"{API}/sessions/{sid}/log")).json()) == head
    assert (await client.get(f"{API}/sessions/ses_nope/prompt")).status_code == 404


async def test_state_and_reply_options_are_404_while_their_feature_is_off(db_url: str) -> None:
    from web.web_support import api_client

    async with api_client(db_url) as (client, _):
        sid = await played(client)
        assert (await client.post(f"{API}/features/rp-state/disable")).status_code == 200
        assert (await client.post(f"{API}/features/rp-reply-options/disable")).status_code == 200
    async with api_client(db_url) as (client, _):  # a server started after the change runs without them
        off = await client.get(f"{API}/sessions/{sid}/state")
        assert off.status_code == 404 and off.json()["code"] == "feature.off" and off.json()["details"]["feature"] == "rp-state"
        options = await client.get(f"{API}/sessions/{sid}/reply-options")
        assert options.status_code == 404 and options.json()["details"]["feature"] == "rp-reply-options"
        assert (await client.get(f"{API}/sessions/{sid}/messages")).status_code == 200


async def test_messages_and_the_chat_page_show_the_turn_a_run_in_another_process_writes(tmp_path: Path) -> None:
    async with api_client(f"sqlite:///{tmp_path / 'roleplay.db'}") as (client, _):
        sid = await new_story(client)
        idle = (await client.get(f"{API}/sessions/{sid}/messages")).json()
        assert idle["running"] is False and idle["activeTurnId"] is None
        assert all(m["active"] is False for m in idle["messages"] if "turnId" in m)
        with turn_in_another_process(tmp_path, sid, "I knock on the iron door.") as proc:
            deadline = time.monotonic() + 60
            # The lease comes before the turn is logged: wait for both.
            while not (
                (during := (await client.get(f"{API}/sessions/{sid}/messages")).json())["running"]
                and during["messages"][-1]["text"] == "I knock on the iron door."
            ):
                assert proc.poll() is None and time.monotonic() < deadline, "the run never showed as active"
                await asyncio.sleep(0.05)
            mine = during["messages"][-1]
            assert mine["active"] is True and mine["turnId"] == during["activeTurnId"]
            assert not any(m.get("active") for m in during["messages"][:-1])
            running = (await client.get(f"{API}/sessions/{sid}/running")).json()
            assert running["leased"] is True and running["turnId"] is None  # not this server's run: it cannot stop it
            page = (await client.get(f"/s/{sid}")).text
            assert 'data-elsewhere="true"' in page and f'data-running="{mine["turnId"]}"' in page
            assert 'data-active="true"' in page and "a run is writing this turn" in page
            assert '<p id="writing-elsewhere" class="writing" role="status" aria-live="polite">' in page  # shown
        after = (await client.get(f"{API}/sessions/{sid}/messages")).json()
        assert after["running"] is False and after["activeTurnId"] is None and not any(m.get("active") for m in after["messages"])
        assert (await client.get(f"{API}/sessions/{sid}/running")).json()["leased"] is False
        page = (await client.get(f"/s/{sid}")).text
        assert 'data-elsewhere="false"' in page and 'data-active="true"' not in page
