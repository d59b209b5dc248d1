"""The one error envelope and its statuses."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from roleplay.errors import ConflictError, NotFoundError, RpError, ValidationError
from roleplay.web.app import create_app
from roleplay.web.errors import envelope, status_for
from web.web_support import config, new_story

API = "/api/v1"


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (NotFoundError("session.not_found", "x"), 404),
        (RpError("asset.blob_not_found", "x"), 404),
        (ConflictError("run.busy", "x"), 409),
        (RpError("asset.in_use", "x"), 409),
        (RpError("settings.conflict", "x"), 409),
        (RpError("card.png.too_large", "x"), 413),
        (RpError("upload.too_large", "x"), 413),
        (ValidationError("story.opening_empty", "x"), 422),
        (RpError("story.not_blank", "x"), 400),
        (RpError("store.unavailable", "x"), 503),
    ],
)
def test_status_for_engine_errors(error: RpError, status: int) -> None:
    assert status_for(error) == status


def test_envelope_has_the_four_fields_always() -> None:
    assert envelope("a.b", "m") == {"code": "a.b", "message": "m", "pointer": None, "problems": []}
    assert envelope("a.b", "m", details={"k": 1})["details"] == {"k": 1}


@pytest.mark.anyio
async def test_routing_and_unexpected_errors_use_the_envelope(api: tuple[httpx.AsyncClient, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    client, rt = api
    missing = await client.get(f"{API}/nothing-here")
    assert missing.status_code == 404 and missing.json() == envelope("http.not_found", "Not Found")
    method = await client.delete(f"{API}/sessions")
    assert method.status_code == 405 and method.json()["code"] == "http.method_not_allowed"

    async def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("boom with a secret sk-live-123")

    monkeypatch.setattr(rt.store, "list_sessions", broken)
    # Starlette re-raises after answering (for the server's log); this client only wants the answer.
    transport = httpx.ASGITransport(app=create_app(rt, config()), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as quiet:
        crash = await quiet.get(f"{API}/sessions")
    assert crash.status_code == 500 and crash.json()["code"] == "server.internal" and "sk-live" not in crash.text


@pytest.mark.anyio
async def test_a_library_model_refusing_a_value_is_422(api: tuple[httpx.AsyncClient, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic import BaseModel

    class Strict(BaseModel):
        count: int

    client, rt = api

    async def refuse(*_: Any, **__: Any) -> Any:
        Strict.model_validate({"count": "many"})

    monkeypatch.setattr(rt.store, "list_sessions", refuse)
    r = await client.get(f"{API}/sessions")
    assert r.status_code == 422 and r.json()["code"] == "value.invalid" and r.json()["pointer"] == "/count"


@pytest.mark.parametrize(
    ("path", "body", "pointer"),
    [
        ("/sessions/{sid}/turns", b'{"text": "hi \\ud800 there"}', "/text"),
        ("/sessions/{sid}/impersonate", b'{"hint": "x\\udc00"}', "/hint"),
        ("/chats", b'{"title": "\\udfff"}', "/title"),
        # in a key: the pointer shows it as U+FFFD (a lone surrogate cannot be sent back)
        ("/assets", b'{"kind": "persona", "data": {"name": "a", "extensions": {"x\\ud800": 1}}}', "/data/extensions/x\ufffd"),
    ],
)
@pytest.mark.anyio
async def test_a_lone_surrogate_anywhere_in_a_body_is_422_with_its_place(
    api: tuple[httpx.AsyncClient, Any], path: str, body: bytes, pointer: str
) -> None:
    # JSON can spell one; it is no character, so no text holding it could be hashed or stored
    # (a turn's text failed deep in the engine with a 500 before).
    client, rt = api
    sid = await new_story(client, sample=True)
    head = await rt.store.head(sid)
    r = await client.post(f"{API}{path.format(sid=sid)}", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    got = r.json()
    assert got["code"] == "request.invalid" and got["pointer"] == pointer
    assert [p["code"] for p in got["problems"]] == ["request.lone_surrogate"] and "U+D" in got["message"]
    assert await rt.store.head(sid) == head  # nothing was written
