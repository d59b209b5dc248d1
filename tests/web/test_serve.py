"""``rp serve`` as a user runs it: a subprocess prints its URL, plays a demo turn over HTTP, and
stops cleanly on Ctrl-C (SIGINT) with a stream open and a turn running."""

from __future__ import annotations

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
from roleplay.web.serve import is_loopback, server_default_route, server_options
from web.web_support import free_port

API = "/api/v1"
RP = [str(Path(sys.executable).with_name("rp"))]
CLEAN = {k: "" for k in ("RP_MODEL", "DEEPSEEK_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "RP_TOKEN", "RP_DATABASE_URL")}


def start(home: Path, *args: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen[bytes], dict[str, str]]:
    proc = subprocess.Popen(
        [*RP, "serve", "--home", str(home), "--json", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **CLEAN, **(env or {})},
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        raise AssertionError(proc.stderr.read().decode() if proc.stderr else "no output")
    return proc, json.loads(line)


def stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGINT) -> tuple[int, str]:
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, err.decode()


def test_default_route_and_loopback() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.2")
    assert server_default_route("demo").provider == "demo"


def test_serve_names_the_c_loop_and_parser_and_both_load() -> None:
    import uvicorn

    options = server_options()
    assert options["http"] == "httptools" and options["loop"] == ("asyncio" if sys.platform == "win32" else "uvloop")
    config = uvicorn.Config(lambda scope, receive, send: None, **options)
    config.load()  # uvicorn imports what is named: a missing dependency fails here, not silently
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    assert config.http_protocol_class is HttpToolsProtocol
    if options["loop"] == "uvloop":
        import uvloop

        assert uvloop.new_event_loop().__class__.__module__.startswith("uvloop")


@pytest.mark.slow
def test_rp_serve_plays_a_demo_turn_and_stops_on_sigint(tmp_path: Path) -> None:
    port = free_port()
    proc, started = start(tmp_path, "--port", str(port))
    try:
        assert started["url"] == f"http://127.0.0.1:{port}/" and started["defaultRoute"] == "demo/demo"
        with httpx.Client(base_url=started["url"].rstrip("/"), timeout=30) as client:
            sid = client.post(f"{API}/sessions", json={"sample": True}).json()["sessionId"]
            with client.stream("GET", f"{API}/sessions/{sid}/events") as stream:
                turn = client.post(f"{API}/sessions/{sid}/turns", json={"text": "Hello there."})
                assert turn.status_code == 202
                seen = []
                for line in stream.iter_lines():
                    seen.append(line)
                    if line == "event: turn/end":
                        break
            assert "event: assistant/chunk" in seen and "event: turn/start" in seen
            messages = client.get(f"{API}/sessions/{sid}/messages").json()["messages"]
            assert messages[-2]["text"] == "Hello there." and "[demo" in messages[-1]["text"]
            # Ctrl-C with a stream open: the server still stops promptly
            with client.stream("GET", f"{API}/sessions/{sid}/events"):
                began = time.monotonic()
                code, err = stop(proc)
        assert code == 0, err
        assert time.monotonic() - began < 15
        assert "rp serve: stopping" in err and "rp serve: stopped" in err and "Traceback" not in err
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.slow
def test_sigint_aborts_a_running_turn_and_logs_it(tmp_path: Path) -> None:
    with serve_fake_openai(flavor="openai", chunk_delay=0.1) as fake:
        port = free_port()  # after the fake took its own port: not the one it was given
        proc, started = start(tmp_path, "--port", str(port), env={"OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "sk-test"})
        try:
            with httpx.Client(base_url=started["url"].rstrip("/"), timeout=30) as client:
                sid = client.post(f"{API}/sessions", json={"sample": True, "model": "openai/fake"}).json()["sessionId"]
                turn_id = client.post(f"{API}/sessions/{sid}/turns", json={"text": "Go on."}).json()["turnId"]
                code, err = stop(proc)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert code == 0, err
    events = subprocess.run(
        [*RP, "sessions", "events", sid, "--json", "--home", str(tmp_path)], capture_output=True, env={**os.environ, **CLEAN}, check=True
    )
    ends = [e["payload"] for e in json.loads(events.stdout) if e["type"] == "turn/end" and e["payload"]["turnId"] == turn_id]
    assert [e["outcome"] for e in ends] == ["aborted"]


def test_a_bad_route_refuses_to_start(tmp_path: Path) -> None:
    proc = subprocess.run(
        [*RP, "serve", "--home", str(tmp_path), "--model", "nowhere/x", "--json"],
        capture_output=True,
        env={**os.environ, **CLEAN},
        timeout=60,
    )
    assert proc.returncode == 1 and json.loads(proc.stdout)["error"]["code"].startswith("model.")


@pytest.mark.slow
def test_binding_beyond_loopback_generates_a_token_and_requires_it(tmp_path: Path) -> None:
    port = free_port()
    proc, started = start(tmp_path, "--host", "0.0.0.0", "--port", str(port))
    try:
        base = f"http://127.0.0.1:{port}"
        assert httpx.get(f"{base}{API}/sessions").status_code == 401
        code, err = stop(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    token = err.split("(shown once; set RP_TOKEN to choose one):")[1].split()[0]
    assert code == 0 and len(token) >= 24
    proc, started = start(tmp_path, "--host", "0.0.0.0", "--port", str(port), env={"RP_TOKEN": "chosen-token"})
    try:
        ok = httpx.get(f"http://127.0.0.1:{port}{API}/sessions", headers={"Authorization": "Bearer chosen-token"})
        assert ok.status_code == 200
        code, err = stop(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "chosen-token" not in err  # a chosen token is never printed


def test_rp_help_lists_serve_without_importing_the_web_stack(tmp_path: Path) -> None:
    proc = subprocess.run(
        [*RP, "--home", str(tmp_path), "--help"],
        capture_output=True,
        env={**os.environ, **CLEAN, "PYTHONPROFILEIMPORTTIME": "1"},
        timeout=60,
    )
    assert proc.returncode == 0 and "serve" in proc.stdout.decode()
    imported = proc.stderr.decode()
    assert "fastapi" not in imported and "uvicorn" not in imported and "roleplay.web" not in imported


@pytest.mark.slow
def test_sigterm_stops_as_cleanly_as_ctrl_c(tmp_path: Path) -> None:
    proc, started = start(tmp_path, "--port", str(free_port()))
    try:
        assert httpx.get(f"{started['url']}api/v1/health").status_code == 200
        code, err = stop(proc, signal.SIGTERM)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code == 0 and "rp serve: stopped" in err, err


def test_workers_are_refused_on_sqlite(tmp_path: Path) -> None:
    proc = subprocess.run(
        [*RP, "serve", "--home", str(tmp_path), "--workers", "2", "--json"], capture_output=True, env={**os.environ, **CLEAN}, timeout=60
    )
    assert proc.returncode == 1 and json.loads(proc.stdout)["error"]["code"] == "serve.workers_need_postgres"
