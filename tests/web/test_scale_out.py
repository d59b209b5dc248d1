"""Several ``rp serve`` processes on one PostgreSQL database (side by side, or ``--workers`` on one port): a turn started through A streams to an
SSE client attached to B (LISTEN/NOTIFY) and completes there; a second turn on the same session
through B is 409 ``run.busy`` (the lease holds across processes)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from roleplay.testing.fake_openai import serve_fake_openai
from tests_support import fresh_pg_schema
from web.web_support import free_port

API = "/api/v1"
RP = str(Path(sys.executable).with_name("rp"))
CLEAN = {k: "" for k in ("RP_MODEL", "DEEPSEEK_API_KEY", "RP_TOKEN")}

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def start(home: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    proc = subprocess.Popen(
        [RP, "serve", "--home", str(home), "--port", str(free_port()), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **CLEAN, **env},
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        raise AssertionError(proc.stderr.read().decode() if proc.stderr else "no output")
    return proc, str(json.loads(line)["url"]).rstrip("/")


def stop(proc: subprocess.Popen[bytes]) -> str:
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    return err.decode()


def test_a_turn_through_a_streams_to_b_and_b_refuses_a_second_one(tmp_path: Path) -> None:
    with fresh_pg_schema() as url, serve_fake_openai(flavor="openai", chunk_delay=0.05) as fake:
        env = {"RP_DATABASE_URL": url, "OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "sk-test"}
        a, a_url = start(tmp_path / "a", env)
        b, b_url = start(tmp_path / "b", env)
        try:
            with httpx.Client(base_url=a_url, timeout=60) as on_a, httpx.Client(base_url=b_url, timeout=60) as on_b:
                sid = on_a.post(f"{API}/sessions", json={"sample": True, "model": "openai/fake"}).json()["sessionId"]
                assert on_b.get(f"{API}/sessions/{sid}").status_code == 200  # one store
                with on_b.stream("GET", f"{API}/sessions/{sid}/events") as stream:
                    turn = on_a.post(f"{API}/sessions/{sid}/turns", json={"text": "Tell me about the lighthouse."})
                    assert turn.status_code == 202
                    turn_id = turn.json()["turnId"]
                    busy = on_b.post(f"{API}/sessions/{sid}/turns", json={"text": "me too"})
                    assert busy.status_code == 409 and busy.json()["code"] == "run.busy"
                    seen: list[str] = []
                    ids: list[int] = []
                    event = None
                    for line in stream.iter_lines():
                        seen.append(line)
                        if line.startswith("id: "):
                            ids.append(int(line[4:]))
                        if line.startswith("event: "):
                            event = line[7:]
                        if line.startswith("data: ") and event == "turn/end" and json.loads(line[6:])["payload"]["turnId"] == turn_id:
                            assert json.loads(line[6:])["payload"]["outcome"] == "completed"
                            break
                assert "event: assistant/chunk" in seen  # the reply streamed live across processes
                assert ids == list(range(ids[0], ids[-1] + 1))  # gapless, once each
                log = on_b.get(f"{API}/sessions/{sid}/log", params={"after": ids[0] - 1}).json()
                assert [e["seq"] for e in log] == ids
        finally:
            errors = [stop(a), stop(b)]
    assert all("Traceback" not in e for e in errors), errors


def test_workers_share_one_port_and_stop_cleanly(tmp_path: Path) -> None:
    port = free_port()
    with fresh_pg_schema() as url, serve_fake_openai(flavor="openai", chunk_delay=0.05) as fake:
        env = {"RP_DATABASE_URL": url, "OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "sk-test"}
        proc = subprocess.Popen(
            [RP, "serve", "--home", str(tmp_path), "--port", str(port), "--workers", "2", "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **CLEAN, **env},
        )
        try:
            assert proc.stdout is not None
            assert json.loads(proc.stdout.readline())["workers"] == 2
            base = f"http://127.0.0.1:{port}"
            with httpx.Client(base_url=base, timeout=60) as client:
                for _ in range(300):  # the workers start after the line is printed
                    try:
                        if client.get(f"{API}/health").status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    time.sleep(0.1)
                sid = client.post(f"{API}/sessions", json={"sample": True, "model": "openai/fake"}).json()["sessionId"]
                with client.stream("GET", f"{API}/sessions/{sid}/events") as stream:
                    turn_id = client.post(f"{API}/sessions/{sid}/turns", json={"text": "Hello."}).json()["turnId"]
                    ended = None
                    event = None
                    for line in stream.iter_lines():  # whichever worker holds the stream sees the turn
                        if line.startswith("event: "):
                            event = line[7:]
                        if line.startswith("data: ") and event == "turn/end":
                            ended = json.loads(line[6:])["payload"]
                            break
                assert ended is not None and ended["turnId"] == turn_id and ended["outcome"] == "completed"
                running = client.post(f"{API}/sessions/{sid}/turns", json={"text": "Go on for a long time."}).json()["turnId"]
                err = stop(proc)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 0 and "rp serve: stopped" in err and "Traceback" not in err, err

        async def outcome() -> list[str]:
            from roleplay.harness.store import open_store

            store = open_store(url)
            try:
                return [e.payload["outcome"] for e in await store.read(sid) if e.type == "turn/end" and e.payload["turnId"] == running]
            finally:
                await store.close()

        assert asyncio.run(outcome()) == ["aborted"]
