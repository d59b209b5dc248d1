"""Per-message figures of the Writer's conversation, kept across turns (issue 12 item 5).

Fitting ``rp.conversation`` into the Writer's window needs, at every turn, the conversation's text,
each message's token cost (to pick the oldest message kept) and the token count of the prompt
holding the kept messages. Done from scratch, all three cost a Python step per message of the
whole history, at every turn. A turn only adds a message or two at the end, so a
:class:`HistoryTally` keeps, per message, its rendered block and the running sums of its figures:
the text of any newest run of messages is one C-level join, the cut is a bisection and the
prompt's count is a difference of two running sums plus the count of what is around the messages.

The figures are exact, not estimates of the estimate: a message's block is the text
``render_entries`` gives it, its cost is what ``context_build`` charged per message before, and
the counts go through ``tokens.count_around``, which equals ``count_tokens`` of the whole prompt.
A tally is matched to a history by its messages (the same objects, or equal ones), never by the
session: a history that differs from the kept one anywhere is recomputed from that message on.
"""

from __future__ import annotations

import hashlib
import operator
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from itertools import accumulate
from typing import Any, TypeVar

from roleplay.harness.models import tokens

from .conversation import CONVERSATION_NOTE, Entry, render_entries

Escape = Callable[[str], str]
T = TypeVar("T")

_CHAINS_MAX = 16  # histories kept (a server plays many stories); the least recently used goes
_chains: dict[tuple[str, str], "HistoryTally"] = {}


class _Escaped:
    """One escape function's figures for a tally's messages."""

    __slots__ = ("counted", "escaped", "changed", "blocks", "offsets", "costs", "stats")

    def __init__(self, counted: bool) -> None:
        # False: only the escaped renders are kept (``escaped``: a prompt built without a window
        # needs no message's cost); the rest follows the first time it is asked for.
        self.counted = counted
        self.escaped: list[str] = []  # escape(render): the very render when escaping left it as it was
        self.changed: list[int] = []  # indexes of the messages escaping changed, in order
        self.blocks: list[str] = []  # escape(render) + "\n\n": how a message sits in the prompt
        self.offsets: list[int] = [0]  # running sums of the blocks' lengths
        self.costs: list[int] = [0]  # running sums of count_tokens(escaped render) + 1
        self.stats: list[tokens.Stats] = [tokens.NO_STATS]  # running sums of the blocks' stats


class HistoryTally:
    """A history's messages with their rendered blocks and running figures (see the module)."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.raw: list[str] = []  # render_entries((entry,))
        self._escaped: dict[Escape, _Escaped] = {}
        # The whole history's text as last rendered (of its first ``count`` messages) and the
        # sha256 of its UTF-8 bytes, as a hash object that can go on with more messages.
        self._whole: tuple[int, str, Any] | None = None
        self._last: tuple[int, int, str] | None = None  # the last trimmed text given: its messages' range

    def sync(self, history: Sequence[Entry]) -> None:
        """Match the tally to ``history``: keep the figures of the messages it starts with, drop
        the rest, and work out the new ones."""
        kept = self.entries
        n = len(kept)
        if len(history) >= n and list(history[:n]) == kept:
            same = n
        else:
            same, top = 0, min(n, len(history))
            while same < top and (history[same] is kept[same] or history[same] == kept[same]):
                same += 1
        if same < n:
            del kept[same:], self.raw[same:]
            if self._whole is not None and self._whole[0] > same:
                self._whole = None
            self._last = None
            for figures in self._escaped.values():
                del figures.escaped[same:], figures.blocks[same:]
                del figures.offsets[same + 1 :], figures.costs[same + 1 :], figures.stats[same + 1 :]
                del figures.changed[bisect_left(figures.changed, same) :]
        if len(history) > same:
            new = history[same:]
            kept.extend(new)
            self.raw.extend(render_entries((e,)) for e in new)
            for escape, figures in self._escaped.items():
                self._extend(escape, figures, same)

    def text(self, start: int = 0) -> str:
        """``text_of_entries`` of the messages from ``start`` on. The whole history's is kept
        (the same string object until a message is added or changed) with its sha256."""
        if start >= len(self.raw):
            return ""
        if start:
            # One join (a trimmed window's text is most of a long story's): the note joined on
            # to the messages' text afterwards copied all of it again.
            text = "\n\n".join([CONVERSATION_NOTE, *self.raw[start:]])
            self._last = (start, len(self.raw), text)
            return text
        return self._whole_text()[1]

    def escaped(self, text: str, escape: Escape) -> str | None:
        """``escape(text)`` when ``text`` is a conversation text this tally gave (the whole
        history's, or the last trimmed one: the very object), from the messages' kept escaped
        renders instead of a pass of the escape's regex over the whole text (issue 12): ``text``
        itself when escaping changes none of its messages, else their escaped renders joined.
        None for any other text. Escaping a text is escaping each of its messages and the note
        apart: a control tag lies within one message, and what may follow it at a message's end
        (the end of the text, ``$``) is a line break (``\\s``) in the joined text."""
        whole, last = self._whole, self._last
        if whole is not None and whole[1] is text:
            start, end = 0, whole[0]
        elif last is not None and last[2] is text:
            start, end = last[0], last[1]
        else:
            return None
        figures = self._escapes(escape)
        note = escape(CONVERSATION_NOTE)
        changed = figures.changed
        if note is CONVERSATION_NOTE and bisect_left(changed, start) == bisect_left(changed, end):
            return text
        return "\n\n".join([note, *figures.escaped[start:end]])

    def digest(self, text: str) -> str | None:
        """The sha256 (hex, of the UTF-8 bytes) of ``text`` when it is the whole history's text
        this tally last gave (the very object), else None."""
        whole = self._whole
        if whole is None or whole[1] is not text:
            return None
        return str(whole[2].hexdigest())

    def _whole_text(self) -> tuple[int, str, Any]:
        whole, n = self._whole, len(self.raw)
        if whole is not None and whole[0] == n:
            return whole
        if whole is None:
            added = "\n\n".join([CONVERSATION_NOTE, *self.raw])
            text, hasher = added, hashlib.sha256()
        else:  # messages were added: the text and its hash go on from the last ones
            added = "\n\n" + "\n\n".join(self.raw[whole[0] :])
            text, hasher = whole[1] + added, whole[2].copy()
        hasher.update(added.encode("utf-8"))
        self._whole = (n, text, hasher)
        return self._whole

    def cost(self, index: int, escape: Escape) -> int:
        """The message's cost in the prompt: its escaped block's tokens and the blank line after it."""
        costs = self._figures(escape).costs
        return costs[index + 1] - costs[index]

    def keep_within(self, room: int, escape: Escape) -> int:
        """How many of the newest messages fit in ``room`` tokens, their costs summed newest first
        (the first that does not fit ends the run)."""
        costs = self._figures(escape).costs
        n = len(costs) - 1
        if room < 0:
            return 0
        return n - bisect_left(costs, costs[n] - room, 0, n + 1)

    def tokens_at_least(self, escape: Escape) -> int:
        """A floor of ``count_tokens`` of any prompt that holds the conversation's text (rendered
        from these messages and escaped as a whole with ``escape``): the count of every message's
        block but the newest's (whose trailing whitespace the section may strip). Each block is in
        such a prompt as it is here (escaping never reaches across the blank line between two
        messages) and starts with its label's ``[``, which no counted run goes on into, so its
        figures add to the rest's, and the count only grows with the figures."""
        return tokens.stats_tokens(self.stats_at_least(escape))

    def stats_at_least(self, escape: Escape) -> tokens.Stats:
        """The figures behind ``tokens_at_least``, to add to those of the rest of such a prompt."""
        stats = self._figures(escape).stats
        return stats[max(len(stats) - 2, 0)]

    def count(self, text: str, start: int, escape: Escape) -> int:
        """``count_tokens(text)`` of a prompt holding the messages from ``start`` on, escaped with
        ``escape``: the longest run of their blocks found where the first one is counts by its
        running sums, what is around it by itself. Exact whatever the prompt (a message escaped
        differently as part of the whole, the Character's Note among the messages): the run simply
        ends earlier, or there is none."""
        figures = self._figures(escape)
        n = len(self.entries)
        if start >= n or len(text) < tokens.SPLIT_FROM:
            return tokens.count_tokens(text)
        blocks, offsets = figures.blocks, figures.offsets
        at = text.find(blocks[start])
        if at < 0:
            return tokens.count_tokens(text)
        end = self._run_end(text, at, start, figures)
        stop = at + offsets[end] - offsets[start]
        middle = tokens.sub_stats(figures.stats[end], figures.stats[start])
        total = tokens.count_around(text, text[:at], middle, text[stop:])
        if total is None:  # a boundary a counted run could span: counted by its parts instead
            return tokens.count_parts(text, [text[:at], *blocks[start:end], text[stop:]])
        return total

    # -- internals -------------------------------------------------------------------------------
    def _figures(self, escape: Escape) -> _Escaped:
        figures = self._escaped.get(escape)
        if figures is None:
            figures = self._escaped[escape] = _Escaped(True)
            self._extend(escape, figures, 0)
        elif not figures.counted:
            figures.counted = True
            self._count(figures, figures.escaped)
        return figures

    def _escapes(self, escape: Escape) -> _Escaped:
        """The messages' escaped renders, without their figures when none were asked for yet."""
        figures = self._escaped.get(escape)
        if figures is None:
            figures = self._escaped[escape] = _Escaped(False)
            self._extend(escape, figures, 0)
        return figures

    def _extend(self, escape: Escape, figures: _Escaped, start: int) -> None:
        raw = self.raw[start:]
        escaped = [escape(r) for r in raw]
        figures.escaped.extend(escaped)
        figures.changed.extend(start + i for i, (e, r) in enumerate(zip(escaped, raw)) if e != r)
        if figures.counted:
            self._count(figures, escaped)

    @staticmethod
    def _count(figures: _Escaped, escaped: Sequence[str]) -> None:
        """The figures of ``escaped``, the renders after those already counted."""
        blocks = [f"{e}\n\n" for e in escaped]
        figures.blocks.extend(blocks)
        figures.offsets += _running(figures.offsets[-1], map(len, blocks))
        figures.costs += _running(figures.costs[-1], (tokens.count_tokens(e) + 1 for e in escaped))
        figures.stats += _running(figures.stats[-1], map(tokens.part_stats, blocks), tokens.add_stats)

    @staticmethod
    def _run_end(text: str, at: int, start: int, figures: _Escaped) -> int:
        """The end of the longest run of blocks from ``start`` that ``text`` holds from ``at``: the
        whole rest first, then all but the newest (whose text ends the section), then a bisection
        (a run's prefixes are runs too)."""
        blocks, offsets = figures.blocks, figures.offsets
        n = len(blocks)

        def holds(end: int) -> bool:
            # The run's last block where it would be first (one block, not the whole run, for a
            # run that ends earlier): the newest message's block is not followed by a blank line.
            last = at + offsets[end - 1] - offsets[start]
            return text.startswith(blocks[end - 1], last) and text.startswith("".join(blocks[start:end]), at)

        if holds(n):
            return n
        if n - 1 > start and holds(n - 1):
            return n - 1
        low, high = start + 1, n - 1  # blocks[start] is there (found); blocks[start:n-1] is not
        while high - low > 1:
            mid = (low + high) // 2
            if holds(mid):
                low = mid
            else:
                high = mid
        return low


def _running(base: T, values: Iterable[T], add: Callable[[T, T], T] = operator.add) -> list[T]:
    """The running sums of ``values`` after ``base`` (``base`` itself left out)."""
    sums = list(accumulate(values, add, initial=base))
    del sums[0]
    return sums


def tally(history: Sequence[Entry]) -> HistoryTally:
    """The tally of ``history`` (synced to it), kept across turns by its first message."""
    key = ("", "") if not history else (history[0].message_id, history[0].text[:64])
    kept = _chains.pop(key, None)
    if kept is None:
        kept = HistoryTally()
    kept.sync(history)
    _chains[key] = kept  # most recently used last
    while len(_chains) > _CHAINS_MAX:
        _chains.pop(next(iter(_chains)))
    return kept


def history_text(history: Sequence[Entry]) -> str:
    """``text_of_entries(history)``, from the kept tally: a turn renders only its new messages."""
    return tally(history).text()


def known_digest(text: str) -> str | None:
    """The sha256 of ``text`` when it is a kept history's whole text (``history_text``), which
    is hashed as it grows instead of from its first byte at every turn; else None."""
    for kept in _chains.values():
        digest = kept.digest(text)
        if digest is not None:
            return digest
    return None
