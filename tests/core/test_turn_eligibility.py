"""Only a live, top-level roleplay story takes a turn: archived stories, plain chat sessions and
Writer child sessions are refused with their own codes, and the refusal writes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from roleplay.cli import cli
from roleplay.cli_context import CliState
from roleplay.core.run import play_turn
from roleplay.core.runtime import RoleplayRuntime
from roleplay.errors import RpError
from roleplay.harness.models.routes import Route
from roleplay.harness.store import EventStore
from tests_support import sample_story

pytestmark = pytest.mark.anyio
DEMO = Route("demo", "demo")


async def refused(rt: RoleplayRuntime, sid: str) -> RpError:
    head = await rt.store.head(sid)
    with pytest.raises(RpError) as exc:
        await play_turn(rt, sid, "我推开门。", parent_route=DEMO)
    assert await rt.store.head(sid) == head  # nothing was written
    return exc.value


async def test_an_archived_story_is_refused_until_unarchived(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    await rt.service.archive(sid)
    err = await refused(rt, sid)
    assert err.code == "run.session_archived" and f"rp sessions archive {sid} --undo" in err.message
    await rt.service.archive(sid, False)
    assert (await play_turn(rt, sid, "我推开门。", parent_route=DEMO)).committed


async def test_a_plain_chat_session_is_refused(store: EventStore) -> None:
    rt, _ = await sample_story(store)
    chat = await rt.service.create("chat", title="plain chat")
    err = await refused(rt, chat.id)
    assert err.code == "run.not_roleplay" and "rp chat --session" in err.message


async def test_a_writer_child_session_is_refused(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    result = await play_turn(rt, sid, "我推开门。", parent_route=DEMO)
    child = result.writer.child_session_id  # type: ignore[union-attr]
    err = await refused(rt, child)
    assert err.code == "run.child_session" and sid in err.message and err.details["parentId"] == sid


CLEAN = {"DEEPSEEK_API_KEY": "", "OPENAI_API_KEY": "", "OPENAI_BASE_URL": "", "RP_MODEL": "", "RP_DATABASE_URL": ""}


def invoke(home: Path, *args: str, input: str | None = None):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli, ["--home", str(home), *args], env=CLEAN, input=input, obj=CliState())


def test_rp_say_and_play_refuse_an_archived_story_and_prompt_still_previews_it(tmp_path: Path) -> None:
    sid = json.loads(invoke(tmp_path, "new", "--sample", "--json").stdout)["sessionId"]
    assert invoke(tmp_path, "sessions", "archive", sid).exit_code == 0
    said = invoke(tmp_path, "say", sid, "我敲了敲铁门。", "--model", "demo", "--json")
    assert said.exit_code == 1 and json.loads(said.stdout)["error"]["code"] == "run.session_archived"
    played = invoke(tmp_path, "play", "--session", sid, "--model", "demo", input="我敲了敲铁门。\n/quit\n")
    assert played.exit_code == 1 and "run.session_archived" in played.stderr
    assert invoke(tmp_path, "prompt", sid, "--model", "demo").exit_code == 0
    assert invoke(tmp_path, "sessions", "archive", sid, "--undo").exit_code == 0
    assert invoke(tmp_path, "say", sid, "我敲了敲铁门。", "--model", "demo").exit_code == 0


def test_rp_say_refuses_a_writer_child_session(tmp_path: Path) -> None:
    sid = json.loads(invoke(tmp_path, "new", "--sample", "--json").stdout)["sessionId"]
    summary = json.loads(invoke(tmp_path, "say", sid, "我敲了敲铁门。", "--model", "demo", "--json").stdout)
    child = summary["writer"]["childSessionId"]
    said = invoke(tmp_path, "say", child, "继续写。", "--model", "demo")
    assert said.exit_code == 1 and "run.child_session" in said.stderr
    shown = json.loads(invoke(tmp_path, "sessions", "show", child, "--json").stdout)
    assert len(shown["surface"]) == 2  # the Writer's one prompt and one draft, nothing appended
