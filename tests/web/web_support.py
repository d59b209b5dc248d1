"""Helpers of the HTTP API tests (the fixtures are in ``conftest.py``).

``api_client``: ``(client, runtime)`` with the ASGI app in process (no lifespan: the runtime is
given). ``start_live_server``: the same app on a real uvicorn server in a thread, for streaming
tests (httpx's ASGI transport buffers whole responses, so SSE needs a socket).
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from contextlib import asynccontextmanager, contextmanager
from typing import Any, AsyncIterator, Iterator

import httpx

from roleplay.assets.seeds import ensure_seeds
from roleplay.features import open_runtime
from roleplay.harness.models.routes import resolve_route
from roleplay.harness.store import open_store
from roleplay.web.app import WebConfig, create_app


def config(**kw: Any) -> WebConfig:
    kw.setdefault("default_route", resolve_route("demo"))
    kw.setdefault("ping_seconds", 0.5)
    return WebConfig(**kw)


@asynccontextmanager
async def opened_runtime(url: str) -> AsyncIterator[Any]:
    store = open_store(url)
    await store.migrate()
    rt = await open_runtime(store, entry_points=False)
    await ensure_seeds(rt.assets)
    try:
        yield rt
    finally:
        await rt.aclose()
        await store.close()


@asynccontextmanager
async def api_client(url: str, **kw: Any) -> AsyncIterator[tuple[httpx.AsyncClient, Any]]:
    async with opened_runtime(url) as rt:
        app = create_app(rt, config(**kw))
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            yield client, rt
        await app.state.web.runs.shutdown(5)


async def new_story(client: httpx.AsyncClient, **body: Any) -> str:
    r = await client.post("/api/v1/sessions", json={"sample": True, **body})
    assert r.status_code == 201, r.text
    return str(r.json()["sessionId"])


async def wait_idle(client: httpx.AsyncClient, session_id: str, timeout: float = 30) -> None:
    """Until no turn of the session runs on the server."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = await client.get(f"/api/v1/sessions/{session_id}/running")
        if r.json()["turnId"] is None:
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the turn did not finish")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LiveServer:
    def __init__(self, url: str, base: str, server: Any, state: Any) -> None:
        self.url = url
        self.base = base
        self.server = server
        self.state = state


@contextmanager
def start_live_server(db_url: str, **kw: Any) -> Iterator[LiveServer]:
    """The app on uvicorn in a thread (its own event loop), the runtime opened in its lifespan."""
    import uvicorn

    port = free_port()
    app = create_app(None, config(**{"send_timeout": 2.0, **kw}), opener=lambda: opened_runtime(db_url))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.02)
    try:
        yield LiveServer(db_url, f"http://127.0.0.1:{port}", server, app.state.web)
    finally:
        app.state.web.begin_shutdown()
        server.should_exit = True
        thread.join(30)


@contextmanager
def turn_in_another_process(home: Any, session_id: str, text: str, chunk_delay: float = 0.1) -> Iterator[Any]:
    """``rp say`` on the SQLite home ``home`` (its ``roleplay.db``) in a child process, with a fake
    provider slow enough (``chunk_delay`` per frame) that the turn runs for seconds. Yields the process."""
    import os
    import subprocess
    import sys

    from roleplay.testing.fake_openai import serve_fake_openai

    clean = {"DEEPSEEK_API_KEY": "", "RP_MODEL": "", "RP_DATABASE_URL": "", "RP_WRITER_MODEL": ""}
    with serve_fake_openai(chunk_delay=chunk_delay) as fake:
        env = {**os.environ, **clean, "RP_HOME": str(home), "OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "x"}
        rp = [sys.executable, "-c", "from roleplay.cli import main; main()"]
        proc = subprocess.Popen([*rp, "say", session_id, text, "--model", "openai/fake"], stdout=subprocess.DEVNULL, env=env)
        try:
            yield proc
            assert proc.wait(120) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
