"""The SSE tail on a real uvicorn server: a turn streamed live, resume after a forced disconnect
mid-reply (no gap, no duplicate, checked against the log), abort, and streams closed on shutdown."""

from __future__ import annotations

import json
import time
from typing import Any, Iterator

import httpx
import pytest

from roleplay.testing.fake_openai import FakeOpenAI, serve_fake_openai
from web.web_support import LiveServer

API = "/api/v1"


class Reader:
    """The messages of an open SSE response, one at a time."""

    def __init__(self, response: httpx.Response) -> None:
        self.lines = response.iter_lines()

    def next(self) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        for line in self.lines:
            if not line:
                if "data" in fields:
                    fields["data"] = json.loads(fields["data"])
                    return fields
                fields = {}
                continue
            if line.startswith(":"):
                continue  # ": connected", ": ping"
            key, _, value = line.partition(": ")
            fields[key] = value
        raise EOFError


def until(reader: Reader, predicate: Any) -> list[dict[str, Any]]:
    seen = []
    while True:
        message = reader.next()
        seen.append(message)
        if predicate(message):
            return seen


def new_story(client: httpx.Client, **body: Any) -> str:
    r = client.post(f"{API}/sessions", json={"sample": True, **body})
    assert r.status_code == 201, r.text
    return str(r.json()["sessionId"])


def turn_end(turn_id: str) -> Any:
    return lambda m: m.get("event") == "turn/end" and m["data"]["payload"]["turnId"] == turn_id


@pytest.fixture
def client(live_server: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live_server.base, timeout=httpx.Timeout(30.0)) as c:
        yield c


@pytest.fixture
def slow_provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    with serve_fake_openai(flavor="openai", chunk_delay=0.05) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        yield fake


def test_a_demo_turn_streams_its_events_in_seq_order_with_chunks_between(client: httpx.Client) -> None:
    sid = new_story(client)
    with client.stream("GET", f"{API}/sessions/{sid}/events") as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        reader = Reader(r)
        turn_id = client.post(f"{API}/sessions/{sid}/turns", json={"text": "I knock."}).json()["turnId"]
        seen = until(reader, turn_end(turn_id))
    durable = [m for m in seen if "id" in m]
    chunks = [m for m in seen if m.get("event") == "assistant/chunk"]
    assert chunks and all("id" not in c and c["data"]["turnId"] == turn_id for c in chunks)
    ids = [int(m["id"]) for m in durable]
    assert ids == list(range(ids[0], ids[-1] + 1))
    log = client.get(f"{API}/sessions/{sid}/log", params={"after": ids[0] - 1}).json()
    assert [e["seq"] for e in log] == ids and [m["data"] for m in durable] == log
    assert "[demo" in "".join(c["data"]["text"] for c in chunks)


def test_resume_after_a_forced_disconnect_mid_reply_has_no_gap_and_no_duplicate(
    client: httpx.Client, live_server: LiveServer, slow_provider: FakeOpenAI
) -> None:
    sid = new_story(client, model="openai/fake")
    with client.stream("GET", f"{API}/sessions/{sid}/events", params={"after": 0}) as r:
        reader = Reader(r)
        turn_id = client.post(f"{API}/sessions/{sid}/turns", json={"text": "Tell me everything."}).json()["turnId"]
        first = until(reader, lambda m: m.get("event") == "assistant/chunk")
    # the connection is closed mid-reply; the turn goes on
    last_id = max(int(m["id"]) for m in first if "id" in m)
    assert client.get(f"{API}/sessions/{sid}/running").json()["turnId"] == turn_id
    with client.stream("GET", f"{API}/sessions/{sid}/events", headers={"Last-Event-ID": str(last_id)}) as r:
        rest = until(Reader(r), turn_end(turn_id))
    ids = [int(m["id"]) for m in first + rest if "id" in m]
    log = client.get(f"{API}/sessions/{sid}/log").json()
    end = next(e["seq"] for e in log if e["type"] == "turn/end" and e["payload"]["turnId"] == turn_id)
    assert ids == list(range(1, end + 1))  # every event once, in order, across the two connections
    assert [m["data"] for m in first + rest if "id" in m] == log[:end]


def test_abort_over_the_wire_ends_the_turn_aborted_on_the_stream(
    client: httpx.Client, live_server: LiveServer, slow_provider: FakeOpenAI
) -> None:
    sid = new_story(client, model="openai/fake")
    with client.stream("GET", f"{API}/sessions/{sid}/events") as r:
        reader = Reader(r)
        turn_id = client.post(f"{API}/sessions/{sid}/turns", json={"text": "Go on and on."}).json()["turnId"]
        until(reader, lambda m: m.get("event") == "assistant/chunk")
        assert client.post(f"{API}/sessions/{sid}/abort").json()["turnId"] == turn_id
        end = until(reader, turn_end(turn_id))[-1]
    assert end["data"]["payload"]["outcome"] == "aborted"


def test_pings_keep_an_idle_stream_open_and_shutdown_closes_it(client: httpx.Client, live_server: LiveServer) -> None:
    sid = new_story(client)
    with client.stream("GET", f"{API}/sessions/{sid}/events") as r:
        lines = r.iter_lines()
        assert next(lines) == ": connected"
        started = time.monotonic()
        assert next(lines) == "" and next(lines) == ": ping"  # ping_seconds is 0.5 in the tests
        assert time.monotonic() - started < 5
        live_server.state.begin_shutdown()
        rest = list(lines)  # the server ends the stream
    assert all(line in ("", ": ping") for line in rest)


def test_frames_durable_events_with_their_seq_and_chunks_without_an_id() -> None:
    from roleplay.harness.events import Event
    from roleplay.harness.notify import Notification
    from roleplay.web.sse import frame

    event = Event("ses_1", 7, "turn/end", {"turnId": "turn_1", "outcome": "completed"}, "2026-01-01T00:00:00Z")
    text = frame(Notification("event", event)).decode()
    assert text.startswith("id: 7\nevent: turn/end\ndata: {") and text.endswith("}\n\n")
    assert json.loads(text.split("data: ", 1)[1])["payload"]["outcome"] == "completed"
    chunk = frame(Notification("chunk", data={"type": "assistant/chunk", "turnId": "turn_1", "text": "a\nb"})).decode()
    assert chunk.startswith("event: assistant/chunk\ndata: ") and "id:" not in chunk and chunk.count("\n\n") == 1


def test_a_client_that_stops_reading_is_dropped_without_holding_the_stream(db_url: str) -> None:
    import asyncio

    from roleplay.harness.events import EventDraft
    from roleplay.harness.store import open_store
    from roleplay.web.sse import EventStream

    async def scenario() -> float:
        store = open_store(db_url)
        await store.migrate()
        try:
            sid = (await store.create_session(preset="bench")).id
            sent: list[bytes] = []
            stuck = asyncio.Event()

            async def send(message: dict[str, Any]) -> None:
                sent.append(message.get("body", b""))
                if len(sent) > 2:  # the response start and ": connected" went out; then the socket is full
                    await stuck.wait()

            async def receive() -> dict[str, Any]:
                await asyncio.Event().wait()  # never disconnects on its own
                return {"type": "http.disconnect"}

            stream = EventStream(store, sid, 0, ping_seconds=0.05, send_timeout=0.3)
            t0 = time.monotonic()
            task = asyncio.ensure_future(stream({"type": "http"}, receive, send))
            await store.append(sid, 0, [EventDraft("command/done", {"commandId": "c1", "kind": "success"})])
            await asyncio.wait_for(task, 5)
            return time.monotonic() - t0
        finally:
            await store.close()

    assert asyncio.run(scenario()) < 3
