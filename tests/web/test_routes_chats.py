"""Plain chats over HTTP: create, send (202), the reply on the event stream, refusals."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from web.web_support import new_story, wait_idle

pytestmark = pytest.mark.anyio

API = "/api/v1"


async def test_a_chat_message_is_a_turn_with_the_model(api: tuple[httpx.AsyncClient, Any]) -> None:
    client, _ = api
    made = await client.post(f"{API}/chats", json={"model": "demo"})
    assert made.status_code == 201 and made.json()["route"] == "demo/demo"
    sid = made.json()["sessionId"]
    sent = await client.post(f"{API}/chats/{sid}/messages", json={"text": "What is a lighthouse?"})
    assert sent.status_code == 202 and sent.json()["kind"] == "chat"
    await wait_idle(client, sid)
    log = (await client.get(f"{API}/sessions/{sid}/log")).json()
    end = next(e for e in log if e["type"] == "turn/end" and e["payload"]["turnId"] == sent.json()["turnId"])
    assert end["payload"]["outcome"] == "completed"
    assert any(e["type"] == "assistant/message" for e in log)
    listed = (await client.get(f"{API}/sessions")).json()
    assert any(s["id"] == sid and s["preset"] == "chat" for s in listed)


async def test_chat_refusals(api: tuple[httpx.AsyncClient, Any]) -> None:
    client, _ = api
    story = await new_story(client)
    not_chat = await client.post(f"{API}/chats/{story}/messages", json={"text": "hi"})
    assert not_chat.status_code == 422 and not_chat.json()["code"] == "chat.not_a_chat"
    sid = (await client.post(f"{API}/chats")).json()["sessionId"]
    empty = await client.post(f"{API}/chats/{sid}/messages", json={"text": "  "})
    assert empty.status_code == 422 and empty.json()["code"] == "chat.empty_message"
    assert (await client.post(f"{API}/chats/ses_nope/messages", json={"text": "hi"})).status_code == 404
    bad = await client.post(f"{API}/chats", json={"model": "nowhere/x"})
    assert 400 <= bad.status_code < 500 and bad.json()["code"].startswith("model.")
