"""The player's draft in ``rp play``: text put aside for the next turn, with a cursor.

Features insert into the draft (quick replies: ``/qr NAME``; ``/impersonate``); nothing in it is
ever played until the player sends it. At a terminal ``rp play`` offers the draft as the editable
next line, with the cursor at the draft's (``core/play_loop.py``), and Enter sends the edited
line. Elsewhere (a pipe) there is no caret to move: the spec's browser draft keeps the caret where
the quick reply setting says (``end``, ``start`` or ``select`` the inserted text), so the draft
keeps its own selection, the next typed line goes in there (replacing a selected snippet the way
typing over a selection does), and ``/send`` plays it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Literal

Cursor = Literal["end", "start", "select"]


@dataclass
class Draft:
    text: str = ""
    start: int = 0  # the selection [start, end); start == end is a plain cursor
    end: int = 0

    def insert(self, text: str, cursor: Cursor = "end") -> None:
        """Put ``text`` over the selection and place the cursor as ``cursor`` says."""
        at = self.start
        self.text = self.text[:at] + text + self.text[self.end :]
        if cursor == "start":
            self.start = self.end = at
        elif cursor == "select":
            self.start, self.end = at, at + len(text)
        else:
            self.start = self.end = at + len(text)

    def clear(self) -> None:
        self.text, self.start, self.end = "", 0, 0

    def shown(self) -> str:
        """The draft with the cursor as ``|`` and a selection in ``[…]``."""
        head, body, tail = self.text[: self.start], self.text[self.start : self.end], self.text[self.end :]
        return f"{head}[{body}]{tail}" if body else f"{head}|{tail}"


# ``async (runtime, argument text, draft) -> None``: a ``/name`` command a feature adds to play.
# It may change the draft and print; it must never play a turn (only ``/send`` does).
PlayCommand = Callable[[Any, str, Draft], Awaitable[None]]

__all__ = ["Cursor", "Draft", "PlayCommand"]
