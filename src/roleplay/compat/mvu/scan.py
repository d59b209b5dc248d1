"""Linear-time scanners for MVU's block and command syntax.

MVU finds its blocks with backtracking regular expressions (mvu.md §2.6, §2.10, §2.11). Written
the same way in Python they are quadratic or worse on hostile text: an unclosed
``<jsonpatch>```​`` makes the lazy body scan to the end once per opening and once more per
character of the fence line, and an unclosed ``_.set(`` scans to the end once per command. Card
text is untrusted and cleaned at every turn, so each scanner here returns exactly what the
regular expression would, but computes it from sorted tag positions in (near) linear time. The
tests compare them with the regular expressions on random tag soup.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterator

_WS = re.compile(r"\s*")
_QUOTES_PARENS = re.compile(r"[\"'`()]")


class LineIndex:
    """1-based line numbers of offsets in one text, each lookup O(log lines)."""

    def __init__(self, text: str) -> None:
        self._newlines = [m.start() for m in re.finditer("\n", text)]

    def line(self, offset: int) -> int:
        return bisect_left(self._newlines, max(0, offset)) + 1


@lru_cache(maxsize=1024)
def tag_key(name: str) -> str:
    """How a backreference under ``re.IGNORECASE`` compares a tag name: per character, lowercased.

    ``str.lower`` maps ``İ`` to two characters where the regex engine uses ``i``; everything else
    (including ``ſ``, which the opening pattern accepts for ``s`` but a backreference does not)
    compares by its lowercase form.
    """
    return "".join("i" if ch == "\u0130" else ch.lower() for ch in name)


@dataclass(frozen=True)
class Block:
    start: int  # the opening tag
    end: int  # just after the closing tag
    body_start: int
    body_end: int
    name: str  # the opening tag's name as written


def find_blocks(text: str, name: str, *, tempered: bool) -> list[Block]:
    """``<(NAME)>(?:\\s*```.*)?(BODY*?)(?:```\\s*)?</\\1>`` with ``re.IGNORECASE``, like ``finditer``.

    ``BODY`` is ``(?:(?!<NAME>)[\\s\\S])`` when ``tempered`` (JSON Patch blocks cannot contain
    another opening tag) and ``[\\s\\S]`` otherwise (``<initvar>``). How the regex resolves one
    opening, and how this function reproduces it:

    * with a fence after the tag (whitespace, then three backticks), the greedy ``.*`` first takes
      the rest of the fence line (body starts at its end ``e``); if no close follows, it gives back
      one character at a time, and the first position that works is the last closing tag on the
      fence line itself (an empty body); failing both, the fence is not taken (body at the tag);
    * a body start ``s`` works when the first closing tag of the same name at or after ``s`` comes
      before any opening tag (tempered only); the body then ends at that tag, or at three
      backticks and whitespace right before it;
    * after a match the search resumes at its end; after a failure, at the next opening.
    """
    flags = re.IGNORECASE
    opens = [(m.start(), m.end(), m.group(1)) for m in re.finditer(f"<({name})>", text, flags)]
    if not opens:
        return []
    open_starts = [o[0] for o in opens]
    closes: dict[str, list[int]] = {}
    close_end: dict[int, int] = {}
    for m in re.finditer(f"</({name})>", text, flags):
        closes.setdefault(tag_key(m.group(1)), []).append(m.start())
        close_end[m.start()] = m.end()
    fence_before: dict[int, int] = {}
    for starts in closes.values():
        for c in starts:
            w = c
            while w > 0 and text[w - 1].isspace():
                w -= 1
            if w >= 3 and text[w - 3 : w] == "```":
                fence_before[c] = w - 3

    def attempt(s: int, key: str) -> Block | None:
        positions = closes.get(key, ())
        i = bisect_left(positions, s)
        if i == len(positions):
            return None
        c = positions[i]
        if tempered:
            j = bisect_left(open_starts, s)
            if j < len(open_starts) and open_starts[j] < c:
                return None
        k = fence_before.get(c, -1)
        return Block(-1, close_end[c], s, k if k >= s else c, "")

    blocks: list[Block] = []
    newlines: list[int] | None = None
    resume = 0
    for start, after, written in opens:
        if start < resume:
            continue
        key = tag_key(written)
        found = None
        spaces = _WS.match(text, after)  # `\s*` always matches, possibly empty
        fence_at = spaces.end() if spaces else after
        if text.startswith("```", fence_at):
            f = fence_at + 3
            # Not ``text.find``: with no line break left, each opening would scan to the end.
            if newlines is None:
                newlines = [m.start() for m in re.finditer("\n", text)]
            n = bisect_left(newlines, f)
            e = newlines[n] if n < len(newlines) else len(text)
            found = attempt(e, key)
            if found is None:
                positions = closes.get(key, ())
                i = bisect_left(positions, e) - 1
                if i >= 0 and positions[i] >= f:
                    c = positions[i]
                    found = Block(-1, close_end[c], c, c, "")
        if found is None:
            found = attempt(after, key)
        if found is not None:
            blocks.append(Block(start, found.end, found.body_start, found.body_end, written))
            resume = found.end
    return blocks


def simple_spans(text: str, opening: str, closing: str, *, backref: str | None = None) -> list[tuple[int, int]]:
    """Spans of ``OPENING[\\s\\S]*?CLOSING`` (``re.IGNORECASE``) as ``finditer`` would find them.

    With ``backref`` (a group name pattern), the closing tag must repeat the opening's name, as
    ``<(NAME)>[\\s\\S]*?</\\1>`` requires; otherwise any closing tag ends the block.
    """
    flags = re.IGNORECASE
    if backref is not None:
        opening, closing = f"<({backref})>", f"</({backref})>"
    opens = list(re.finditer(opening, text, flags))
    if not opens:
        return []
    by_key: dict[str, list[tuple[int, int]]] = {}
    for m in re.finditer(closing, text, flags):
        key = tag_key(m.group(1)) if backref is not None else ""
        by_key.setdefault(key, []).append((m.start(), m.end()))
    starts = {key: [c[0] for c in items] for key, items in by_key.items()}
    spans: list[tuple[int, int]] = []
    resume = 0
    for m in opens:
        if m.start() < resume:
            continue
        key = tag_key(m.group(1)) if backref is not None else ""
        positions = starts.get(key, [])
        i = bisect_left(positions, m.end())
        if i < len(positions):
            spans.append((m.start(), by_key[key][i][1]))
            resume = by_key[key][i][1]
    return spans


def remove_spans(text: str, spans: list[tuple[int, int]]) -> str:
    pieces: list[str] = []
    last = 0
    for start, end in spans:
        if start >= last:
            pieces.append(text[last:start])
            last = end
    pieces.append(text[last:])
    return "".join(pieces)


def inside(spans: list[tuple[int, int]], offset: int) -> bool:
    """Whether ``offset`` lies in one of the sorted, non-overlapping ``spans``."""
    i = bisect_right(spans, (offset, float("inf"))) - 1
    return i >= 0 and spans[i][0] <= offset < spans[i][1]


def paren_closes(text: str, origins: list[int]) -> dict[int, int]:
    """For each origin (the index just after a command's ``(``): the index of its matching ``)``.

    MVU's scan from one origin counts parentheses outside ``'`` ``"`` and backtick quotes (a
    quote preceded by a backslash does not count), starting outside quotes at depth 1; -1 when
    depth 0 is never reached. Scanning from every origin is quadratic; one pass suffices because
    a quote character *swaps* "outside" with "inside that quote" and leaves the other states
    alone — a permutation of the four quote states. So four scans started at offset 0 in the
    four states are, at every offset, in four different states, and the scan from an origin is
    the one that is outside quotes there, with its depth shifted by a constant. Each of the four
    keeps a stack of the origins it carries; an origin closes when its scan's depth returns to
    one below where it joined.
    """
    closes = {origin: -1 for origin in origins}
    if not origins:
        return closes
    states: list[str | None] = [None, "'", '"', "`"]
    depth = [0, 0, 0, 0]
    stacks: list[list[tuple[int, int]]] = [[], [], [], []]
    pending = sorted(set(origins))
    p = 0

    def join_until(offset: int) -> None:
        nonlocal p
        while p < len(pending) and pending[p] <= offset:
            t = states.index(None)
            stacks[t].append((depth[t], pending[p]))
            p += 1

    for m in _QUOTES_PARENS.finditer(text, pending[0]):
        i = m.start()
        join_until(i)
        ch = text[i]
        if ch in "\"'`":
            if i > 0 and text[i - 1] == "\\":
                continue
            for t in range(4):
                if states[t] is None:
                    states[t] = ch
                elif states[t] == ch:
                    states[t] = None
            continue
        t = states.index(None)
        if ch == "(":
            depth[t] += 1
            continue
        depth[t] -= 1
        stack = stacks[t]
        while stack and stack[-1][0] - 1 == depth[t]:
            closes[stack.pop()[1]] = i
    return closes


def ejs_matches(text: str, openers: str = "_=-#") -> Iterator[tuple[int, int, str, int, int, str]]:
    r"""``<%([OPENERS]?)([\s\S]*?)([_\-]?)%>`` as ``finditer``: (start, end, opener, body_start,
    body_end, closer).

    The first ``%>`` after the opener ends the tag; when there is none, no later ``<%`` can close
    either, so the scan stops instead of retrying at every ``<%``. (With ``%`` among the openers,
    ``<%%>`` is the one case where the opener gives its character back to the ``%>``.)
    """
    pos = 0
    while True:
        start = text.find("<%", pos)
        if start == -1:
            return
        body = start + 2
        opener = ""
        if body < len(text) and text[body] in openers:
            t = text.find("%>", body + 1)
            if t != -1:
                opener, body = text[body], body + 1
            else:
                t = text.find("%>", body)
        else:
            t = text.find("%>", body)
        if t == -1:
            return
        closer = text[t - 1] if t - 1 >= body and text[t - 1] in "_-" else ""
        yield start, t + 2, opener, body, t - len(closer), closer
        pos = t + 2


def ejs_tags(text: str) -> Iterator[tuple[int, int, int, int]]:
    r"""``<%[_=\-#]?([\s\S]*?)[_\-]?%>`` (the detection grammar): (start, end, body_start, body_end)."""
    for start, end, _opener, body_start, body_end, _closer in ejs_matches(text):
        yield start, end, body_start, body_end


_QUOTE_CHARS = "\\\"'` "


def strip_quotes(text: str) -> str:
    """``re.sub(r"^[\\\"'` ]*(.*?)[\\\"'` ]*$", r"\1", text, flags=re.DOTALL)`` without its
    quadratic retries on long runs of spaces or quotes. ``$`` also matches before a final line
    break, so that break survives and the run before it goes."""
    start = len(text) - len(text.lstrip(_QUOTE_CHARS))
    if text.endswith("\n"):
        end, tail = len(text[:-1].rstrip(_QUOTE_CHARS)), "\n"
    else:
        end, tail = len(text.rstrip(_QUOTE_CHARS)), ""
    return text[start : max(start, end)] + tail
