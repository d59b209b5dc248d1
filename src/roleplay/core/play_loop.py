"""The ``rp play`` loop: read a line, run a ``/command`` or play it, report errors and go on.

**Commands.** ``PLAY_COMMANDS`` holds the built-in ``/name → (handler, what /help says)``, in
/help order; a handler is ``async (play, argument) -> None`` and gets the whole ``PlaySession``
(the runtime, the session, its route, the draft, ``play.play(text)`` and ``play.run_streamed``).
Core modules add commands with one entry there. Features add theirs through
``RoleplayRuntime.play_commands`` (``async (rt, argument, draft)``, e.g. quick replies' ``/qr``);
those may insert into the draft but never play it. An unknown ``/command`` is refused, never sent
as story text; ``//text`` sends text that starts with ``/``. Any ``RpError`` (nothing to undo, a
busy session, a refused turn) is reported and play goes on.

**Hooks**, by name (registering a name again replaces it, so a runtime built twice is harmless):
``ON_START`` runs before the first line, ``BEFORE_LINE`` sees every typed line first and returns
True when it handled it, ``AFTER_REPLY`` runs after each reply is shown (also after /continue).

**The draft** (``core/play_draft.py``) holds text put aside for the player's next message: a quick
reply, an impersonation. It is never played by itself. At a terminal the next line is pre-filled
with it, editable (``core/line_editor.py``): Enter sends the edited line, an erased line drops the
draft, a ``/command`` leaves it for the line after. Elsewhere (pipes) the draft is shown with its
cursor, typed lines go in at the cursor, and only ``/send`` plays it.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, TypeVar

import click

from roleplay.cli_context import echo_error, json_text, terminal_safe
from roleplay.errors import RpError
from roleplay.harness.chat import stream_turn
from roleplay.harness.models.routes import Route
from roleplay.names import COMMIT_TURN_TOOL, STATE_PROJECTION
from roleplay.state.events import activity_document, state_document

from .continue_turn import continue_turn, visible_entries
from .conversation import Entry
from .impersonate import impersonate
from .line_editor import LineReader
from .message_actions import undo_last_turn
from .play_draft import Draft
from .run import RunResult, play_turn
from .runtime import RoleplayRuntime
from .toolfree import NOT_COMMITTED, TOOLS_REFUSED

WARNED_CODES = frozenset({NOT_COMMITTED, TOOLS_REFUSED})
T = TypeVar("T")


class PlayExit(Exception):
    """Raised by a command to leave play (``/quit``)."""


@dataclass
class PlaySession:
    rt: RoleplayRuntime
    session_id: str
    route: Route
    reader: LineReader
    draft: Draft = field(default_factory=Draft)
    lines: int = 0  # lines read so far (error messages name the line)
    # Offered after the last reply (``RoleplayRuntime.turn_choices``: reply options); a number sends one.
    choices: list[str] = field(default_factory=list)
    # ``rp play --json``: each turn and error as one JSON object (a line on stdout); the notes meant
    # for a person go to stderr, and the reply is not streamed as text.
    events: Callable[[dict[str, Any]], None] | None = None

    def report(self, exc: RpError) -> None:
        """A recoverable error: shown, or an ``error`` event; play goes on either way."""
        if self.events is not None:
            self.events({"type": "error", "error": exc.to_dict()})
        else:
            echo_error(exc)

    async def play(self, text: str) -> RunResult:
        """Play ``text`` as the player's turn: streamed, warned about, then the after-reply hooks."""
        return await self.run_streamed(lambda abort: play_turn(self.rt, self.session_id, text, parent_route=self.route, abort=abort))

    async def run_streamed(self, start: Callable[[Any], Awaitable[RunResult]]) -> RunResult:
        """Run a turn-shaped call (``start(abort)``: a turn, a Continue, a regeneration) with its
        reply streamed to stdout, then report and run the after-reply hooks."""
        result = await stream_run(self.rt, self.session_id, start, Quiet() if self.events is not None else sys.stdout)
        warn_turn(result)
        if result.turn.outcome != "completed":
            err = result.turn.error or {}
            click.echo(
                terminal_safe(f"(turn ended: {result.turn.outcome} {err.get('code', '')} {err.get('message', '')})", one_line=True),
                err=True,
            )
        click.echo("")
        self.choices[:] = await turn_choices(self.rt, result)
        if self.events is not None:
            self.events({"type": "turn", **result_json(result), "choices": list(self.choices)})
        for i, option in enumerate(self.choices, 1):
            click.echo(terminal_safe(f"  [{i}] {option}", one_line=True))
        if self.choices:
            click.echo("(type a number to send that reply)", err=True)
        for hook in list(AFTER_REPLY.values()):
            await hook(self, result)
        return result

    async def entries(self) -> list[Entry]:
        """The conversation as the player reads it."""
        return await visible_entries(self.rt, self.session_id)

    def show_draft(self) -> None:
        if not self.draft.text:
            click.echo("(your draft is empty)", err=True)
        elif self.reader.prefills:
            click.echo("(your draft is in the line below: edit it, Enter sends it, erase it to drop it)", err=True)
        else:
            click.echo(terminal_safe(f"draft: {self.draft.shown()}"), err=True)
            click.echo("(type to add at the cursor | or over the [selection] · /send plays it · /clear drops it)", err=True)


PlayHandler = Callable[[PlaySession, str], Awaitable[None]]
ON_START: dict[str, Callable[[PlaySession], Awaitable[None]]] = {}
BEFORE_LINE: dict[str, Callable[[PlaySession, str], Awaitable[bool]]] = {}
AFTER_REPLY: dict[str, Callable[[PlaySession, RunResult], Awaitable[None]]] = {}


# -- the loop ------------------------------------------------------------------------------------


async def play_loop(play: PlaySession) -> None:
    click.echo("type to play · " + " · ".join(PLAY_COMMANDS), err=True)
    for hook in list(ON_START.values()):
        await hook(play)
    while True:
        play.lines += 1
        prefill = play.draft.text if play.reader.prefills else ""
        try:
            line = await play.reader.read(play.lines, default=prefill, cursor=play.draft.end if prefill else None)
        except RpError as exc:
            play.report(exc)  # a garbled line is not played; the story goes on
            continue
        if line is None:
            return
        try:
            await handle_line(play, line, prefilled=bool(prefill))
        except PlayExit:
            return
        except RpError as exc:
            play.report(exc)  # nothing to undo, a busy session, a refused turn: play goes on


async def handle_line(play: PlaySession, line: str, *, prefilled: bool = False) -> None:
    """One line: a hook's, a command, or story text (into the draft, or played)."""
    for hook in list(BEFORE_LINE.values()):
        if await hook(play, line):
            return
    command = line.strip()
    if prefilled and not command.startswith("/"):
        # The draft was offered as this line: what came back is the player's edit of it.
        play.draft.clear()
        if not command:
            click.echo("(draft dropped)", err=True)
            return
        await _play_keeping(play, line)
        return
    if not command:
        return
    if command.isdecimal() and 1 <= int(command) <= len(play.choices):
        # A number picks one of the choices shown after the last reply and sends it as if typed.
        picked = play.choices[int(command) - 1]
        click.echo(terminal_safe(f"> {picked}", one_line=True))
        await play.play(picked)
        return
    if command.startswith("//"):
        line = line.lstrip()[1:]  # "//text" sends "/text" as story text
    elif command.startswith("/"):
        name, *rest = command.split(maxsplit=1)
        argument = rest[0] if rest else ""
        name = ALIASES.get(name, name)
        if name in PLAY_COMMANDS:
            await PLAY_COMMANDS[name][0](play, argument)
        elif name in play.rt.play_commands:
            await play.rt.play_commands[name][0](play.rt, argument, play.draft)
            play.show_draft()
        else:
            raise RpError(
                "cli.play.unknown_command",
                f"unknown command {name}; /help lists the commands (start a line with // to send text beginning with /)",
                details={"command": name},
            )
        return
    if play.draft.text:
        # With a draft pending, a typed line goes into it at the cursor (over a selected
        # snippet, as typing over a selection does); the draft is played only by /send.
        play.draft.insert(line)
        play.show_draft()
        return
    await play.play(line)


async def _play_keeping(play: PlaySession, text: str) -> None:
    """Play ``text``; a refused turn puts it back in the draft for another try."""
    try:
        await play.play(text)
    except RpError:
        play.draft.clear()
        play.draft.insert(text)
        raise


# -- the built-in commands ------------------------------------------------------------------------


async def _help(play: PlaySession, argument: str) -> None:
    for key, (_, what) in [*PLAY_COMMANDS.items(), *play.rt.play_commands.items()]:
        click.echo(f"{key:<10} {what}", err=True)
    click.echo("//text     send text that starts with /", err=True)
    click.echo("N          send reply option N (shown numbered after a reply)", err=True)


async def _state(play: PlaySession, argument: str) -> None:
    if STATE_PROJECTION not in play.rt.service.projections.names():
        raise RpError("features.disabled", "story state is turned off (rp-state); `rp features enable rp-state` turns it on")
    click.echo(json_text(await state_view(play.rt, play.session_id)))


async def _undo(play: PlaySession, argument: str) -> None:
    before = await play.entries()
    await undo_last_turn(play.rt, play.session_id)
    click.echo(undone_note(before, await play.entries()), err=True)
    await show_last_choices(play)  # the undone reply's options went with it; the reply now last offers its own


async def _continue(play: PlaySession, argument: str) -> None:
    await play.run_streamed(lambda abort: continue_turn(play.rt, play.session_id, parent_route=play.route, abort=abort))


async def _impersonate(play: PlaySession, argument: str) -> None:
    click.echo("(drafting your next message… Ctrl-C stops)", err=True)
    try:
        drafted = await interruptible(lambda abort: impersonate(play.rt, play.session_id, parent_route=play.route, abort=abort))
    except RpError as exc:
        if exc.code != "subagent.aborted":
            raise
        click.echo("(drafting stopped)", err=True)
        return
    play.draft.clear()
    play.draft.insert(drafted.draft)
    play.show_draft()


async def _send(play: PlaySession, argument: str) -> None:
    if not play.draft.text.strip():
        raise RpError("cli.play.empty_draft", "your draft is empty; /impersonate or /qr LABEL puts text in it")
    await _play_keeping(play, play.draft.text)
    play.draft.clear()  # only once played: a refused turn keeps the draft for another try


async def _draft(play: PlaySession, argument: str) -> None:
    play.show_draft()


async def _clear(play: PlaySession, argument: str) -> None:
    play.draft.clear()
    click.echo("(draft dropped)", err=True)


async def _quit(play: PlaySession, argument: str) -> None:
    raise PlayExit


PLAY_COMMANDS: dict[str, tuple[PlayHandler, str]] = {
    "/state": (_state, "show the story state"),
    "/undo": (_undo, "take back your last turn"),
    "/continue": (_continue, "the Writer goes on with the last reply (one more turn; /undo takes it back)"),
    "/impersonate": (_impersonate, "draft your next message in your persona; edit it, then send it"),
    "/send": (_send, "play your draft as your turn (/impersonate or a feature such as /qr put it there)"),
    "/draft": (_draft, "show your draft"),
    "/clear": (_clear, "drop your draft"),
    "/help": (_help, "list these commands"),
    "/quit": (_quit, "leave (also /exit or Ctrl-D)"),
}
ALIASES = {"/exit": "/quit"}


async def interruptible(call: Callable[[asyncio.Event], Awaitable[T]]) -> T:
    """``call(abort)`` with Ctrl-C setting ``abort`` (the call ends as aborted) instead of leaving
    play; outside the main thread there is no signal to take over and Ctrl-C behaves as usual."""
    abort = asyncio.Event()
    loop = asyncio.get_running_loop()
    try:
        loop.add_signal_handler(signal.SIGINT, abort.set)
        installed = True
    except (NotImplementedError, RuntimeError, ValueError):
        installed = False
    try:
        return await call(abort)
    finally:
        if installed:
            loop.remove_signal_handler(signal.SIGINT)


# -- shared with rp say -----------------------------------------------------------------------------


def result_json(result: RunResult) -> dict[str, Any]:
    turn = result.turn
    return {
        "sessionId": result.session_id,
        "turnId": turn.turn_id,
        "outcome": turn.outcome,
        "committed": result.committed,
        "reply": result.reply,
        "steps": turn.steps,
        "error": turn.error,
        "writer": None
        if result.writer is None
        else {"childSessionId": result.writer.child_session_id, "promptHash": result.writer.prompt_hash, "route": result.writer.route},
        "tools": [{"name": r.name, "ok": r.ok, "error": (r.error or {}).get("code")} for r in turn.tool_results],
        "diagnostics": result.diagnostics,
        # The commit's own (e.g. reply options that failed: ``artifact.failed``), kept on its result.
        "commitDiagnostics": commit_diagnostics(result),
    }


def commit_diagnostics(result: RunResult) -> list[dict[str, Any]]:
    """The diagnostics the turn's successful commit recorded (``meta.diagnostics``), or []."""
    for r in result.turn.tool_results:
        if r.ok and r.name == COMMIT_TURN_TOOL and isinstance(r.meta, dict):
            return [d for d in r.meta.get("diagnostics") or [] if isinstance(d, dict)]
    return []


async def stream_run(rt: RoleplayRuntime, session_id: str, start: Callable[[Any], Awaitable[RunResult]], out: Any) -> RunResult:
    """``start(abort)`` with the session's reply stream echoed to ``out`` ("writing…" and the
    elapsed time on stderr unless ``out`` is ``Quiet``)."""
    return await stream_turn(
        rt.store,
        session_id,
        start,
        out,
        lambda r: r.reply,
        status=None if isinstance(out, Quiet) else sys.stderr,
    )


async def turn_choices(rt: RoleplayRuntime, result: RunResult) -> list[str]:
    """What features offer after a completed turn (``RoleplayRuntime.turn_choices``), in order."""
    if result.turn.outcome != "completed":
        return []
    return [choice for provider in getattr(rt, "turn_choices", ()) for choice in await provider(rt, result)]


def warn_turn(result: RunResult) -> None:
    """An uncommitted reply is never silent (the exit code stays 0: a discussion answer is a
    legitimate reply), nor is a tool-free turn that could not record its state changes."""
    if result.turn.outcome != "completed":
        return  # reported as the turn's error
    for d in result.diagnostics:
        if d["code"] in WARNED_CODES or d["code"].startswith("toolfree."):
            click.echo(terminal_safe(f"warning [{d['code']}]: {d['message']}", one_line=True), err=True)


async def state_view(rt: RoleplayRuntime, session_id: str) -> dict[str, Any]:
    tracker = (await rt.service.projection(session_id, STATE_PROJECTION)).state
    doc = state_document(tracker)
    return {
        "values": {name: ns["value"] for name, ns in doc.get("namespaces", {}).items()},
        "lastChanges": activity_document(tracker),
    }


def undone_note(before: list[Entry], after: list[Entry]) -> str:
    """What an undo took back, in the messages the player saw (a continuation: part of a reply)."""
    kept = {e.message_id: e for e in after}
    removed = [e for e in before if e.message_id not in kept]
    mine = sum(e.speaker == "user" for e in removed)
    replies = len(removed) - mine
    parts = [f"{mine} message{'s' if mine != 1 else ''} of yours"] if mine else []
    if replies:
        parts.append(f"{replies} repl{'ies' if replies != 1 else 'y'}")
    if not removed and any(e.message_id in kept and kept[e.message_id].text != e.text for e in before):
        return "(undone: the continuation of the last reply)"
    return f"(undone: your last turn, {' and '.join(parts) or 'nothing visible'})"


class Quiet:
    """An output that prints nothing (``--json``: the reply goes into the JSON instead)."""

    def write(self, _: str) -> None:
        return None

    def flush(self) -> None:
        return None


# The message actions (/messages, /edit, /delete, /regen, /swipe, /branch), the reply numbers
# after each reply and start-up replay delivery (``core.actions_play``).
from .actions_play import register as _register_message_actions, show_last_choices  # noqa: E402

_register_message_actions(PLAY_COMMANDS, ON_START, AFTER_REPLY)

# /mode and the start-up line naming the execution mode (``core.agent_play``).
from .agent_play import register as _register_agent_play  # noqa: E402

_register_agent_play(PLAY_COMMANDS, ON_START)
