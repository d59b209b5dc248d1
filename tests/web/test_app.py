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


async def _turn(client: httpx.AsyncClient, sid: str, text: str) -> str:
    from web.web_support import wait_idle

    r = await client.post(f"{API}/sessions/{sid}/turns", json={"text": text})
    assert r.status_code == 202, r.text
    await wait_idle(client, sid)
    return str(r.json()["turnId"])


@pytest.mark.anyio
async def test_a_feature_change_applies_from_the_next_turn_without_a_restart(api: tuple[httpx.AsyncClient, Any]) -> None:
    from web.web_support import new_story

    client, opened = api
    state = client._transport.app.state.web  # type: ignore[attr-defined]
    sid = await new_story(client)
    first = await _turn(client, sid, "I knock on the door.")
    assert [e["turnId"] for e in (await client.get(f"{API}/sessions/{sid}/reply-options")).json()["replyOptions"]] == [first]

    assert (await client.post(f"{API}/features/rp-reply-options/disable")).status_code == 200
    await _turn(client, sid, "I wait.")
    assert state.rt is not opened and "rp-reply-options" not in state.rt.features  # rebuilt for that turn
    assert "rp-reply-options" not in (await client.get(f"{API}/features")).json()["running"]
    off = await client.get(f"{API}/sessions/{sid}/reply-options")
    assert off.status_code == 404 and off.json()["code"] == "feature.off"
    # the commit of the turn played while it was off carries no reply options
    log = (await client.get(f"{API}/sessions/{sid}/log")).json()
    commits = [
        e["payload"]["content"]
        for e in log
        if e["type"] == "tool/result" and e["payload"]["name"] == "rp_commit_turn" and e["payload"]["ok"]
    ]
    assert "rp.reply-options" in commits[0] and "rp.reply-options" not in commits[-1]

    rebuilt = state.rt
    await _turn(client, sid, "Still nothing.")  # nothing changed: the same runtime
    assert state.rt is rebuilt

    assert (await client.post(f"{API}/features/rp-reply-options/enable")).status_code == 200
    third = await _turn(client, sid, "I knock again.")
    entries = (await client.get(f"{API}/sessions/{sid}/reply-options")).json()["replyOptions"]
    assert [e["turnId"] for e in entries] == [first, third] and entries[-1]["options"]
    assert "rp-reply-options" in state.rt.features


@pytest.mark.anyio
async def test_a_replaced_runtime_is_closed_after_its_last_run(api: tuple[httpx.AsyncClient, Any]) -> None:
    from roleplay.core.feature_set import FeatureManager

    client, opened = api
    state = client._transport.app.state.web  # type: ignore[attr-defined]
    closed: list[Any] = []
    real_close = opened.aclose

    async def spy() -> None:
        closed.append(opened)
        await real_close()

    opened.aclose = spy
    assert await state.fresh_runtime() is opened  # the first look only records the revision
    async with state.runtime_in_use(opened):  # a run still going on the old set
        await FeatureManager(opened.store).disable("rp-quick-replies")
        fresh = await state.fresh_runtime()
        assert fresh is not opened and "rp-quick-replies" not in fresh.features
        assert closed == []  # the running turn keeps its runtime (and its model clients)
        assert await state.fresh_runtime() is fresh
    assert closed == [opened]
    await state.close_rebuilt(opened)  # what the lifespan does at shutdown: the rebuilt one is closed


@pytest.mark.anyio
async def test_what_start_up_built_is_frozen_out_of_later_collections(db_url: str) -> None:
    import gc

    from roleplay.web.app import create_app
    from web.web_support import config, opened_runtime

    gc.unfreeze()
    try:
        async with opened_runtime(db_url) as rt:
            app = create_app(rt, config())
            assert gc.get_freeze_count() == 0
            async with app.router.lifespan_context(app):
                # the runtime and everything imported are in the permanent generation
                assert gc.get_freeze_count() > 10_000
                assert not any(o is rt for o in gc.get_objects())  # no collection walks it again
    finally:
        gc.unfreeze()  # other tests' objects stay collectable


def test_the_routes_are_built_before_the_heap_is_frozen(db_url: str) -> None:
    """FastAPI builds the included routes on the first request that reaches them; built after the
    lifespan's gc.freeze, their ~21,000 tracked objects would be walked by every full collection."""
    import gc

    with start_live_server(db_url) as server, httpx.Client(base_url=server.base, timeout=30) as client:
        gc.collect()
        before = len(gc.get_objects())  # no request served yet
        for path in ("/health", "/sessions", "/assets", "/settings", "/features", "/models"):
            assert client.get(f"{API}{path}").status_code == 200
        gc.collect()
        assert len(gc.get_objects()) - before < 4000  # measured: about 1,900 (the client's included); 24,000 built after the freeze


@pytest.mark.anyio
async def test_a_posted_turn_reads_the_settings_with_the_features_revision(api: tuple[httpx.AsyncClient, Any]) -> None:
    """``fresh_runtime_and_settings``: one read gives the runtime check and the settings the turn
    freezes (``prepare_run(settings=…)``), as they are at that moment."""
    from roleplay.core.feature_set import FeatureManager
    from roleplay.core.settings import SettingsStore

    client, opened = api
    state = client._transport.app.state.web  # type: ignore[attr-defined]
    rt, settings = await state.fresh_runtime_and_settings()
    assert rt is opened and settings.identity() is None
    await SettingsStore(opened.store).set("prompt.identity", "You narrate a lighthouse story.")
    rt, settings = await state.fresh_runtime_and_settings()
    assert rt is opened and settings.identity() == "You narrate a lighthouse story."
    await FeatureManager(opened.store).disable("rp-quick-replies")
    rt, settings = await state.fresh_runtime_and_settings()
    assert rt is state.rt and rt is not opened and "rp-quick-replies" not in rt.features
    assert settings.identity() == "You narrate a lighthouse story." and await state.fresh_runtime() is rt
    await state.close_rebuilt(opened)  # what the lifespan does at shutdown: the rebuilt one is closed
