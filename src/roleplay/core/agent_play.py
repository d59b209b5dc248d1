"""``/mode`` in ``rp play``: show the story's execution mode at start and switch it between turns.

Registered into the play loop's tables (``core.play_loop`` calls :func:`register`), like the
message actions. The switch is the same CAS on the profile revision as ``rp mode``; between turns
the session is idle, so it is allowed (a turn running elsewhere makes it ``run.busy``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from .execution_mode import MODES, set_mode
from .profile import profile_of, session_projection

if TYPE_CHECKING:
    from .play_loop import PlaySession

MODE_NOTES = {
    "chat": "chat mode: the Writer's text is the reply, as written",
    "agent": "agent mode: an orchestrating parent with specialists, asset and State tools",
}


async def current_mode(play: PlaySession) -> str:
    loaded = await play.rt.service.projection(play.session_id, session_projection)
    return profile_of(loaded.state).execution_mode


async def _mode(play: PlaySession, argument: str) -> None:
    wanted = argument.strip().lower()
    if not wanted:
        mode = await current_mode(play)
        click.echo(f"({MODE_NOTES[mode]}; /mode {'agent' if mode == 'chat' else 'chat'} switches)", err=True)
        return
    if wanted not in MODES:
        click.echo(f"(/mode takes {' or '.join(MODES)}, not {wanted!r})", err=True)
        return
    view = await set_mode(play.rt, play.session_id, wanted)
    click.echo(f"(now in {MODE_NOTES[view['executionMode']]}, from the next turn)", err=True)


async def _show_mode(play: PlaySession) -> None:
    click.echo(f"({MODE_NOTES[await current_mode(play)]} · /mode switches)", err=True)


def register(commands: dict[str, Any], on_start: dict[str, Any]) -> None:
    """Add ``/mode`` and the start-up line (idempotent: names are replaced in place)."""
    commands["/mode"] = (_mode, "show the execution mode, or switch it: /mode chat · /mode agent")
    on_start["agent:show-mode"] = _show_mode


__all__ = ["register"]
