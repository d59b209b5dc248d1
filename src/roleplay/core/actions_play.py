"""The message actions inside ``rp play``: ``/messages``, ``/edit``, ``/delete``, ``/regen``,
``/swipe``, ``/branch``, message numbers after each reply, and start-up replay delivery.

Messages are named by the numbers ``/messages`` shows (the same as ``rp messages``); every
reply is followed by its number, and by ``i/n`` when it has alternatives to swipe through.
``/branch`` moves play to the new story (the source stays as it was). When play opens a story
whose regenerate was recorded but never delivered (the process stopped in between), the replay is
sent first (spec: 启动恢复会补投已记录但尚未进入 Inbox 的 replay).

**Choices follow the last reply.** After a played turn the play loop shows that turn's choices
(reply options). When play opens a story, or ``/undo``, ``/delete``, ``/swipe`` or ``/branch``
leaves another reply the last one, :func:`show_last_choices` shows that reply's choices
(``RoleplayRuntime.reply_choices``), so a typed number sends one of the options on screen.

:func:`register` adds the commands and hooks to the play loop's tables (``core.play_loop``).
"""

from __future__ import annotations

from typing import Any

import click

from roleplay.cli_context import terminal_safe
from roleplay.errors import RpError

from .branch import branch
from .message_actions import delete_from, edit_message, message_by_number, visible_messages
from .regenerate import deliver_pending_replay, pending_replay, regenerate
from .swipes import swipe


def message_line(item: dict[str, Any]) -> str:
    """One visible message as ``rp messages`` and ``rp play`` number it; a reply with alternatives
    carries a swipe counter after its speaker (``‹2/3›``: the second of three), as SillyTavern shows."""
    who = {"user": "you", "writing": "story", "non-writing": "reply"}.get(item["speaker"], item["speaker"])
    notes = []
    alts = item.get("alternatives")
    if alts and alts["index"] is not None:
        who += f" ‹{alts['index'] + 1}/{alts['count']}›"
    elif alts:
        notes.append(f"/swipe left for the reply before ({alts['count']})")
    if item.get("edited"):
        notes.append("edited")
    if item.get("failure"):
        notes.append(f"failed: {item['failure']['code']}")
    if item.get("active"):
        notes.append("a run is writing this turn now")
    suffix = f"  ({', '.join(notes)})" if notes else ""
    return f"[{item['number']}] {who}: {item['text']}{suffix}"


async def last_reply_choices(rt: Any, session_id: str) -> list[str]:
    """The choices of the reply that is last on the conversation now (none after your own message,
    a failed turn, or a reply that committed nothing)."""
    listed = await visible_messages(rt, session_id)
    last = listed[-1] if listed else None
    if last is None or last["speaker"] == "user" or last.get("outcome") != "committed" or last.get("failure"):
        return []
    return [choice for provider in getattr(rt, "reply_choices", ()) for choice in await provider(rt, session_id, last["turnId"])]


async def show_last_choices(play: Any) -> None:
    """Replace the numbered choices with the last reply's, and show them."""
    play.choices[:] = await last_reply_choices(play.rt, play.session_id)
    for i, option in enumerate(play.choices, 1):
        click.echo(terminal_safe(f"  [{i}] {option}", one_line=True))
    if play.choices:
        click.echo("(type a number to send that reply)", err=True)


async def _resume_choices(play: Any) -> None:
    if not play.choices:  # a delivered replay has shown its own already
        await show_last_choices(play)


async def _messages(play: Any, argument: str) -> None:
    for item in await visible_messages(play.rt, play.session_id):
        click.echo(terminal_safe(message_line(item)))


def _number_and_text(argument: str) -> tuple[str | None, str]:
    head, _, rest = argument.strip().partition(" ")
    if head.isdecimal() and rest.strip():
        return head, rest.strip()
    return None, argument.strip()


async def _edit(play: Any, argument: str) -> None:
    ref, text = _number_and_text(argument)
    if not text:
        raise RpError("cli.play.edit_usage", "/edit [N] TEXT: replace message N (default: the last reply) with TEXT")
    listed = await visible_messages(play.rt, play.session_id)
    if ref is None:
        last = next((m for m in reversed(listed) if m["speaker"] != "user"), None)
        if last is None:
            raise RpError("message.not_found", "there is no reply to edit yet")
        message_id, number = last["messageId"], last["number"]
    else:
        message_id, number = await message_by_number(play.rt, play.session_id, ref), int(ref)
    await edit_message(play.rt, play.session_id, message_id, text)
    click.echo(f"(edited [{number}])", err=True)


async def _delete(play: Any, argument: str) -> None:
    if not argument.strip():
        raise RpError("cli.play.delete_usage", "/delete N: delete message N and everything after it (/messages shows the numbers)")
    message_id = await message_by_number(play.rt, play.session_id, argument)
    masked = await delete_from(play.rt, play.session_id, message_id)
    click.echo(f"(deleted {len(masked)} message{'s' if len(masked) != 1 else ''} from [{argument.strip()}] on)", err=True)
    await show_last_choices(play)


async def _regen(play: Any, argument: str) -> None:
    save_edit = argument.strip() or None
    await play.run_streamed(lambda abort: regenerate(play.rt, play.session_id, parent_route=play.route, save_edit=save_edit, abort=abort))


async def _swipe(play: Any, argument: str) -> None:
    word = argument.strip() or "left"
    direction: Any = int(word) - 1 if word.isdecimal() else word
    moved = await swipe(play.rt, play.session_id, direction)
    listed = await visible_messages(play.rt, play.session_id)
    if listed:
        click.echo(terminal_safe(listed[-1]["text"]))
    click.echo(f"(alternative {moved['index'] + 1} of {moved['count']})", err=True)
    await show_last_choices(play)  # the alternative's own options


async def _branch(play: Any, argument: str) -> None:
    message_id = await message_by_number(play.rt, play.session_id, argument) if argument.strip() else None
    made = await branch(play.rt, play.session_id, at_message=message_id)
    click.echo(
        terminal_safe(f"(now playing branch {made.record.id}; the story {play.session_id} stays as it was)", one_line=True), err=True
    )
    play.session_id = made.record.id
    await show_last_choices(play)  # the branch's last reply keeps its options


async def _number_reply(play: Any, result: Any) -> None:
    listed = await visible_messages(play.rt, play.session_id)
    if not listed or listed[-1]["speaker"] == "user":
        return
    last = listed[-1]
    shown = last.get("alternatives")
    alts = f" · {shown['index'] + 1}/{shown['count']} (/swipe)" if shown and shown["index"] is not None else ""
    click.echo(f"([{last['number']}]{alts})", err=True)


async def _deliver_replay(play: Any) -> None:
    if await pending_replay(play.rt, play.session_id) is None:
        return
    click.echo("(sending again the message a regenerate had recorded)", err=True)
    await play.run_streamed(lambda abort: _deliver(play, abort))


async def _deliver(play: Any, abort: Any) -> Any:
    result = await deliver_pending_replay(play.rt, play.session_id, parent_route=play.route, abort=abort)
    if result is None:
        raise RpError("message.no_pending_replay", "the recorded replay was delivered meanwhile")
    return result


COMMANDS: dict[str, tuple[Any, str]] = {
    "/messages": (_messages, "list the messages with their numbers"),
    "/edit": (_edit, "/edit [N] TEXT: replace message N (default: the last reply); a reply keeps its effects"),
    "/delete": (_delete, "/delete N: delete message N and everything after it"),
    "/regen": (_regen, "write the last reply again (/regen TEXT: replace your last message first); the old one stays for /swipe"),
    "/swipe": (_swipe, "/swipe left|right|N: show another alternative of the last reply, with its own story state"),
    "/branch": (_branch, "/branch [N]: continue in a new story from after message N's turn (default: now)"),
}


def register(commands: dict[str, Any], on_start: dict[str, Any], after_reply: dict[str, Any]) -> None:
    """Add the actions to the play loop's tables (idempotent: names are replaced in place)."""
    commands.update(COMMANDS)
    on_start["message-actions:deliver-replay"] = _deliver_replay
    on_start["message-actions:choices"] = _resume_choices
    after_reply["message-actions:number"] = _number_reply
