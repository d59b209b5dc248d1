"""The event stream served before FastAPI's middleware and router (``app.App``): the same answers
as the declared route for every request, refusals and errors included; the token still required;
the route still documented; and an idle stream keeping few objects alive, which is why it exists."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from roleplay.web.app import App, create_app
from web.web_support import api_client, config, new_story, opened_runtime

pytestmark = pytest.mark.anyio

API = "/api/v1"
TOKEN = "s3cret-token"


def through_the_stack(app: App) -> Any:
    """The app as it was before: every request through FastAPI's middleware and router."""

    async def asgi(scope: Any, receive: Any, send: Any) -> None:
        await FastAPI.__call__(app, scope, receive, send)

    return asgi


class Client:
    """The ASGI side of one idle stream: what was sent, and a disconnect delivered on demand."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.gone = asyncio.Event()

    async def receive(self) -> dict[str, Any]:
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)

    def connected(self) -> bool:
        return any(m.get("body") == b": connected\n\n" for m in self.sent)


def events_scope(session_id: str, query: bytes = b"after=0", headers: list[tuple[bytes, bytes]] | None = None) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": f"{API}/sessions/{session_id}/events",
        "raw_path": f"{API}/sessions/{session_id}/events".encode(),
        "root_path": "",
        "query_string": query,
        "headers": [(b"host", b"testserver"), *(headers or [])],
        "client": ("127.0.0.1", 1234),
        "server": ("testserver", 80),
    }


async def tracked_per_stream(app: Any, session_ids: list[str]) -> float:
    """GC-tracked objects each idle open stream keeps alive (the ASGI app's own, no server's)."""
    clients = [Client() for _ in session_ids]
    gc.collect()
    before = len(gc.get_objects())
    tasks = [asyncio.ensure_future(app(events_scope(sid), c.receive, c.send)) for sid, c in zip(session_ids, clients)]
    for _ in range(500):
        if all(c.connected() for c in clients):
            break
        await asyncio.sleep(0.01)
    assert all(c.connected() for c in clients) and all(c.sent[0]["status"] == 200 for c in clients)
    for _ in range(5):
        await asyncio.sleep(0.01)  # settled
    gc.collect()
    per_stream = (len(gc.get_objects()) - before) / len(session_ids)
    for c in clients:
        c.gone.set()
    await asyncio.wait_for(asyncio.gather(*tasks), 10)
    return per_stream


async def test_an_idle_stream_keeps_a_fraction_of_the_objects_it_kept_through_the_stack(db_url: str) -> None:
    async with api_client(db_url) as (client, rt):
        app = client._transport.app  # type: ignore[attr-defined]
        assert isinstance(app, App)
        sids = [await new_story(client) for _ in range(20)]
        stack = await tracked_per_stream(through_the_stack(app), sids)
        direct = await tracked_per_stream(app, sids)
    # Measured here (this test's own client objects included, uvicorn's per-connection ones not):
    # about 255 through the stack, 29 served directly. Each full collection walks every one.
    assert direct < 45 and direct < stack / 4, (direct, stack)


async def same_answer(direct: httpx.AsyncClient, stack: httpx.AsyncClient, path: str, **kw: Any) -> httpx.Response:
    a = await asyncio.wait_for(direct.get(path, **kw), 10)
    b = await asyncio.wait_for(stack.get(path, **kw), 10)
    assert (a.status_code, a.headers.get("content-type"), a.content) == (b.status_code, b.headers.get("content-type"), b.content), path
    return a


async def test_every_request_has_the_routes_answer_refusals_and_errors_included(db_url: str) -> None:
    async with api_client(db_url) as (client, rt):
        app = client._transport.app  # type: ignore[attr-defined]
        sid = await new_story(client)
        head = await rt.store.head(sid)
        stack = httpx.AsyncClient(transport=httpx.ASGITransport(app=through_the_stack(app)), base_url="http://testserver")
        events = f"{API}/sessions/{sid}/events"
        async with stack:
            whole = await same_answer(client, stack, events, params={"after": 0, "follow": False})
            assert whole.status_code == 200 and whole.text.count("\nid: ") + whole.text.startswith("id: ") == head
            for query in (
                "after=0&follow=false",
                "after=2&follow=0",
                "follow=false",
                "after=&follow=false",
                "after=-1&follow=false",
                "after=%2B1&follow=false",
                "after=1.0&follow=false",
                "after=1&after=2&follow=false",
                "after=0&follow=FALSE",
                "after=0&follow=no",
                "after=0&follow=maybe",
                "after=0&follow=true&follow=false",
                "after=0&follow=",
                f"after={head + 1}&follow=false",
                "after=99999999999999999999999&follow=false",
                "after=0&follow=false&other=1",
            ):
                await same_answer(client, stack, f"{events}?{query}")
            for value in ("3", " 3 ", "x", "-1", ""):
                await same_answer(client, stack, f"{events}?follow=false", headers={"Last-Event-ID": value})
            await same_answer(client, stack, f"{events}?follow=false", headers=[("Last-Event-ID", "1"), ("Last-Event-ID", "x")])
            unknown = await same_answer(client, stack, f"{API}/sessions/ses_nope/events?follow=false")
            assert unknown.status_code == 404 and unknown.json()["code"] == "session.not_found"
            bad = await same_answer(client, stack, f"{events}?after=-1")
            assert bad.status_code == 422 and bad.json()["code"] == "request.invalid" and bad.json()["pointer"] == "/query/after"
            ahead = await same_answer(client, stack, f"{events}?after={head + 1}")
            assert ahead.status_code == 422 and ahead.json()["code"] == "events.cursor_ahead"
            for path in (f"{events}/", f"{API}/sessions/{sid}/events/x", f"{API}/sessions//events"):
                await same_answer(client, stack, path)
            assert (await client.post(events)).status_code == (await stack.post(events)).status_code == 405


async def test_the_token_is_required_on_the_stream_bearer_or_cookie(db_url: str) -> None:
    async with api_client(db_url, token=TOKEN) as (client, _):
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        sid = (await client.post(f"{API}/sessions", json={"sample": True}, headers=bearer)).json()["sessionId"]
        events = f"{API}/sessions/{sid}/events"
        for headers in ({}, {"Authorization": "Bearer nope"}, {"Cookie": "rp_token=nope"}, {"Accept": "text/html"}):
            refused = await client.get(events, params={"follow": False}, headers=headers)
            assert refused.status_code == 401 and refused.json()["code"] == "http.auth_required", headers
            assert refused.headers["www-authenticate"] == "Bearer"
        unknown = await client.get(f"{API}/sessions/ses_nope/events", params={"follow": False})
        assert unknown.status_code == 401  # no token, no word on which sessions exist
        for headers in (bearer, {"Cookie": f"rp_token={TOKEN}"}):
            ok = await client.get(events, params={"after": 0, "follow": False}, headers=headers)
            assert ok.status_code == 200 and ok.headers["content-type"].startswith("text/event-stream") and "id: 1\n" in ok.text


async def test_a_body_over_the_cap_is_413_on_the_stream_too(db_url: str) -> None:
    async with api_client(db_url, max_body_bytes=100) as (client, _):
        sid = await new_story(client)
        r = await client.request("GET", f"{API}/sessions/{sid}/events", params={"follow": False}, content=b"x" * 1000)
        assert r.status_code == 413 and r.json()["code"] == "http.too_large"


async def test_the_route_is_documented_and_the_router_sees_it_served(db_url: str) -> None:
    async with opened_runtime(db_url) as rt:
        app = create_app(rt, config())
        spec = app.openapi()
        op = spec["paths"][f"{API}/sessions/{{session_id}}/events"]["get"]
        assert "text/event-stream" in op["responses"]["200"]["content"]
        assert {p["name"] for p in op["parameters"]} >= {"session_id", "after", "follow", "last-event-id"}
        sid = str((await rt.store.create_session(preset="p")).id)
        client = Client()
        scope = events_scope(sid, b"after=0&follow=false")
        await asyncio.wait_for(app(scope, client.receive, client.send), 10)
        assert scope["endpoint"] is app.events_endpoint and scope["path_params"] == {"session_id": sid}
        assert client.sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}
        await app.state.web.runs.shutdown(5)


def test_on_a_real_server_the_token_guards_the_stream_which_pings_and_ends_at_shutdown(db_url: str) -> None:
    from web.web_support import start_live_server

    with start_live_server(db_url, token=TOKEN) as server, httpx.Client(base_url=server.base, timeout=30) as client:
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        sid = client.post(f"{API}/sessions", json={"sample": True}, headers=bearer).json()["sessionId"]
        refused = client.get(f"{API}/sessions/{sid}/events")
        assert refused.status_code == 401 and refused.json()["code"] == "http.auth_required"
        with client.stream("GET", f"{API}/sessions/{sid}/events", headers={"Cookie": f"rp_token={TOKEN}"}) as r:
            assert r.status_code == 200
            lines = r.iter_lines()
            assert next(lines) == ": connected" and next(lines) == "" and next(lines) == ": ping"  # ping_seconds is 0.5
        with client.stream("GET", f"{API}/sessions/{sid}/events", params={"after": 0}, headers=bearer) as r:
            lines = r.iter_lines()
            assert next(lines) == ": connected" and next(lines) == "" and next(lines) == "id: 1"
            server.state.begin_shutdown()
            assert all(line.startswith(("id:", "event:", "data:", ":")) or line == "" for line in lines)  # it ends
