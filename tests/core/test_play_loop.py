"""The ``rp play`` loop: commands, hooks, and the draft as an editable line at a terminal."""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Any

import pytest

from roleplay.core import play_loop
from roleplay.core.continue_turn import visible_entries
from roleplay.core.demo import DEMO_CONTINUED, DEMO_DRAFT
from roleplay.core.play_loop import PlaySession, handle_line
from roleplay.core.run import RunResult
from roleplay.errors import RpError
from roleplay.harness.models.routes import Route
from roleplay.harness.store import EventStore
from tests_support import sample_story

pytestmark = pytest.mark.anyio
DEMO = Route("demo", "demo")


class Scripted:
    """A reader that hands out fixed lines and records what it was asked to pre-fill."""

    def __init__(self, lines: list[str], *, terminal: bool) -> None:
        self.lines, self.terminal = list(lines), terminal
        self.offered: list[str] = []

    @property
    def prefills(self) -> bool:
        return self.terminal

    async def read(self, number: int | None = None, *, prompt: str = "> ", default: str = "", cursor: int | None = None) -> str | None:
        self.offered.append(default)
        return self.lines.pop(0) if self.lines else None


async def inputs(session: PlaySession) -> list[str]:
    return [e.text for e in await session.entries() if e.speaker == "user"]


async def test_at_a_terminal_the_impersonated_draft_is_the_next_line_and_enter_sends_the_edit(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    reader = Scripted(["/impersonate", "/state", "EDITED", "/impersonate", "", "/quit"], terminal=True)
    session = PlaySession(rt, sid, DEMO, reader)  # type: ignore[arg-type]
    await play_loop.play_loop(session)
    draft = reader.offered[1]
    assert draft.endswith(DEMO_DRAFT)
    assert reader.offered[2] == draft  # a /command leaves the draft for the line after
    assert reader.offered[3] == ""  # "EDITED" was played and the draft is gone
    assert reader.offered[5] == ""  # an erased line dropped the second draft
    assert await inputs(session) == ["EDITED"]
    await rt.aclose()


async def test_from_a_pipe_the_draft_waits_for_send(store: EventStore, capsys: pytest.CaptureFixture[str]) -> None:
    rt, sid = await sample_story(store)
    reader = Scripted(["/impersonate", " (softly)", "/send"], terminal=False)
    session = PlaySession(rt, sid, DEMO, reader)  # type: ignore[arg-type]
    await play_loop.play_loop(session)
    assert set(reader.offered) == {""}  # nothing is pre-filled in a pipe
    assert "draft: " in capsys.readouterr().err
    sent = await inputs(session)
    assert len(sent) == 1 and sent[0].endswith(f"{DEMO_DRAFT} (softly)")
    await rt.aclose()


async def test_continue_in_play_extends_the_reply_and_undo_takes_it_back(store: EventStore, capsys: pytest.CaptureFixture[str]) -> None:
    rt, sid = await sample_story(store)
    session = PlaySession(rt, sid, DEMO, Scripted([], terminal=False))  # type: ignore[arg-type]
    await handle_line(session, "I knock.")
    reply = (await session.entries())[-1]
    await handle_line(session, "/continue")
    assert DEMO_CONTINUED in capsys.readouterr().out  # streamed like any reply
    extended = (await visible_entries(rt, sid))[-1]
    assert extended.message_id == reply.message_id and extended.text.startswith(reply.text)
    await handle_line(session, "/undo")
    assert "(undone: the continuation of the last reply)" in capsys.readouterr().err
    assert (await session.entries())[-1] == reply
    await rt.aclose()


async def test_hooks_see_the_start_every_line_and_every_reply(store: EventStore, monkeypatch: pytest.MonkeyPatch) -> None:
    rt, sid = await sample_story(store)
    seen: list[Any] = []

    async def on_start(play: PlaySession) -> None:
        seen.append("start")

    async def before_line(play: PlaySession, line: str) -> bool:
        seen.append(("line", line))
        return line == "#mine"  # a hook may take a line for itself

    async def after_reply(play: PlaySession, result: RunResult) -> None:
        seen.append(("reply", result.committed))

    monkeypatch.setitem(play_loop.ON_START, "test", on_start)
    monkeypatch.setitem(play_loop.BEFORE_LINE, "test", before_line)
    monkeypatch.setitem(play_loop.AFTER_REPLY, "test", after_reply)
    session = PlaySession(rt, sid, DEMO, Scripted(["#mine", "I wait.", "/continue"], terminal=False))  # type: ignore[arg-type]
    await play_loop.play_loop(session)
    assert seen == ["start", ("line", "#mine"), ("line", "I wait."), ("reply", True), ("line", "/continue"), ("reply", True)]
    assert await inputs(session) == ["I wait."]  # "#mine" was the hook's
    await rt.aclose()


async def test_a_command_a_core_module_adds_gets_the_whole_session(store: EventStore, monkeypatch: pytest.MonkeyPatch) -> None:
    rt, sid = await sample_story(store)
    got: list[Any] = []

    async def where(play: PlaySession, argument: str) -> None:
        got.append((play.session_id, play.route, argument))

    monkeypatch.setitem(play_loop.PLAY_COMMANDS, "/where", (where, "say where you are"))
    session = PlaySession(rt, sid, DEMO, Scripted([], terminal=False))  # type: ignore[arg-type]
    await handle_line(session, "/where  now ")
    assert got == [(sid, DEMO, "now")]
    with pytest.raises(RpError) as unknown:
        await handle_line(session, "/nowhere")
    assert unknown.value.code == "cli.play.unknown_command"
    await rt.aclose()


async def test_errors_are_reported_and_play_goes_on(store: EventStore, capsys: pytest.CaptureFixture[str]) -> None:
    rt, sid = await sample_story(store, opening="skip")
    reader = Scripted(["/undo", "/continue", "/send", "/bogus", "I knock."], terminal=False)
    session = PlaySession(rt, sid, DEMO, reader)  # type: ignore[arg-type]
    await play_loop.play_loop(session)
    err = capsys.readouterr().err
    for code in ("message.nothing_to_undo", "continue.nothing_to_continue", "cli.play.empty_draft", "cli.play.unknown_command"):
        assert f"error [{code}]" in err
    assert await inputs(session) == ["I knock."]
    await rt.aclose()


async def test_ctrl_c_while_drafting_stops_the_draft_and_play_goes_on(
    store: EventStore, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def sigint_then_wait(abort: asyncio.Event) -> str:
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C: sets the abort, does not interrupt play
        await asyncio.wait_for(abort.wait(), 5)
        return "stopped"

    assert await play_loop.interruptible(sigint_then_wait) == "stopped"

    async def aborted(*args: Any, **kwargs: Any) -> Any:
        raise RpError("subagent.aborted", "the sub-agent was aborted by its parent")

    rt, sid = await sample_story(store)
    monkeypatch.setattr(play_loop, "impersonate", aborted)
    session = PlaySession(rt, sid, DEMO, Scripted(["/impersonate", "I knock."], terminal=False))  # type: ignore[arg-type]
    await play_loop.play_loop(session)
    assert "(drafting stopped)" in capsys.readouterr().err and session.draft.text == ""
    assert await inputs(session) == ["I knock."]
    await rt.aclose()
