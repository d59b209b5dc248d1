"""``/messages``, ``/edit``, ``/delete``, ``/regen``, ``/swipe``, ``/branch`` in ``rp play``, the
reply numbers after each reply, and delivery of a recorded replay when play opens a story."""

from __future__ import annotations

import io
from typing import Any

import pytest

from roleplay.core import play_loop as loop
from roleplay.core.actions_play import message_line, register
from roleplay.core.line_editor import LineReader
from roleplay.core.message_actions import visible_messages
from roleplay.core.play_loop import PlaySession, play_loop
from roleplay.core.regenerate import pending_replay, record_regenerate
from roleplay.core.run import play_turn
from roleplay.harness.models.routes import Route
from roleplay.harness.store import EventStore
from roleplay.testing.story_scripts import CountingStory
from tests_support import sample_story

pytestmark = pytest.mark.anyio
SCRIPTED = Route("scripted", "scripted")


@pytest.fixture
def tables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loop, "PLAY_COMMANDS", dict(loop.PLAY_COMMANDS))
    monkeypatch.setattr(loop, "ON_START", dict(loop.ON_START))
    monkeypatch.setattr(loop, "AFTER_REPLY", dict(loop.AFTER_REPLY))
    register(loop.PLAY_COMMANDS, loop.ON_START, loop.AFTER_REPLY)


async def play(rt: Any, sid: str, lines: list[str]) -> PlaySession:
    session = PlaySession(rt, sid, SCRIPTED, LineReader(None, stdin=io.StringIO("\n".join(lines) + "\n"), terminal=False))
    await play_loop(session)
    return session


async def test_actions_in_play(store: EventStore, tables: None, capsys: pytest.CaptureFixture[str]) -> None:
    rt, sid = await sample_story(store)
    rt.models[SCRIPTED.spec] = CountingStory().model()
    lines = ["我推开铁门。", "我帮她擦铜镜。", "/regen", "/swipe left", "/edit 3 （改写）门开了。", "/messages", "/branch 3", "/delete 2"]
    session = await play(rt, sid, lines)
    out = capsys.readouterr()
    assert "([3])" in out.err and "([5] · 2/2 (/swipe))" in out.err  # reply numbers after each reply
    assert "(alternative 1 of 2)" in out.err and "(edited [3])" in out.err
    assert "[3] story: （改写）门开了。  (edited)" in out.out
    assert "[5] story ‹1/2›: " in out.out  # /messages: the swiped reply's counter
    source = await visible_messages(rt, sid)
    assert [m["text"] for m in source][2] == "（改写）门开了。" and "第2稿" in source[-1]["text"]  # swiped back to draft 2
    assert session.session_id != sid  # /branch moved play to the branch; /delete 2 acted there
    branched = await visible_messages(rt, session.session_id)
    assert [m["number"] for m in branched] == [1] and len(source) == 5
    assert "(now playing branch" in out.err and "(deleted" in out.err
    await rt.aclose()


async def test_play_delivers_a_recorded_replay_first(store: EventStore, tables: None, capsys: pytest.CaptureFixture[str]) -> None:
    rt, sid = await sample_story(store)
    rt.models[SCRIPTED.spec] = CountingStory().model()
    await play_turn(rt, sid, "我推开铁门。", parent_route=SCRIPTED)
    await record_regenerate(rt, sid)
    await play(rt, sid, [])
    assert await pending_replay(rt, sid) is None
    assert "(sending again" in capsys.readouterr().err
    last = (await visible_messages(rt, sid))[-1]
    assert "第2稿" in last["text"] and last["alternatives"] == {"index": 1, "count": 2}
    await rt.aclose()


def test_rp_play_end_to_end_through_the_fake_server(tmp_path: Any) -> None:
    """rp play over the real provider path: play two turns, /regen, /swipe left, /edit, /branch,
    then the branch goes on; the source keeps its story."""
    import json
    import os
    import subprocess
    import sys

    from roleplay.testing.fake_openai import serve_fake_openai

    clean = {"DEEPSEEK_API_KEY": "", "RP_MODEL": "", "RP_DATABASE_URL": "", "RP_HOME": str(tmp_path)}
    rp = [sys.executable, "-c", "from roleplay.cli import main; main()"]
    with serve_fake_openai(flavor="openai") as fake:
        env = {**os.environ, **clean, "OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "sk-test"}

        def run(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
            return subprocess.run([*rp, *args], input=stdin, capture_output=True, env=env, text=True, timeout=180)

        made = run("new", "--sample", "--model", "openai/fake", "--json")
        assert made.returncode == 0, made.stderr
        sid = json.loads(made.stdout)["sessionId"]
        lines = [
            "我推开铁门。",
            "我帮她擦铜镜。",
            "/regen",
            "/swipe left",
            "/edit 3 （改写）铁门开了。",
            "/branch",
            "我在分支里点亮了灯。",
            "/quit",
        ]
        played = run("play", "--session", sid, stdin="\n".join(lines) + "\n")
        err = played.stderr
        assert played.returncode == 0 and "Traceback" not in err and "error [" not in err, err
        assert played.stdout.count("[fake server: not a real model]") >= 4  # two turns, the regeneration, the branch's turn
        assert "([5] · 2/2 (/swipe))" in err and "(alternative 1 of 2)" in err and "(edited [3])" in err
        assert "(now playing branch" in err
        source = json.loads(run("messages", sid, "--json").stdout)["messages"]
        assert len(source) == 5 and source[2]["text"] == "（改写）铁门开了。" and source[4]["alternatives"] == {"index": 0, "count": 2}
        tree = json.loads(run("branch", sid, "--tree", "--json").stdout)["tree"]
        assert len(tree["branches"]) == 1
        branched = json.loads(run("messages", tree["branches"][0]["sessionId"], "--json").stdout)["messages"]
        assert len(branched) == 7 and branched[5]["text"] == "我在分支里点亮了灯。"
        shown = json.loads(run("state", "show", sid, "--json").stdout)
        assert shown["namespaces"]["story"]["revision"] >= 1


def test_message_line_shows_the_swipe_counter_and_notes() -> None:
    item = {"number": 5, "speaker": "writing", "text": "门开了。", "alternatives": {"index": 1, "count": 3}, "edited": True}
    assert message_line(item) == "[5] story ‹2/3›: 门开了。  (edited)"
    failed = {"number": 4, "speaker": "user", "text": "我敲门。", "alternatives": {"index": None, "count": 2}}
    failed["failure"] = {"code": "model.server_error"}
    assert message_line(failed) == "[4] you: 我敲门。  (/swipe left for the reply before (2), failed: model.server_error)"
    assert message_line({"number": 2, "speaker": "user", "text": "我敲门。", "active": True}).endswith("(a run is writing this turn now)")
