"""The application: OpenAPI and docs, health, and the lifespan (a runtime opened in the server's
loop; on shutdown, running turns are aborted and logged as aborted)."""

from __future__ import annotations

import asyncio
from typing import Any, Iterator

import httpx
import pytest

from roleplay.harness.store import open_store
from roleplay.testing.fake_openai import FakeOpenAI, serve_fake_openai
from web.web_support import start_live_server

API = "/api/v1"


@pytest.mark.anyio
async def test_openapi_docs_and_health(api: tuple[httpx.AsyncClient, Any]) -> None:
    client, _ = api
    spec = (await client.get(f"{API}/openapi.json")).json()
    paths = spec["paths"]
    for path in (
        f"{API}/sessions",
        f"{API}/sessions/{{session_id}}/turns",
        f"{API}/sessions/{{session_id}}/events",
        f"{API}/assets/import",
    ):
        assert path in paths
    assert "ErrorOut" in spec["components"]["schemas"]
    assert paths[f"{API}/sessions/{{session_id}}/turns"]["post"]["responses"]["409"]["content"]["application/json"]
    docs = await client.get("/api/docs")
    assert docs.status_code == 200 and f"{API}/openapi.json" in docs.text
    assert (await client.get(f"{API}/health")).json()["ok"] is True


@pytest.fixture
def slow_provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    with serve_fake_openai(flavor="openai", chunk_delay=0.05) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        yield fake


def test_shutdown_aborts_running_turns_and_logs_them_aborted(db_url: str, slow_provider: FakeOpenAI) -> None:
    with start_live_server(db_url) as server, httpx.Client(base_url=server.base, timeout=30) as client:
        sid = client.post(f"{API}/sessions", json={"sample": True, "model": "openai/fake"}).json()["sessionId"]
        turn_id = client.post(f"{API}/sessions/{sid}/turns", json={"text": "A long tale, please."}).json()["turnId"]
        assert client.get(f"{API}/sessions/{sid}/running").json()["turnId"] == turn_id

    # the server has stopped: the log says how the turn ended
    async def read() -> list[Any]:
        store = open_store(db_url)
        try:
            return await store.read(sid)
        finally:
            await store.close()

    events = asyncio.run(read())
    ends = [e.payload for e in events if e.type == "turn/end" and e.payload["turnId"] == turn_id]
    assert [e["outcome"] for e in ends] == ["aborted"]
