"""Bounding a loop request's history to the route's context window (issue 12).

Without a bound, every step re-sends the whole surface, and a long session overflows the model's
window (a 128K route near turn 90 of a roleplay story). The loop therefore splits each request's
history in two:

- the *current turn* (its user message and every step since) is sent whole: the model needs this
  turn's tool calls and results to go on;
- the *earlier turns* (after the runtime's ``LoopHooks.history`` view) give way to the window:
  whole exchanges, newest first, while they fit in the window minus the system prompt, the tool
  declarations, the current turn and a reply reserve.

An exchange starts at a user message and runs to the next one, so a tool call is never separated
from its result. The cut is a pure function of the messages and the budget (no clock, no cache
state), so a replay builds byte-identical requests. Within one turn the cut only moves forward:
the earlier steps' prefix is reused unchanged as long as it fits, which keeps the provider's
prompt cache warm between the steps of a turn.

Token counts are the harness estimator's (``models.tokens``): on the safe side of providers' own.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from itertools import accumulate
from dataclasses import dataclass
from typing import Sequence

from .models.tokens import count_tokens
from .models.types import ChatMessage, ToolSpec

# Role markers and chat-template tokens around one message.
FRAMING_PER_MESSAGE = 4
# Images are priced from their pixels, which are not read here: a flat allowance near a
# high-detail 1024×1024 image on OpenAI's scale (the Writer budget uses the same figure).
IMAGE_TOKENS = 1_536
# Kept free for the reply when the route sets no output limit (as for the Writer's budget).
DEFAULT_REPLY_RESERVE = 16_384

# Every step re-fits the same history: ``count_tokens`` memoises short texts and the lines of long
# ones itself (an lru_cache keyed by whole texts kept every Writer prompt of a long story alive).
_tokens = count_tokens


def reply_reserve(window: int, max_tokens: int | None) -> int:
    return max_tokens or min(DEFAULT_REPLY_RESERVE, window // 4)


def remember_tokens(message: ChatMessage, tokens: int) -> None:
    """Record ``message_tokens(message)`` for a message its maker never changes (the loop's
    converted history, shared by every step and turn), so that a caller summing a long request
    (the summary threshold) does not count or even hash each text again."""
    message.known_tokens = tokens


def message_tokens(message: ChatMessage) -> int:
    known = message.known_tokens
    if known is not None:
        return known
    content = message.content
    total = FRAMING_PER_MESSAGE + _tokens(message.text())
    if not isinstance(content, str):
        total += IMAGE_TOKENS * sum(1 for b in content if b.get("type") == "image")
    if message.reasoning:
        total += _tokens(message.reasoning)
    for call in message.tool_calls:
        total += _tokens(call.name) + _tokens(call.arguments)
    return total


# The figures of the last few requests' message lists, from their maker (the loop), which has
# each message's count at hand: a caller that sums a long request (the summary threshold, at every
# step) reads them instead of looking up every message. By list identity, the list kept with them.
_REQUESTS: dict[int, tuple[list[ChatMessage], "_Sums"]] = {}
_REQUESTS_MAX = 8


class _Sums:
    """The running sums of a request's message costs, kept as the pieces its maker had: the costs
    of a few leading messages, a run of messages whose running sums the maker keeps anyway (the
    loop's converted history: ``running[cut:]``, read, never copied), and the costs of a few
    trailing ones. So recording a long request costs no step per message (issue 12)."""

    __slots__ = ("lead", "running", "cut", "end", "tail")

    def __init__(self, lead: Sequence[int], running: Sequence[int], cut: int, tail: Sequence[int]) -> None:
        self.lead = list(accumulate(lead, initial=0))
        self.running, self.cut, self.end = running, cut, len(running) - 1
        self.tail = list(accumulate(tail, initial=0))

    def __len__(self) -> int:
        """How many messages the sums cover."""
        return len(self.lead) - 1 + self.end - self.cut + len(self.tail) - 1

    def at(self, i: int) -> int:
        """The costs of the first ``i`` messages (0 <= i <= len)."""
        lead = self.lead
        if i < len(lead):
            return lead[i]
        i -= len(lead) - 1
        running, cut, middle = self.running, self.cut, self.end - self.cut
        if i <= middle:
            return lead[-1] + running[cut + i] - running[cut]
        return lead[-1] + running[self.end] - running[cut] + self.tail[i - middle]


def remember_request(messages: list[ChatMessage], costs: Sequence[int]) -> None:
    """Record ``message_tokens`` of each of ``messages``, a request's list its maker never changes."""
    _remember(messages, _Sums((), list(accumulate(costs, initial=0)), 0, ()))


def remember_request_runs(messages: list[ChatMessage], lead: Sequence[int], running: Sequence[int], cut: int, tail: Sequence[int]) -> None:
    """``remember_request`` of ``messages`` made of messages costing ``lead``, then those whose
    costs' running sums (from 0) are ``running`` from index ``cut`` on (a list its maker never
    changes, but may extend), then messages costing ``tail``."""
    _remember(messages, _Sums(lead, running, cut, tail))


def _remember(messages: list[ChatMessage], sums: _Sums) -> None:
    if len(_REQUESTS) >= _REQUESTS_MAX:
        del _REQUESTS[next(iter(_REQUESTS))]
    _REQUESTS[id(messages)] = (messages, sums)


def messages_tokens(messages: Sequence[ChatMessage], start: int = 0, stop: int | None = None) -> int:
    """``sum(message_tokens(m) for m in messages[start:stop])``; no step per message for a
    request list its maker recorded (``remember_request``)."""
    known = _REQUESTS.get(id(messages))
    if known is not None and known[0] is messages and len(known[1]) == len(messages):
        first, last, _ = slice(start, stop).indices(len(messages))
        sums = known[1]
        return sums.at(max(last, first)) - sums.at(first)
    return sum(map(message_tokens, messages[start:stop]))


def tools_tokens(tools: Sequence[ToolSpec]) -> int:
    return sum(
        _tokens(json.dumps({"name": t.name, "description": t.description, "parameters": t.parameters}, ensure_ascii=False)) for t in tools
    )


@dataclass(frozen=True)
class HistoryFit:
    """How one request's earlier history was fitted: logged on ``model/request``."""

    window: int
    reply_reserve: int
    fixed_tokens: int  # system prompt, tool declarations and the current turn
    messages: int  # earlier messages offered by the runtime's history view
    omitted: int  # of those, left out (oldest first)

    def to_dict(self) -> dict[str, int]:
        return {
            "window": self.window,
            "replyReserve": self.reply_reserve,
            "fixedTokens": self.fixed_tokens,
            "messages": self.messages,
            "omitted": self.omitted,
        }


def exchange_starts(messages: Sequence[ChatMessage]) -> list[int]:
    """Where each exchange begins: 0, then every user message after the first message."""
    return [0] + [i for i, m in enumerate(messages) if i > 0 and m.role == "user"]


def fit_history(
    earlier: Sequence[ChatMessage],
    *,
    window: int,
    reply_reserve: int,
    fixed_tokens: int,
    floor: int = 0,
    costs: Sequence[int] | None = None,
    running: Sequence[int] | None = None,
    starts: Sequence[int] | None = None,
) -> tuple[int, HistoryFit]:
    """The index to keep ``earlier`` from: the newest whole exchanges that fit, never before
    ``floor`` (the cut an earlier step of the same turn made). ``costs`` are the messages'
    ``message_tokens``, when the caller already has them; ``running`` their running sums (from 0,
    one more than the messages) and ``starts`` the ``exchange_starts``, when the caller keeps
    those too (the loop does, across turns: then the cut costs no step per message)."""
    budget = window - reply_reserve - fixed_tokens
    n = len(earlier)
    if running is None:
        if costs is None:
            costs = [message_tokens(m) for m in earlier]
        running = list(accumulate(costs, initial=0))
    if starts is None:
        starts = exchange_starts(earlier) if n else []
    # Exchanges are taken newest first while the ones taken fit; as costs are positive, what the
    # newest exchanges from a start cost only grows as the start moves back, so the cut is the
    # oldest start (not before the floor) from which the rest costs no more than the budget.
    first = max(bisect_left(starts, floor), bisect_left(starts, running[n] - budget, key=running.__getitem__))
    cut = starts[first] if first < len(starts) else n
    return cut, HistoryFit(window, reply_reserve, fixed_tokens, n, cut)


def request_fixed_tokens(system: str, tools: Sequence[ToolSpec], current: Sequence[ChatMessage], costs: Sequence[int] | None = None) -> int:
    current_tokens = sum(costs) if costs is not None else sum(message_tokens(m) for m in current)
    return _tokens(system) + FRAMING_PER_MESSAGE + tools_tokens(tools) + current_tokens
