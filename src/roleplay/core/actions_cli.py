"""``rp messages``, ``rp edit``, ``rp delete``, ``rp regenerate``, ``rp swipe``, ``rp branch``,
``rp metrics``: the message actions from the terminal.

``MSG`` is a message id or its number as ``rp messages`` (and ``rp play``) show it. Every action
is refused with ``run.busy`` while a turn of the story runs. Story text is printed through
``terminal_safe``; ``--json`` prints the library result instead.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from roleplay.cli_context import echo_json, home_option, json_option, run, terminal_safe
from roleplay.harness.chat import stream_turn
from roleplay.harness.models.routes import resolve_route

from .actions_play import message_line
from .branch import branch, branch_tree, render_tree
from .cli import model_option, runtime
from .play_loop import commit_diagnostics
from .message_actions import delete_from, delete_turn, edit_message, message_by_number, visible_messages
from .metrics import parse_prices, session_metrics
from .regenerate import regenerate
from .run import RunResult
from .swipes import swipe
from .turn_surface import live_turns


@click.command("messages")
@home_option
@click.argument("session_id")
@json_option
@click.pass_context
@run
async def messages_command(ctx: click.Context, session_id: str, as_json: bool) -> None:
    """List the visible messages of SESSION_ID with their numbers and ids (and whether a run is
    writing one of their turns now)."""
    async with runtime(ctx) as rt:
        listed = await visible_messages(rt, session_id)
        live = await live_turns(rt, session_id)
    for item in listed:
        if "turnId" in item:  # live, not logged: the turn a run is writing now
            item["active"] = item["turnId"] == live["activeTurnId"]
    if as_json:
        echo_json({"sessionId": session_id, "running": live["running"], "activeTurnId": live["activeTurnId"], "messages": listed})
        return
    for item in listed:
        click.echo(terminal_safe(message_line(item)))
        click.echo(terminal_safe(f"    {item['messageId']}", one_line=True), err=True)


@click.command("edit")
@home_option
@click.argument("session_id")
@click.argument("message")
@click.argument("text")
@json_option
@click.pass_context
@run
async def edit_command(ctx: click.Context, session_id: str, message: str, text: str, as_json: bool) -> None:
    """Replace the text of MESSAGE (an id or its number) in SESSION_ID; a reply keeps its effects."""
    async with runtime(ctx) as rt:
        message_id = await message_by_number(rt, session_id, message)
        await edit_message(rt, session_id, message_id, text)
    if as_json:
        echo_json({"sessionId": session_id, "messageId": message_id, "edited": True})
    else:
        click.echo(terminal_safe(f"(edited {message_id})", one_line=True), err=True)


@click.command("delete")
@home_option
@click.argument("session_id")
@click.argument("message")
@json_option
@click.pass_context
@run
async def delete_command(ctx: click.Context, session_id: str, message: str, as_json: bool) -> None:
    """Delete MESSAGE (an id or its number) and everything after it; a failed reply keeps your message."""
    async with runtime(ctx) as rt:
        if message.startswith("turn_"):
            message_id, masked = message, await delete_turn(rt, session_id, message)  # a failed turn with no message to name
        else:
            message_id = await message_by_number(rt, session_id, message)
            masked = await delete_from(rt, session_id, message_id)
    if as_json:
        echo_json({"sessionId": session_id, "messageId": message_id, "deleted": masked})
    else:
        click.echo(f"(deleted {len(masked)} message{'s' if len(masked) != 1 else ''} from the story)", err=True)


def _turn_json(result: RunResult) -> dict[str, Any]:
    return {
        "sessionId": result.session_id,
        "turnId": result.turn.turn_id,
        "outcome": result.turn.outcome,
        "committed": result.committed,
        "reply": result.reply,
        "error": result.turn.error,
        "diagnostics": result.diagnostics,
        "commitDiagnostics": commit_diagnostics(result),
    }


class _Quiet:
    def write(self, _: str) -> None:
        return None

    def flush(self) -> None:
        return None


@click.command("regenerate")
@home_option
@click.argument("session_id")
@click.option("--save-edit", "save_edit", help="Replace your last message with this text first, then regenerate.")
@model_option
@json_option
@click.pass_context
@run
async def regenerate_command(ctx: click.Context, session_id: str, save_edit: str | None, model_spec: str | None, as_json: bool) -> None:
    """Write the last reply of SESSION_ID again; the replaced one stays as an alternative (rp swipe)."""
    async with runtime(ctx) as rt:
        route = resolve_route(model_spec) if model_spec else None  # else the story's, read under the lease
        out = _Quiet() if as_json else sys.stdout
        result = await stream_turn(
            rt.store,
            session_id,
            lambda abort: regenerate(rt, session_id, parent_route=route, save_edit=save_edit, abort=abort),
            out,
            lambda r: r.reply,
            status=None if as_json else sys.stderr,
        )
    if as_json:
        echo_json(_turn_json(result))
    elif result.turn.outcome != "completed":
        err = result.turn.error or {}
        from roleplay.errors import RpError

        raise RpError(err.get("code", "run.incomplete"), f"the turn ended with {result.turn.outcome}: {err.get('message', 'no commit')}")


@click.command("swipe")
@home_option
@click.argument("session_id")
@click.argument("direction")
@json_option
@click.pass_context
@run
async def swipe_command(ctx: click.Context, session_id: str, direction: str, as_json: bool) -> None:
    """Show another alternative of the last reply: DIRECTION is left, right or its number (1 = first)."""
    from roleplay.errors import RpError

    if direction.isdecimal():
        target: Any = int(direction) - 1
    elif direction in ("left", "right"):
        target = direction
    else:
        raise RpError("message.swipe_direction", f"swipe left, right or to a number (got {direction!r})", pointer="/direction")
    async with runtime(ctx) as rt:
        moved = await swipe(rt, session_id, target)
        listed = await visible_messages(rt, session_id)
    reply = next((m for m in reversed(listed) if m.get("alternatives")), listed[-1] if listed else None)
    if as_json:
        echo_json({"sessionId": session_id, **moved, "reply": reply})
        return
    click.echo(f"(alternative {moved['index'] + 1} of {moved['count']})", err=True)
    if reply is not None:
        click.echo(terminal_safe(reply["text"]))


@click.command("branch")
@home_option
@click.argument("session_id")
@click.option("--at", "at_message", help="Branch after this message's turn (an id or its number) or a turn id (default: the last turn).")
@click.option("--title", help="The new story's title (default: the source's, marked as a branch).")
@click.option("--tree", "show_tree", is_flag=True, help="Only list the story's branches as a tree.")
@json_option
@click.pass_context
@run
async def branch_command(
    ctx: click.Context, session_id: str, at_message: str | None, title: str | None, show_tree: bool, as_json: bool
) -> None:
    """Start a new story from SESSION_ID as it stood after a turn; the source is untouched."""
    async with runtime(ctx) as rt:
        made = None
        if not show_tree:
            at_turn = at_message if at_message and at_message.startswith("turn_") else None
            message_id = await message_by_number(rt, session_id, at_message) if at_message and not at_turn else None
            made = await branch(rt, session_id, at_message=message_id, at_turn=at_turn, title=title)
        tree = await branch_tree(rt, made.record.id if made else session_id)
    if as_json:
        echo_json({"branch": made.to_dict() if made else None, "tree": tree})
        return
    if made is not None:
        click.echo(
            terminal_safe(f"branch {made.record.id} (from {session_id} after turn {made.turn_id}, seq {made.point.at_seq})", one_line=True)
        )
    for line in render_tree(tree):
        click.echo(terminal_safe(line, one_line=True), err=made is not None)


@click.command("metrics")
@home_option
@click.argument("session_id")
@click.option("--price", "prices", multiple=True, help="provider/model=INPUT,OUTPUT: prices per million tokens (repeat per route).")
@json_option
@click.pass_context
@run
async def metrics_command(ctx: click.Context, session_id: str, prices: tuple[str, ...], as_json: bool) -> None:
    """Tokens, latency, route and cost of each reply of SESSION_ID and in total."""
    table = parse_prices(prices)
    async with runtime(ctx) as rt:
        report = await session_metrics(rt, session_id, table)
    if as_json:
        echo_json(report)
        return
    for n, reply in enumerate(report["replies"], 1):
        cost = f" · cost {reply['cost']:.6f}" if reply["cost"] is not None else ""
        latency = f"{reply['latencyMs']} ms" if reply["latencyMs"] is not None else "? ms"
        if reply["firstTokenMs"] is not None:
            latency += f" (first text {reply['firstTokenMs']} ms)"
        state = "" if reply["live"] else " · replaced or deleted"
        click.echo(
            f"{n:>3}. {reply['outcome']:<11} {reply['tokensIn']:>8} in {reply['tokensOut']:>6} out · {latency} · "
            f"{reply['route']} (writer {reply['writerRoute']}){cost}{state}"
        )
    for key, label in (("live", "on the story now"), ("all", "spent in total")):
        total = report[key]
        cost = f", cost {total['cost']:.6f}" if total["cost"] is not None else ""
        first = total["firstToken"]
        ttft = f", first text p50 {first['p50']:g} ms / mean {first['mean']:g} ms" if first else ""
        click.echo(
            f"{label}: {total['replies']} replies, {total['tokensIn']} in, {total['tokensOut']} out, {total['latencyMs']} ms{ttft}{cost}"
        )


COMMANDS = [messages_command, edit_command, delete_command, regenerate_command, swipe_command, branch_command, metrics_command]
