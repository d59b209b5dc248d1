"""``rp db`` and ``rp sessions`` end to end through click, on both backends."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from roleplay.cli import cli
from roleplay.cli_context import CliState
from roleplay.harness.events import EventDraft
from roleplay.harness.store import open_store
from roleplay.harness.store.migrations import LATEST


def invoke(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env=env, obj=CliState())
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def env(store_url: str, tmp_path: Path) -> dict[str, str]:
    return {"RP_DATABASE_URL": store_url, "RP_HOME": str(tmp_path / "home")}


def seed(store_url: str) -> tuple[str, str]:
    async def go() -> tuple[str, str]:
        store = open_store(store_url)
        await store.migrate()
        try:
            rec = await store.create_session(
                preset="roleplay",
                title="Tea party",
                events=[
                    EventDraft("user/message", {"messageId": "u1", "content": [{"type": "text", "text": "Hello there"}]}),
                    EventDraft("assistant/message", {"messageId": "a1", "content": [{"type": "text", "text": "General Kenobi"}]}),
                    EventDraft("command/run", {"commandId": "c1", "name": "x", "args": {}}),
                ],
            )
            child = await store.create_session(preset="writer", parent_id=rec.id)
            return rec.id, child.id
        finally:
            await store.close()

    return asyncio.run(go())


def test_db_migrate_is_idempotent(env: dict[str, str]) -> None:
    code, out, _ = invoke(env, "db", "migrate", "--json")
    first = json.loads(out)
    assert code == 0 and first["applied"] == list(range(1, LATEST + 1))
    # The tables outside the event log come from their owners' lists, not from the harness's.
    assert first["owned"] == [{"owner": "rp-assets", "number": 1}, {"owner": "rp-settings", "number": 1}]
    code, out, _ = invoke(env, "db", "migrate", "--json")
    assert code == 0 and json.loads(out) | {"database": None} == {"database": None, "applied": [], "schemaVersion": LATEST, "owned": []}


def test_sessions_list_show_events_fork_archive(env: dict[str, str], store_url: str) -> None:
    sid, child = seed(store_url)
    code, out, _ = invoke(env, "sessions", "list", "--json")
    assert code == 0 and [s["id"] for s in json.loads(out)] == [sid]
    code, out, _ = invoke(env, "sessions", "list", "--roots", "--json")
    assert [s["id"] for s in json.loads(out)] == [sid]
    code, out, _ = invoke(env, "sessions", "list", "--parent", sid, "--json")
    assert [s["id"] for s in json.loads(out)] == [child]

    code, out, _ = invoke(env, "sessions", "show", sid, "--json")
    shown = json.loads(out)
    assert shown["title"] == "Tea party" and shown["headSeq"] == 3
    assert [c["id"] for c in shown["children"]] == [child]
    assert [n["id"] for n in shown["surface"]] == ["u1", "a1"]
    code, out, _ = invoke(env, "sessions", "show", sid)
    assert code == 0 and "General Kenobi" in out and "children: " + child in out

    code, out, _ = invoke(env, "sessions", "events", sid, "--after", "1", "--json")
    assert [e["seq"] for e in json.loads(out)] == [2, 3]
    code, out, _ = invoke(env, "sessions", "events", sid, "--until", "1")
    assert code == 0 and "user/message" in out and "assistant/message" not in out

    code, out, _ = invoke(env, "sessions", "fork", sid, "--at", "2", "--title", "branch", "--json")
    fork = json.loads(out)
    assert (fork["forkedFrom"], fork["forkedAtSeq"], fork["headSeq"], fork["title"]) == (sid, 2, 2, "branch")

    code, out, _ = invoke(env, "sessions", "archive", fork["id"], "--json")
    assert code == 0 and json.loads(out)["archived"] is True
    code, out, _ = invoke(env, "sessions", "list", "--json")
    assert fork["id"] not in {s["id"] for s in json.loads(out)}
    code, out, _ = invoke(env, "sessions", "list", "--archived", "--json")
    assert [s["id"] for s in json.loads(out)] == [fork["id"]]
    code, out, _ = invoke(env, "sessions", "archive", fork["id"], "--undo")
    assert code == 0 and out.startswith("unarchived")


def test_sessions_list_shows_top_level_sessions_unless_all_asks_for_children(env: dict[str, str], store_url: str) -> None:
    sid, child = seed(store_url)
    code, out, _ = invoke(env, "sessions", "list")
    assert code == 0 and sid in out and child not in out
    code, out, _ = invoke(env, "sessions", "list", "--all", "--json")
    assert code == 0 and {s["id"] for s in json.loads(out)} == {sid, child}
    code, out, _ = invoke(env, "sessions", "list", "--all")
    assert f"{child}" in out and f"child of {sid}" in out
    code, out, _ = invoke(env, "sessions", "list", "--parent", sid, "--json")
    assert [s["id"] for s in json.loads(out)] == [child]


def test_errors_have_codes_and_exit_1(env: dict[str, str], store_url: str) -> None:
    sid, _ = seed(store_url)
    code, out, err = invoke(env, "sessions", "fork", sid, "--at", "9")
    assert code == 1 and "error [session.fork_out_of_range]" in err and "Traceback" not in err
    code, out, _ = invoke(env, "sessions", "fork", sid, "--at", "9", "--json")
    assert code == 1 and json.loads(out)["error"]["code"] == "session.fork_out_of_range"
    code, out, err = invoke(env, "sessions", "events", "ses_nope")
    assert code == 1 and "session.not_found" in err


def test_home_option_on_the_command_beats_the_environment(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    env = {"RP_HOME": str(a), "RP_DATABASE_URL": ""}
    assert invoke(env, "db", "migrate")[0] == 0
    assert (a / "roleplay.db").exists() and not b.exists()
    assert invoke(env, "sessions", "list", "--home", str(b))[0] == 0
    assert (b / "roleplay.db").exists()
    assert invoke(env, "--home", str(tmp_path / "c"), "db", "migrate")[0] == 0
    assert (tmp_path / "c" / "roleplay.db").exists()


def test_database_urls_are_printed_without_credentials() -> None:
    from roleplay.harness.cli import _safe_url

    assert _safe_url("postgresql://app:pw@db:5432/rp") == "postgresql://***@db:5432/rp"
    assert _safe_url("postgresql://db/rp?user=app&password=pw") == "postgresql://db/rp?user=***&password=***"


def test_titles_and_messages_print_inert(env: dict[str, str], store_url: str) -> None:
    hostile = "\x1b]0;owned\x07\x1b[2J\u202e\x9b31m"

    async def go() -> str:
        store = open_store(store_url)
        await store.migrate()
        try:
            rec = await store.create_session(
                preset="roleplay",
                title=f"Tea {hostile} 茶会 👩\u200d💻",
                events=[
                    EventDraft("user/message", {"messageId": "u1", "content": [{"type": "text", "text": f"Hi {hostile}"}]}),
                ],
            )
            return rec.id
        finally:
            await store.close()

    sid = asyncio.run(go())
    shown = "\\x1b]0;owned\\x07\\x1b[2J\\u202e\\x9b31m"
    for args in (["sessions", "list"], ["sessions", "show", sid], ["sessions", "events", sid]):
        code, out, err = invoke(env, *args)
        assert code == 0, err
        assert not any(c in out for c in "\x1b\x07\x9b\u202e"), out
        assert shown in out, out
    assert f"Tea {shown} 茶会 👩\u200d💻" in invoke(env, "sessions", "list")[1]


def test_sessions_events_shows_a_long_prompt_whole(env: dict[str, str], store_url: str) -> None:
    """Large text is stored as shared parts; ``rp sessions events`` still shows it exactly."""
    prompt = "".join(f"[User]\n第{i}轮：我问起晨星号。\n\n[Writing reply]\n林汐沉默了{i}次。\n\n" for i in range(300))

    async def go() -> str:
        store = open_store(store_url)
        await store.migrate()
        try:
            parent = await store.create_session(preset="roleplay")
            child = await store.create_session(
                preset="rp-writer",
                parent_id=parent.id,
                events=[EventDraft("user/message", {"messageId": "w1", "content": [{"type": "text", "text": prompt}]})],
            )
            return child.id
        finally:
            await store.close()

    child = asyncio.run(go())
    code, out, _ = invoke(env, "sessions", "events", child, "--json")
    assert code == 0 and json.loads(out)[0]["payload"]["content"][0]["text"] == prompt
    code, out, _ = invoke(env, "sessions", "events", child)
    assert code == 0 and "第0轮：我问起晨星号" in out  # the one-line view starts with the text, not a blank
