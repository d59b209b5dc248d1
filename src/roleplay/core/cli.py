"""``rp new``, ``rp say``, ``rp play``, ``rp continue``, ``rp impersonate``, ``rp prompt``: play stories from the terminal.

Every command honours ``--model`` (the parent's route) and ``--home``/``RP_HOME``/
``RP_DATABASE_URL``. ``rp new --model`` (and ``rp play --model`` starting a story) keeps the route
on the session profile; later commands use it unless they are given ``--model`` themselves, and a
session without one follows ``RP_MODEL`` and the keys set (``core/session_route.py``). The Writer
uses the session's own Writer route when its profile sets one, else the global default
``RP_WRITER_MODEL``, else it follows the conversation's route.

``rp play`` reads lines: ``/``-commands are handled (an unknown one is refused, never sent as story
text; ``//`` sends a line that starts with ``/``), everything else is played. An error inside play
(nothing to undo, a busy session, a failed turn) is reported and play goes on.

The loop itself, its commands and hooks are ``core/play_loop.py``; line editing and history at a
terminal ``core/line_editor.py``. ``/continue`` (``core/continue_turn.py``) has the Writer go on
with the last reply; ``/impersonate`` (``core/impersonate.py``) drafts the player's next message
into the input, never sending it. ``rp continue`` and ``rp impersonate`` do the same once.

Story text (openings, replies, prompts, state) comes from cards, players and models, so it is
printed through ``terminal_safe``; a typed line that is not UTF-8 is refused and play goes on.
"""

from __future__ import annotations

import inspect
import os
import sys
from contextlib import asynccontextmanager, redirect_stdout
from functools import partial
from typing import Any, AsyncIterator

import click

from roleplay.assets.edit_cli import offer_persona_name
from roleplay.assets.seeds import ensure_seeds, language_notice
from roleplay.assets.service import AssetService
from roleplay.cli_context import echo_json, home_option, json_line, json_option, read_text_line, run, state_of, terminal_safe
from roleplay.errors import RpError
from roleplay.harness.models.routes import resolve_route
from roleplay.harness.prompts import PromptAssembly, PromptContext
from roleplay.names import ASSET_READ_TOOL, COMMIT_TURN_TOOL, STATE_READ_TOOL, WRITE_TURN_TOOL
from roleplay.samples import SAMPLE_CARD, sample_card_bytes

from .continue_turn import continue_turn, extended_reply, visible_entries
from .conversation import Entry
from .impersonate import impersonate
from .line_editor import LineReader
from .play_loop import PLAY_COMMANDS, PlaySession, Quiet, play_loop, result_json, stream_run, turn_choices, warn_turn
from .agent_mode import parent_system_preview
from .run import RunResult, play_turn, prepare_run
from .runtime import RoleplayRuntime
from .session_create import StoryRequest, create_story
from .session_route import resolve_session_route
from .summary import pending_note
from .turn_eligibility import require_playable
from .types import WindowFit

__all__ = ["PLAY_COMMANDS", "COMMANDS"]

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
        if inspect.isawaitable(rt):  # the interface's factory reads the enabled features first
            rt = await rt
        notice = language_notice(await ensure_seeds(rt.assets))
        if notice:  # the first seeding stored the user's language: say so, once
            click.echo(notice, err=True)
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
@click.option(
    "--no",
    "left_out",
    multiple=True,
    type=click.Choice(["card", "persona", "preset", "lorebooks", "styles"]),
    help="Leave this kind out of the story explicitly (repeat), instead of its default.",
)
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
    left_out: tuple[str, ...],
    opening: str | None,
    opening_text: str | None,
    participation: str,
    title: str | None,
    model_spec: str | None,
    as_json: bool,
) -> None:
    """Start a story."""
    if card is None and not sample and "card" not in left_out:
        raise RpError("cli.card_required", "choose a card with --card ID (see `rp assets list --kind card`), --sample or --no card")
    chosen = {"card": card or sample, "persona": persona, "preset": preset, "lorebooks": lorebooks, "styles": styles}
    for kind in left_out:
        if chosen[kind]:
            raise RpError("cli.conflicting_options", f"--no {kind} leaves out what the command also chooses", pointer=f"/{kind}")
    route = resolve_route(model_spec) if model_spec else None  # a bad route creates nothing
    async with runtime(ctx) as rt:
        record, m = await new_story(
            rt, card, sample,
            persona=False if "persona" in left_out else persona,
            preset=False if "preset" in left_out else preset,
            lorebooks=[] if "lorebooks" in left_out else list(lorebooks) or None,
            writing_styles=[] if "styles" in left_out else list(styles) or None,
            title=title, participation=participation, route=route,
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
        route = resolve_route(model_spec) if model_spec else None  # else the story's, read under the lease
        start = partial(play_turn, rt, session_id, text, parent_route=route)
        result = await stream_run(rt, session_id, lambda abort: start(abort=abort), sys.stdout if not as_json else Quiet())
        offered = await turn_choices(rt, result)
    warn_turn(result)
    if as_json:
        echo_json({**result_json(result), "choices": offered})
    elif result.turn.outcome != "completed":
        _fail_turn(result)
    else:
        for i, option in enumerate(offered, 1):
            click.echo(terminal_safe(f"  [{i}] {option}", one_line=True), err=True)


@click.command("play")
@home_option
@click.option("--card", help="Start a new story with this card.")
@click.option("--sample", is_flag=True, help="Start a new story with the bundled sample card.")
@click.option("--session", "session_id", help="Continue this session.")
@participation_option
@model_option
@json_option
@click.pass_context
@run
async def play_command(
    ctx: click.Context,
    card: str | None,
    sample: bool,
    session_id: str | None,
    participation: str,
    model_spec: str | None,
    as_json: bool,
) -> None:
    """Interactive play. Type to play; /help lists the commands.

    With --json, stdout carries JSON Lines for a program driving play through stdin: a
    ``session`` event, the ``opening`` or a ``recap``, then a ``turn`` (as ``rp say --json``) or an
    ``error`` per line played; everything meant for a person goes to stderr."""
    if not as_json:
        await _play(ctx, card, sample, session_id, participation, model_spec, None)
        return
    out = sys.stdout

    def emit(event: dict[str, Any]) -> None:
        out.write(json_line(event) + "\n")
        out.flush()

    with redirect_stdout(sys.stderr):
        await _play(ctx, card, sample, session_id, participation, model_spec, emit)


async def _play(
    ctx: click.Context,
    card: str | None,
    sample: bool,
    session_id: str | None,
    participation: str,
    model_spec: str | None,
    emit: Any,
) -> None:
    async with runtime(ctx) as rt:
        if session_id is None:
            # Resolved before the story exists: a bad or missing route creates nothing.
            route = resolve_route(model_spec)
            if card is None and not sample:
                card = await _choose_card(rt, LineReader(None))
            names = LineReader(None)
            if names.terminal:  # first play: what stories call you, while the persona has its seeded name
                await offer_persona_name(rt.assets, lambda prompt, default: names.read(prompt=prompt, default=default))
            record, m = await new_story(rt, card, sample and card is None, participation=participation, route=route if model_spec else None)
            session_id = record.id
            click.echo(terminal_safe(f"session {record.id} · {record.title} · model {rt.model_for(route).label}", one_line=True), err=True)
            if emit is not None:
                emit({"type": "session", "sessionId": record.id, "title": record.title, "model": rt.model_for(route).label, "new": True})
                emit({"type": "opening", "text": m.opening_message_text or ""})
            elif m.opening_message_text:
                click.echo(terminal_safe(m.opening_message_text) + "\n")
        else:
            await require_playable(rt, session_id)  # refuse before the prompt, not at the first line
            route = await resolve_session_route(rt, session_id, model_spec)
            click.echo(terminal_safe(f"session {session_id} · model {rt.model_for(route).label}", one_line=True), err=True)
            entries = await visible_entries(rt, session_id)
            if emit is not None:
                emit({"type": "session", "sessionId": session_id, "model": rt.model_for(route).label, "new": False})
                recap = [{"messageId": e.message_id, "speaker": e.speaker, "text": e.text} for e in _last_exchange(entries)]
                emit({"type": "recap", "messages": recap})
            else:
                _echo_recap(entries)
        reader = LineReader(state_of(ctx).paths.home)
        await play_loop(PlaySession(rt, session_id, route, reader, events=emit))


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
        pending = await pending_note(rt, session_id)  # a summary that lands when the next turn starts
    notes = [*p.build.diagnostics, *([pending] if pending is not None else [])]
    parent_system = (
        PromptAssembly(p.parent_system_sections)
        .assemble(PromptContext(session_id, frozenset({WRITE_TURN_TOOL, COMMIT_TURN_TOOL, ASSET_READ_TOOL, STATE_READ_TOOL})))
        .text
    )
    if p.mode == "agent":
        parent_system = parent_system_preview(rt, p)  # with every Agent tool's guidance
    view = {
        "writer": {"route": p.writer_route.spec, "system": p.writer_system, "user": p.build.writer_prompt,
                   "sections": [s.slot_id for s in p.build.sections]},
        "parent": {"route": route.spec, "mode": p.mode, "system": parent_system, "runContext": p.run_context},
        "participation": p.profile.participation,
        "epoch": p.build.epoch,
        "diagnostics": [d.to_dict() for d in notes],
        "window": None if p.build.window is None else p.build.window.to_dict(),
    }  # fmt: skip
    if as_json:
        echo_json(view)
        return
    for title, body in (
        (f"WRITER SYSTEM ({p.writer_route.spec})", p.writer_system),
        ("WRITER PROMPT", p.build.writer_prompt),
        ("WRITER WINDOW", window_summary(p.build.window)),
        ("PARENT SYSTEM", parent_system),
        ("PARENT RUN CONTEXT", p.run_context),
    ):
        click.echo(terminal_safe(f"===== {title} =====\n{body}\n"))
    for d in notes:
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


async def _choose_card(rt: RoleplayRuntime, reader: LineReader) -> str:
    page = await rt.assets.list("card", limit=50)
    if not page.items:
        click.echo("no cards yet: playing the bundled sample card", err=True)
        return await sample_card_id(rt)
    for i, item in enumerate(page.items):
        click.echo(terminal_safe(f"  [{i}] {item.name}", one_line=True), err=True)
    if reader.terminal:
        line = await reader.read(prompt="card number> ")
    else:
        click.echo("card number> ", nl=False, err=True)
        line = read_text_line(sys.stdin)
    try:
        return page.items[int((line or "0").strip() or 0)].id
    except (ValueError, IndexError):
        raise RpError("cli.invalid_choice", "not a card number from the list") from None


@click.command("continue")
@home_option
@click.argument("session_id")
@model_option
@json_option
@click.pass_context
@run
async def continue_command(ctx: click.Context, session_id: str, model_spec: str | None, as_json: bool) -> None:
    """The Writer goes on with the last reply of SESSION_ID, as one more turn."""
    async with runtime(ctx) as rt:
        route = resolve_route(model_spec) if model_spec else None  # else the story's, read under the lease
        start = partial(continue_turn, rt, session_id, parent_route=route)
        result = await stream_run(rt, session_id, lambda abort: start(abort=abort), sys.stdout if not as_json else Quiet())
        whole = await extended_reply(rt, session_id)
    warn_turn(result)
    if as_json:
        echo_json({**result_json(result), "extendedReply": None if whole is None else {"messageId": whole.message_id, "text": whole.text}})
    elif result.turn.outcome != "completed":
        _fail_turn(result)


@click.command("impersonate")
@home_option
@click.argument("session_id")
@model_option
@json_option
@click.pass_context
@run
async def impersonate_command(ctx: click.Context, session_id: str, model_spec: str | None, as_json: bool) -> None:
    """Draft your next message in SESSION_ID in your persona's voice; nothing is sent."""
    async with runtime(ctx) as rt:
        route = await resolve_session_route(rt, session_id, model_spec)
        drafted = await impersonate(rt, session_id, parent_route=route)
    if as_json:
        echo_json({"sessionId": session_id, **drafted.to_dict()})
        return
    click.echo(terminal_safe(drafted.draft))
    click.echo(f'(a draft, not sent: play it with rp say {session_id} "…" after editing it)', err=True)


def _fail_turn(result: RunResult) -> None:
    err = result.turn.error or {}
    raise RpError(err.get("code", "run.incomplete"), f"the turn ended with {result.turn.outcome}: {err.get('message', 'no commit')}")


COMMANDS = [new_command, say_command, play_command, continue_command, impersonate_command, prompt_command]
