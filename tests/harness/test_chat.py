"""``rp chat`` end to end: the demo model with no key, and the real OpenAI-compatible code path
against the fake server over loopback."""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from roleplay.cli import cli
from roleplay.cli_context import CliState
from roleplay.harness.projections import fold
from roleplay.harness.store import open_store
from roleplay.harness.surface import surface_projection
from roleplay.testing.fake_openai import FakeReply, serve_fake_openai


def invoke(env: dict[str, str], *args: str, input: str | None = None):  # type: ignore[no-untyped-def]
    base = {"DEEPSEEK_API_KEY": "", "OPENAI_API_KEY": "", "OPENAI_BASE_URL": "", "RP_MODEL": "", "RP_DATABASE_URL": ""}
    return CliRunner().invoke(cli, list(args), env={**base, **env}, input=input, obj=CliState())


def events_of(home: Path, session_id: str):  # type: ignore[no-untyped-def]
    async def go():  # type: ignore[no-untyped-def]
        store = open_store(f"sqlite:///{home / 'roleplay.db'}")
        try:
            return await store.read(session_id)
        finally:
            await store.close()

    return asyncio.run(go())


def test_demo_chat_needs_no_key_and_persists_the_session(tmp_path: Path) -> None:
    result = invoke({"RP_HOME": str(tmp_path)}, "chat", "--model", "demo", input="Hello, demo!\n\n/exit\nnot sent\n")
    assert result.exit_code == 0, result.output
    assert "[demo reply" in result.stdout and "Hello, demo!" in result.stdout
    assert "demo (offline, not a real model)" in result.stderr
    listing = invoke({"RP_HOME": str(tmp_path)}, "sessions", "list", "--json")
    (session,) = json.loads(listing.stdout)
    assert session["preset"] == "chat"
    events = events_of(tmp_path, session["id"])
    types = [e.type for e in events]
    assert types[0] == "turn/start" and types[-1] == "turn/end" and types.count("turn/start") == 1
    assert events[-1].payload["outcome"] == "completed"
    nodes = fold(surface_projection, events)["nodes"]
    assert [n["role"] for n in nodes] == ["user", "assistant"]


def test_continue_a_session_and_json_summary(tmp_path: Path) -> None:
    first = invoke({"RP_HOME": str(tmp_path)}, "chat", "--model", "demo", "-m", "one", "--json")
    sid = json.loads(first.stdout)["sessionId"]
    again = invoke({"RP_HOME": str(tmp_path)}, "chat", "--model", "demo", "--session", sid, "-m", "two", "--json")
    summary = json.loads(again.stdout)
    assert summary["sessionId"] == sid and [t["outcome"] for t in summary["turns"]] == ["completed"]
    nodes = fold(surface_projection, events_of(tmp_path, sid))["nodes"]
    assert [n["role"] for n in nodes] == ["user", "assistant", "user", "assistant"]
    missing = invoke({"RP_HOME": str(tmp_path)}, "chat", "--model", "demo", "--session", "ses_nope", "-m", "x")
    assert missing.exit_code == 1 and "session.not_found" in missing.stderr


def test_chat_against_the_fake_openai_server(tmp_path: Path) -> None:
    with serve_fake_openai(flavor="openai", strict=True) as fake:
        fake.enqueue(FakeReply(text="Hi from the wire.", chunk_size=3))
        env = {"RP_HOME": str(tmp_path), "OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "sk-test"}
        result = invoke(env, "chat", "--model", "openai/gpt-test", input="ping\n")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "Hi from the wire."
    body = fake.chat_requests[0].body
    assert body["model"] == "gpt-test" and body["stream"] is True
    assert [m["role"] for m in body["messages"]] == ["system", "user"] and body["messages"][1]["content"] == "ping"


def test_missing_configuration_is_a_clear_error(tmp_path: Path) -> None:
    result = invoke({"RP_HOME": str(tmp_path)}, "chat", "-m", "hi")
    assert result.exit_code == 1 and "model.not_configured" in result.stderr and "--model demo" in result.stderr


RP = [sys.executable, "-c", "from roleplay.cli import main; main()"]


# A strict stdin (a UTF-8 locale) raises on bad bytes; a C/POSIX locale smuggles them in as lone surrogates.
@pytest.mark.parametrize("stdin_encoding", ["utf-8:strict", "utf-8:surrogateescape"])
def test_chat_refuses_an_input_line_that_is_not_utf8_and_chats_on(tmp_path: Path, stdin_encoding: str) -> None:
    env = {**os.environ, "RP_HOME": str(tmp_path), "RP_DATABASE_URL": "", "PYTHONIOENCODING": stdin_encoding}
    proc = subprocess.run(
        [*RP, "chat", "--model", "demo", "--json"], input=b"\xff\nhello there\ncaf\xe9\n", capture_output=True, env=env, timeout=120
    )
    err = proc.stderr.decode()
    assert proc.returncode == 0 and "Traceback" not in err, err
    assert err.count("error [cli.input.invalid_utf8]") == 2
    summary = json.loads(proc.stdout)
    assert [t["outcome"] for t in summary["turns"]] == ["completed"] and "hello there" in summary["turns"][0]["text"]
    assert [(e["code"], e["details"]["line"]) for e in summary["inputErrors"]] == [
        ("cli.input.invalid_utf8", 1),
        ("cli.input.invalid_utf8", 3),
    ]


def test_chat_replies_print_terminal_escapes_inert(tmp_path: Path) -> None:
    hostile = "\x1b]0;owned\x07\x1b[2J\u202e\x9b31m"
    result = invoke({"RP_HOME": str(tmp_path)}, "chat", "--model", "demo", "-m", f"hi {hostile} 中文 👩\u200d💻")
    assert result.exit_code == 0, result.output
    assert not any(c in result.stdout for c in "\x1b\x07\x9b\u202e"), result.stdout
    assert "hi \\x1b]0;owned\\x07\\x1b[2J\\u202e\\x9b31m 中文 👩\u200d💻" in result.stdout


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_stream_turn_shows_writing_until_the_first_text_then_the_elapsed_time_and_marks_a_reset(tmp_path: Path) -> None:
    from roleplay.harness.chat import stream_turn

    async def go() -> tuple[str, str, str]:
        store = open_store(f"sqlite:///{tmp_path / 'roleplay.db'}")
        try:
            from roleplay.harness.sessions import SessionService

            await store.migrate()
            session = await SessionService(store).create("chat")
            out, status, pipe = io.StringIO(), Terminal(), io.StringIO()
            ticks = iter([100.0, 101.5, 104.0, 100.0, 100.0])  # start, first text, end; then a silent turn

            async def start(abort: asyncio.Event) -> str:
                for data in ({"text": "Refused."}, {"reset": True, "text": ""}, {"text": "The fog "}, {"text": "lifts."}):
                    await store.publish_chunk(session.id, {"type": "assistant/chunk", "turnId": "t", **data})
                return "The fog lifts."

            await stream_turn(store, session.id, start, out, lambda r: r, status=status, clock=lambda: next(ticks))

            async def silent(abort: asyncio.Event) -> str:
                return "Hello."

            await stream_turn(store, session.id, silent, pipe, lambda r: r, status=pipe, clock=lambda: next(ticks))
            return out.getvalue(), status.getvalue(), pipe.getvalue()
        finally:
            await store.close()

    out, status, pipe = asyncio.run(go())
    assert out == "Refused.\nThe fog lifts.\n"  # only the reply on stdout
    assert status == (
        "writing…\r\x1b[K"  # erased on a terminal when the text starts
        "(the Writer was retried: the text above is discarded)\n"
        "(first text after 1.5 s, 4.0 s)\n"
    )
    assert pipe == "writing…\nHello.\n(0.0 s)\n"  # a pipe keeps whole lines; a reply that never streamed prints at the end
