"""``rp new``, ``rp say``, ``rp play``, ``rp prompt``: play stories from the terminal.

Every command honours ``--model`` (the parent's route) and ``--home``/``RP_HOME``/
``RP_DATABASE_URL``. ``rp new --model`` (and ``rp play --model`` starting a story) keeps the route
on the session profile; later commands use it unless they are given ``--model`` themselves, and a
session without one follows ``RP_MODEL`` and the keys set (``core/session_route.py``). The Writer
uses the session's own Writer route when its profile sets one, else the global default
``RP_WRITER_MODEL``, else it follows the conversation's route.

``rp play`` reads lines: ``/``-commands are handled (an unknown one is refused, never sent as story
text; ``//`` sends a line that starts with ``/``), everything else is played. An error inside play
(nothing to undo, a busy session, a failed turn) is reported and play goes on.

Features add ``/``-commands through ``RoleplayRuntime.play_commands``; those may insert into the
player's draft (``core/play_draft.py``; quick replies' ``/qr LABEL``) but never play it. A
terminal line cannot be pre-filled portably, so the draft is shown with its cursor, typed lines
go in at the cursor, and only ``/send`` plays it (``/draft`` shows it, ``/clear`` drops it).

Story text (openings, replies, prompts, state) comes from cards, players and models, so it is
printed through ``terminal_safe``; a typed line that is not UTF-8 is refused and play goes on.
"""

from __future__ import annotations

import os
import sys
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import click

from roleplay.assets.seeds import ensure_seeds
from roleplay.assets.service import AssetService
from roleplay.cli_context import echo_error, echo_json, home_option, json_option, json_text, read_text_line, run, state_of, terminal_safe
from roleplay.errors import RpError
from roleplay.harness.chat import stream_turn
from roleplay.harness.models.routes import Route, resolve_route
from roleplay.harness.prompts import PromptAssembly, PromptContext
from roleplay.harness.surface import SURFACE
from roleplay.names import ASSET_READ_TOOL, COMMIT_TURN_TOOL, STATE_PROJECTION, STATE_READ_TOOL, WRITE_TURN_TOOL
from roleplay.samples import SAMPLE_CARD, sample_card_bytes
from roleplay.state.events import activity_document, state_document

from .conversation import Entry, project
from .message_actions import undo_last_turn
from .play_draft import Draft
from .replies import replies_projection
from .run import RunResult, opening_message_id, play_turn, prepare_run
from .runtime import RoleplayRuntime
from .session_create import StoryRequest, create_story
from .session_route import resolve_session_route
from .toolfree import NOT_COMMITTED, TOOLS_REFUSED
from .turn_eligibility import require_playable
from .types import WindowFit

model_option = click.option(
    "--model",
    "model_spec",
    help="Route, e.g. deepseek/deepseek-flash, openai/<model>, or demo (offline). Default: the session's own route, else $RP_MODEL.",
)
new_model_option = click.option(
    "--model",
    "model_spec",
    help="The story's route, kept on the session and used by later commands: deepseek/deepseek-flash, openai/<model>, demo (offline)…",
)
# The play commands and what /help says about them, in /help order.
PLAY_COMMANDS = {
    "/state": "show the story state",
    "/undo": "take back your last turn",
    "/send": "play your draft as your turn (a feature such as /qr put it there)",
    "/draft": "show your draft",
    "/clear": "drop your draft",
    "/help": "list these commands",
    "/quit": "leave (also /exit or Ctrl-D)",
}
participation_option = click.option(
    "--participation",
    type=click.Choice(["adaptive", "actor", "director"]),
    default="adaptive",
    show_default=True,
    help="How you take part in a new story: adaptive reads each input (acting, observing, directing); actor plays your own character; director steers from outside.",
)


@asynccontextmanager
async def runtime(ctx: click.Context) -> AsyncIterator[RoleplayRuntime]:
    async with state_of(ctx).open_store() as store:
        # The Writer's global default route; sessions may override it (runtime.writerRoute).
        writer = os.environ.get("RP_WRITER_MODEL")
        factory = state_of(ctx).runtime_factory or RoleplayRuntime.create
        rt = factory(store, writer_default=resolve_route(writer) if writer else None)
        await ensure_seeds(rt.assets)
        try:
            yield rt
        finally:
            await rt.aclose()


async def sample_card_id(rt: RoleplayRuntime) -> str:
    """Import the bundled sample card once (a re-import returns the same asset)."""
    result = await AssetService(rt.store).import_file(sample_card_bytes(), SAMPLE_CARD)
    return result.asset_id


def parse_opening(value: str | None, text: str | None) -> dict[str, Any]:
    if value is None:
        return {"opening": "custom", "opening_text": text} if text else {}
    if value == "skip":
        return {"opening": "skip"}
    if value == "custom" or value.startswith("custom:"):
        body = text if value == "custom" else value[len("custom:") :]
        return {"opening": "custom", "opening_text": body or ""}
    try:
        return {"opening": "card", "opening_index": int(value)}
    except ValueError:
        raise RpError("cli.invalid_opening", f"--opening takes N, skip or custom (got {value!r})", pointer="/opening") from None


async def new_story(rt: RoleplayRuntime, card: str | None, sample: bool, **kw: Any) -> tuple[Any, Any]:
    if sample:
        card = await sample_card_id(rt)
    return await create_story(rt, StoryRequest(card=card, **kw))


@click.command("new")
@home_option
@click.option("--card", help="Character card asset id.")
@click.option("--sample", is_flag=True, help="Use the bundled sample card (imported on first use).")
@click.option("--persona", help="Persona asset id (default: the default persona).")
@click.option("--preset", help="Preset asset id (default: the default preset).")
@click.option("--lorebook", "lorebooks", multiple=True, help="Lorebook asset id (repeat; default: the card's own).")
@click.option("--style", "styles", multiple=True, help="Writing style asset id (repeat; default: the default style).")
@click.option("--opening", help="N (0 = first message, n = alternate greeting n), skip, custom or custom:TEXT.")
@click.option("--opening-text", help="The text of a custom opening.")
@participation_option
@click.option("--title")
@new_model_option
@json_option
@click.pass_context
@run
async def new_command(
    ctx: click.Context,
    card: str | None,
    sample: bool,
    persona: str | None,
    preset: str | None,
    lorebooks: tuple[str, ...],
    styles: tuple[str, ...],
    opening: str | None,
    opening_text: str | None,
    participation: str,
    title: str | None,
    model_spec: str | None,
    as_json: bool,
) -> None:
    """Start a story."""
    if card is None and not sample:
        raise RpError("cli.card_required", "choose a card with --card ID (see `rp assets list --kind card`) or --sample")
    route = resolve_route(model_spec) if model_spec else None  # a bad route creates nothing
    async with runtime(ctx) as rt:
        record, m = await new_story(
            rt, card, sample, persona=persona, preset=preset, lorebooks=list(lorebooks) or None,
            writing_styles=list(styles) or None, title=title, participation=participation, route=route,
            **parse_opening(opening, opening_text),
        )  # fmt: skip
    if as_json:
        echo_json(
            {
                "sessionId": record.id,
                "title": record.title,
                "participation": participation,
                "route": route.spec if route else None,
                "opening": m.opening_message_text,
                "diagnostics": m.diagnostics,
            }
        )
        return
    click.echo(terminal_safe(f"session {record.id} · {record.title}", one_line=True), err=True)
    if m.opening_message_text:
        click.echo(terminal_safe(m.opening_message_text))


@click.command("say")
@home_option
@click.argument("session_id")
@click.argument("text")
@model_option
@json_option
@click.pass_context
@run
async def say_command(ctx: click.Context, session_id: str, text: str, model_spec: str | None, as_json: bool) -> None:
    """Play one turn of SESSION_ID and stream the reply."""
    async with runtime(ctx) as rt:
        route = await resolve_session_route(rt, session_id, model_spec)
        result = await _turn(rt, session_id, text, route, sys.stdout if not as_json else _Quiet())
    _warn_turn(result)
    if as_json:
        echo_json(_result_json(result))
    elif result.turn.outcome != "completed":
        _fail_turn(result)


@click.command("play")
@home_option
@click.option("--card", help="Start a new story with this card.")
@click.option("--sample", is_flag=True, help="Start a new story with the bundled sample card.")
@click.option("--session", "session_id", help="Continue this session.")
@participation_option
@model_option
@click.pass_context
@run
async def play_command(
    ctx: click.Context, card: str | None, sample: bool, session_id: str | None, participation: str, model_spec: str | None
) -> None:
    """Interactive play. Type to play; /help lists the commands."""
    async with runtime(ctx) as rt:
        if session_id is None:
            # Resolved before the story exists: a bad or missing route creates nothing.
            route = resolve_route(model_spec)
            if card is None and not sample:
                card = await _choose_card(rt)
            record, m = await new_story(rt, card, sample and card is None, participation=participation, route=route if model_spec else None)
            session_id = record.id
            click.echo(terminal_safe(f"session {record.id} · {record.title} · model {rt.model_for(route).label}", one_line=True), err=True)
            if m.opening_message_text:
                click.echo(terminal_safe(m.opening_message_text) + "\n")
        else:
            await require_playable(rt, session_id)  # refuse before the prompt, not at the first line
            route = await resolve_session_route(rt, session_id, model_spec)
            click.echo(terminal_safe(f"session {session_id} · model {rt.model_for(route).label}", one_line=True), err=True)
            _echo_recap(await _entries(rt, session_id))
        click.echo("type to play · " + " · ".join(PLAY_COMMANDS), err=True)
        number = 0
        draft = Draft()  # features insert into it; only /send plays it
        while True:
            number += 1
            try:
                line = _read_line(number)
            except RpError as exc:
                echo_error(exc)  # a garbled line is not played; the story goes on
                continue
            if line is None or line.strip() in ("/quit", "/exit"):
                return
            try:
                await _play_line(rt, session_id, line, route, draft)
            except RpError as exc:
                echo_error(exc)  # nothing to undo, a busy session, a refused turn: play goes on


async def _play_line(rt: RoleplayRuntime, session_id: str, line: str, route: Route, draft: Draft | None = None) -> None:
    draft = Draft() if draft is None else draft
    command = line.strip()
    if not command:
        return
    if command.startswith("//"):
        line = line.lstrip()[1:]  # "//text" sends "/text" as story text
    elif command.startswith("/"):
        name, *rest = command.split(maxsplit=1)
        argument = rest[0] if rest else ""
        if name == "/help":
            for key, what in [*PLAY_COMMANDS.items(), *((k, h) for k, (_, h) in rt.play_commands.items())]:
                click.echo(f"{key:<10} {what}", err=True)
            click.echo("//text     send text that starts with /", err=True)
        elif name == "/send":
            if not draft.text.strip():
                raise RpError("cli.play.empty_draft", "your draft is empty; /qr LABEL puts a quick reply in it")
            await _play_text(rt, session_id, draft.text, route)
            draft.clear()  # only once played: a refused turn keeps the draft for another try
        elif name == "/draft":
            _echo_draft(draft)
        elif name == "/clear":
            draft.clear()
            click.echo("(draft dropped)", err=True)
        elif name in rt.play_commands:
            await rt.play_commands[name][0](rt, argument, draft)
            _echo_draft(draft)
        elif name == "/state":
            click.echo(json_text(await _state(rt, session_id)))
        elif name == "/undo":
            before = await _entries(rt, session_id)
            await undo_last_turn(rt, session_id)
            click.echo(_undone(before, await _entries(rt, session_id)), err=True)
        else:
            raise RpError(
                "cli.play.unknown_command",
                f"unknown command {name}; /help lists the commands (start a line with // to send text beginning with /)",
                details={"command": name},
            )
        return
    if draft.text:
        # With a draft pending, a typed line goes into it at the cursor (over a selected
        # snippet, as typing over a selection does); the draft is played only by /send.
        draft.insert(line)
        _echo_draft(draft)
        return
    await _play_text(rt, session_id, line, route)


def _echo_draft(draft: Draft) -> None:
    if not draft.text:
        click.echo("(your draft is empty)", err=True)
        return
    click.echo(terminal_safe(f"draft: {draft.shown()}"), err=True)
    click.echo("(type to add at the cursor | or over the [selection] · /send plays it · /clear drops it)", err=True)


async def _play_text(rt: RoleplayRuntime, session_id: str, line: str, route: Route) -> None:
    result = await _turn(rt, session_id, line, route, sys.stdout)
    _warn_turn(result)
    if result.turn.outcome != "completed":
        err = result.turn.error or {}
        click.echo(
            terminal_safe(f"(turn ended: {result.turn.outcome} {err.get('code', '')} {err.get('message', '')})", one_line=True),
            err=True,
        )
    click.echo("")


async def _entries(rt: RoleplayRuntime, session_id: str) -> list[Entry]:
    """The conversation as the player sees it: their messages and the replies, no internal steps."""
    nodes = (await rt.service.projection(session_id, SURFACE)).state["nodes"]
    writing = (await rt.service.projection(session_id, replies_projection)).state["writing"]
    return project(nodes, writing_ids=writing, opening_id=opening_message_id(nodes))


def _last_exchange(entries: list[Entry]) -> list[Entry]:
    """The player's last message and the replies after it; the opening alone if they never spoke."""
    last_user = next((i for i in range(len(entries) - 1, -1, -1) if entries[i].speaker == "user"), None)
    if last_user is None:
        return entries[-1:]
    return entries[last_user:]


def _echo_recap(entries: list[Entry]) -> None:
    exchange = _last_exchange(entries)
    if not exchange:
        click.echo("(no messages yet)", err=True)
        return
    click.echo("(where you left off)", err=True)
    for entry in exchange:
        click.echo(terminal_safe(f"> {entry.text}" if entry.speaker == "user" else entry.text))
    click.echo("")


def _undone(before: list[Entry], after: list[Entry]) -> str:
    kept = {e.message_id for e in after}
    removed = [e for e in before if e.message_id not in kept]
    mine = sum(e.speaker == "user" for e in removed)
    replies = len(removed) - mine
    parts = [f"{mine} message{'s' if mine != 1 else ''} of yours"] if mine else []
    if replies:
        parts.append(f"{replies} repl{'ies' if replies != 1 else 'y'}")
    return f"(undone: your last turn, {' and '.join(parts) or 'nothing visible'})"


@click.command("prompt")
@home_option
@click.argument("session_id")
@click.option("--text", default="(next input)", show_default=True, help="The input to preview the turn with.")
@model_option
@json_option
@click.pass_context
@run
async def prompt_command(ctx: click.Context, session_id: str, text: str, model_spec: str | None, as_json: bool) -> None:
    """Show the exact Writer prompt and parent views the next turn would use."""
    async with runtime(ctx) as rt:
        await require_playable(rt, session_id, allow_archived=True)  # a preview writes nothing
        route = await resolve_session_route(rt, session_id, model_spec)
        p = await prepare_run(rt, session_id, text, parent_route=route)
    parent_system = PromptAssembly(p.parent_system_sections).assemble(
        PromptContext(session_id, frozenset({WRITE_TURN_TOOL, COMMIT_TURN_TOOL, ASSET_READ_TOOL, STATE_READ_TOOL}))
    )
    view = {
        "writer": {"route": p.writer_route.spec, "system": p.writer_system, "user": p.build.writer_prompt,
                   "sections": [s.slot_id for s in p.build.sections]},
        "parent": {"route": route.spec, "system": parent_system.text, "runContext": p.run_context},
        "participation": p.profile.participation,
        "epoch": p.build.epoch,
        "diagnostics": [d.to_dict() for d in p.build.diagnostics],
        "window": None if p.build.window is None else p.build.window.to_dict(),
    }  # fmt: skip
    if as_json:
        echo_json(view)
        return
    for title, body in (
        (f"WRITER SYSTEM ({p.writer_route.spec})", p.writer_system),
        ("WRITER PROMPT", p.build.writer_prompt),
        ("WRITER WINDOW", window_summary(p.build.window)),
        ("PARENT SYSTEM", parent_system.text),
        ("PARENT RUN CONTEXT", p.run_context),
    ):
        click.echo(terminal_safe(f"===== {title} =====\n{body}\n"))
    for d in p.build.diagnostics:
        click.echo(terminal_safe(f"! [{d.code}] {d.message}", one_line=True), err=True)


def window_summary(fit: WindowFit | None) -> str:
    """The cut ``rp prompt`` shows: the budget and how much history was left out."""
    if fit is None:
        return "window unknown for this route's model: the whole history is sent (set one with `rp settings set context.windows`)"
    return (
        f"window {fit.window} tokens = {fit.budget} for the prompt + {fit.reply_reserve} reserved for the reply"
        f" + {fit.fixed_tokens} for the system prompt and framing\n"
        f"prompt {fit.prompt_tokens} tokens (estimated)\n"
        f"history {fit.messages - fit.omitted} of {fit.messages} messages kept, {fit.omitted} oldest left out"
    )


async def _turn(rt: RoleplayRuntime, session_id: str, text: str, route: Route, out: Any) -> RunResult:
    return await stream_turn(
        rt.store,
        session_id,
        lambda abort: play_turn(rt, session_id, text, parent_route=route, abort=abort),
        out,
        lambda r: r.reply,
        status=None if isinstance(out, _Quiet) else sys.stderr,  # "writing…" and the elapsed time
    )


async def _state(rt: RoleplayRuntime, session_id: str) -> dict[str, Any]:
    tracker = (await rt.service.projection(session_id, STATE_PROJECTION)).state
    doc = state_document(tracker)
    return {
        "values": {name: ns["value"] for name, ns in doc.get("namespaces", {}).items()},
        "lastChanges": activity_document(tracker),
    }


async def _choose_card(rt: RoleplayRuntime) -> str:
    page = await rt.assets.list("card", limit=50)
    if not page.items:
        click.echo("no cards yet: playing the bundled sample card", err=True)
        return await sample_card_id(rt)
    for i, item in enumerate(page.items):
        click.echo(terminal_safe(f"  [{i}] {item.name}", one_line=True), err=True)
    click.echo("card number> ", nl=False, err=True)
    line = _read_line()
    try:
        return page.items[int((line or "0").strip() or 0)].id
    except (ValueError, IndexError):
        raise RpError("cli.invalid_choice", "not a card number from the list") from None


def _read_line(number: int | None = None) -> str | None:
    if sys.stdin.isatty():
        click.echo("> ", nl=False, err=True)
    return read_text_line(sys.stdin, line=number)


def _result_json(result: RunResult) -> dict[str, Any]:
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
    }


def _warn_turn(result: RunResult) -> None:
    """An uncommitted reply is never silent (the exit code stays 0: a discussion answer is a
    legitimate reply), nor is a tool-free turn that could not record its state changes."""
    if result.turn.outcome != "completed":
        return  # reported as the turn's error
    for d in result.diagnostics:
        if d["code"] in WARNED_CODES or d["code"].startswith("toolfree."):
            click.echo(terminal_safe(f"warning [{d['code']}]: {d['message']}", one_line=True), err=True)


def _fail_turn(result: RunResult) -> None:
    err = result.turn.error or {}
    raise RpError(err.get("code", "run.incomplete"), f"the turn ended with {result.turn.outcome}: {err.get('message', 'no commit')}")


WARNED_CODES = frozenset({NOT_COMMITTED, TOOLS_REFUSED})


class _Quiet:
    def write(self, _: str) -> None:
        return None

    def flush(self) -> None:
        return None


COMMANDS = [new_command, say_command, play_command, prompt_command]
