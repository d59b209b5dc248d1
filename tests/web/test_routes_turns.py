"""Turns over HTTP: 202 with the turn id, the route used, run.busy, abort, and the SSE catch-up."""

from __future__ import annotations

import json
from typing import Any, Iterator

import httpx
import pytest

from roleplay.testing.fake_openai import FakeOpenAI, serve_fake_openai
from web.web_support import new_story, wait_idle

pytestmark = pytest.mark.anyio

API = "/api/v1"


def parse_sse(text: str) -> list[dict[str, Any]]:
    """The messages of an SSE body: ``{"id", "event", "data"}`` each (comments dropped)."""
    out = []
    for block in text.split("\n\n"):
        fields: dict[str, Any] = {}
        for line in block.splitlines():
            if not line or line.startswith(":"):
                continue
            key, _, value = line.partition(": ")
            fields[key] = value
        if fields:
            fields["data"] = json.loads(fields["data"])
            out.append(fields)
    return out


@pytest.fixture
def slow_provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    """An OpenAI-compatible fake that takes 50 ms per streamed frame: a turn lasts seconds."""
    with serve_fake_openai(flavor="openai", chunk_delay=0.05) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        yield fake


async def test_a_turn_is_accepted_with_its_id_and_plays_on_the_servers_default(api: tuple[httpx.AsyncClient, Any]) -> None:
    client, _ = api
    sid = await new_story(client)
    r = await client.post(f"{API}/sessions/{sid}/turns", json={"text": "I knock on the door."})
    assert r.status_code == 202
    body = r.json()
    assert body["sessionId"] == sid and body["turnId"].startswith("turn_") and body["kind"] == "turn"
    assert r.headers["location"] == body["events"] == f"{API}/sessions/{sid}/events"
    await wait_idle(client, sid)
    log = (await client.get(f"{API}/sessions/{sid}/log")).json()
    starts = [e for e in log if e["type"] == "turn/start" and e["payload"]["turnId"] == body["turnId"]]
    ends = [e for e in log if e["type"] == "turn/end" and e["payload"]["turnId"] == body["turnId"]]
    assert len(starts) == 1 and ends[0]["payload"]["outcome"] == "completed"
    assert any(e["type"] == "model/request" and "demo" in json.dumps(e["payload"]) for e in log)  # the server's default: demo
    messages = (await client.get(f"{API}/sessions/{sid}/messages")).json()["messages"]
    assert messages[-2]["text"] == "I knock on the door." and "[demo" in messages[-1]["text"]


async def test_turn_errors(api: tuple[httpx.AsyncClient, Any]) -> None:
    client, _ = api
    missing = await client.post(f"{API}/sessions/ses_nope/turns", json={"text": "hi"})
    assert missing.status_code == 404 and missing.json()["code"] == "session.not_found"
    sid = await new_story(client)
    no_text = await client.post(f"{API}/sessions/{sid}/turns", json={})
    assert no_text.status_code == 422 and no_text.json()["problems"][0]["pointer"] == "/text"
    bad_route = await client.post(f"{API}/sessions/{sid}/turns", json={"text": "hi", "model": "nowhere/x"})
    assert bad_route.status_code in (400, 404, 422) and bad_route.json()["code"].startswith("model.")
    await client.post(f"{API}/sessions/{sid}/archive")
    archived = await client.post(f"{API}/sessions/{sid}/turns", json={"text": "hi"})
    assert archived.status_code in (400, 409, 422) and "archived" in archived.json()["code"]
    assert (await client.post(f"{API}/sessions/{sid}/abort")).json()["code"] == "run.not_running"


async def test_a_second_turn_while_one_runs_is_409_busy_and_abort_ends_it_aborted(
    api: tuple[httpx.AsyncClient, Any], slow_provider: FakeOpenAI
) -> None:
    client, _ = api
    sid = await new_story(client, model="openai/fake")
    first = await client.post(f"{API}/sessions/{sid}/turns", json={"text": "Tell me a long story."})
    assert first.status_code == 202
    turn_id = first.json()["turnId"]
    busy = await client.post(f"{API}/sessions/{sid}/turns", json={"text": "and another"})
    assert busy.status_code == 409 and busy.json()["code"] == "run.busy"
    for action in (client.post(f"{API}/sessions/{sid}/regenerate"), client.delete(f"{API}/sessions/{sid}/messages/1")):
        refused = await action
        assert refused.status_code == 409 and refused.json()["code"] == "run.busy"
    assert (await client.get(f"{API}/sessions/{sid}/running")).json()["turnId"] == turn_id
    wrong = await client.post(f"{API}/sessions/{sid}/abort", json={"turnId": "turn_other"})
    assert wrong.status_code == 404 and wrong.json()["code"] == "run.not_running"
    aborted = await client.post(f"{API}/sessions/{sid}/abort", json={"turnId": turn_id})
    assert aborted.status_code == 200 and aborted.json()["turnId"] == turn_id
    await wait_idle(client, sid)
    log = (await client.get(f"{API}/sessions/{sid}/log")).json()
    end = next(e for e in log if e["type"] == "turn/end" and e["payload"]["turnId"] == turn_id)
    assert end["payload"]["outcome"] == "aborted"


async def test_the_event_catch_up_sends_the_log_in_seq_order_and_resumes_exactly(api: tuple[httpx.AsyncClient, Any]) -> None:
    client, _ = api
    sid = await new_story(client)
    await client.post(f"{API}/sessions/{sid}/turns", json={"text": "hello"})
    await wait_idle(client, sid)
    head = len((await client.get(f"{API}/sessions/{sid}/log")).json())
    r = await client.get(f"{API}/sessions/{sid}/events", params={"after": 0, "follow": False})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    events = parse_sse(r.text)
    assert [int(e["id"]) for e in events] == list(range(1, head + 1))
    assert all(e["event"] == e["data"]["type"] and e["data"]["seq"] == int(e["id"]) for e in events)
    resumed = parse_sse((await client.get(f"{API}/sessions/{sid}/events", params={"follow": False}, headers={"Last-Event-ID": "5"})).text)
    assert [int(e["id"]) for e in resumed] == list(range(6, head + 1))
    # Last-Event-ID wins over ?after
    both = await client.get(f"{API}/sessions/{sid}/events", params={"after": 1, "follow": False}, headers={"Last-Event-ID": str(head - 1)})
    assert [int(e["id"]) for e in parse_sse(both.text)] == [head]
    bad = await client.get(f"{API}/sessions/{sid}/events", headers={"Last-Event-ID": "five"})
    assert bad.status_code == 422 and bad.json()["code"] == "events.invalid_cursor"
    ahead = await client.get(f"{API}/sessions/{sid}/events", params={"after": head + 10})
    assert ahead.status_code == 422 and ahead.json()["code"] == "events.cursor_ahead"
    assert (await client.get(f"{API}/sessions/ses_nope/events")).status_code == 404


async def test_continue_and_regenerate_are_turns_too(api: tuple[httpx.AsyncClient, Any]) -> None:
    client, _ = api
    sid = await new_story(client)
    nothing = await client.post(f"{API}/sessions/{sid}/regenerate")
    assert nothing.status_code in (400, 404, 409, 422) and nothing.json()["code"].startswith("message.")
    await client.post(f"{API}/sessions/{sid}/turns", json={"text": "hello"})
    await wait_idle(client, sid)
    regen = await client.post(f"{API}/sessions/{sid}/regenerate", json={})
    assert regen.status_code == 202 and regen.json()["kind"] == "regenerate"
    await wait_idle(client, sid)
    listed = (await client.get(f"{API}/sessions/{sid}/messages")).json()["messages"]
    assert listed[-1].get("alternatives")
    cont = await client.post(f"{API}/sessions/{sid}/continue")
    assert cont.status_code == 202 and cont.json()["kind"] == "continue"
    await wait_idle(client, sid)
    log = (await client.get(f"{API}/sessions/{sid}/log")).json()
    assert [e["payload"]["outcome"] for e in log if e["type"] == "turn/end"][-2:] == ["completed", "completed"]


async def test_impersonate_drafts_without_writing_to_the_story(api: tuple[httpx.AsyncClient, Any]) -> None:
    client, _ = api
    sid = await new_story(client)
    before = len((await client.get(f"{API}/sessions/{sid}/messages")).json()["messages"])
    r = await client.post(f"{API}/sessions/{sid}/impersonate")
    assert r.status_code == 200 and r.json()["draft"]
    assert len((await client.get(f"{API}/sessions/{sid}/messages")).json()["messages"]) == before
