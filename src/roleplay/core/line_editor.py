"""The player's input lines in ``rp play``: line editing and history at a terminal, plain lines elsewhere.

At a terminal (stdin and stderr both ttys) lines are read with prompt_toolkit: the arrow keys
move and edit, up/down recall earlier lines, and the history is kept per home in
``<home>/history/play`` (readable by the owner only: it holds story text), so it survives between
sessions. A line can be offered pre-filled (``default``): the player's draft (an impersonation, a
quick reply) appears as editable text with the cursor where the draft keeps it.

Anywhere else (a pipe, a file, a test runner's stdin) lines are read exactly as before, strictly
as UTF-8 (``cli_context.read_text_line``), and nothing is pre-filled: the caller shows the draft
instead. prompt_toolkit is imported only for a terminal.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from roleplay.cli_context import read_text_line

PROMPT = "> "
HISTORY_FILE = ("history", "play")


class LineReader:
    def __init__(self, home: Path | None, *, stdin: Any = None, terminal: bool | None = None) -> None:
        self.stdin = sys.stdin if stdin is None else stdin
        self.home = home
        if terminal is None:
            terminal = _isatty(self.stdin) and _isatty(sys.stderr)
        self.terminal = terminal
        self._session: Any = None

    @property
    def prefills(self) -> bool:
        """Whether ``read(default=…)`` shows the default as editable text (a terminal)."""
        return self.terminal

    async def read(self, number: int | None = None, *, prompt: str = PROMPT, default: str = "", cursor: int | None = None) -> str | None:
        """The next line, or None at the end of input (Ctrl-D at a terminal)."""
        if not self.terminal:
            if _isatty(self.stdin):
                click.echo(prompt, nl=False, err=True)
            return read_text_line(self.stdin, line=number)
        session = self._prompt_session()
        at = len(default) if cursor is None else max(0, min(cursor, len(default)))

        def place_cursor() -> None:
            session.default_buffer.cursor_position = at

        try:
            return await session.prompt_async(prompt, default=default, pre_run=place_cursor)
        except EOFError:
            return None

    def _prompt_session(self) -> Any:
        if self._session is None:
            from prompt_toolkit import PromptSession
            from prompt_toolkit.history import FileHistory, InMemoryHistory
            from prompt_toolkit.output import create_output

            history: Any = InMemoryHistory()
            path = history_path(self.home)
            if path is not None:
                try:
                    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                    path.touch(mode=0o600, exist_ok=True)
                    history = FileHistory(str(path))
                except OSError as exc:  # a read-only home still plays, without a kept history
                    click.echo(f"(input history not kept: {exc.strerror or exc})", err=True)
            # The prompt and the line being edited go to stderr, like every status line: stdout
            # holds only the story.
            self._session = PromptSession(history=history, output=create_output(stdout=sys.stderr))
        return self._session


def history_path(home: Path | None) -> Path | None:
    return None if home is None else home.joinpath(*HISTORY_FILE)


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


__all__ = ["LineReader", "history_path"]
