"""The player's draft in ``rp play``: text put aside for the next turn, with a cursor.

Features insert into the draft (quick replies: ``/qr NAME``); nothing in it is ever played until
the player sends it with ``/send``. The spec's browser draft keeps the caret where the quick
reply setting says (``end``, ``start`` or ``select`` the inserted text); a line terminal has no
caret to move, so the draft keeps its own selection and the next typed line goes in there,
replacing a selected snippet the way typing over a selection does.
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
