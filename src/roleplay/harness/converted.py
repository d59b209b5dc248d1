"""Surface nodes as the agent loop's chat messages, converted and counted once per node version.

A long story's history is converted and token-counted once, not at every step of every turn
(each turn has a loop of its own): ``ConvertedMessages`` is kept by the session service
(``SessionService.derived``) and extended by each turn's new nodes (issue 12).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Sequence

from .history import message_tokens, remember_tokens
from .models.types import ChatMessage, ToolCall

CONVERTED = "harness.loop.converted"  # the key of the service's ConvertedMessages
LONG_MESSAGE_CHARS = 32_768


class ConvertedMessages:
    """Surface nodes converted to chat messages, with their token counts, by (session, node id,
    seq): a node version's content never changes (its event is immutable), and a node a runtime's
    history view rewrites gets an id of its own (``LoopHooks.history``). Bounded: emptied when
    full, which costs one reconversion, never a different result."""

    def __init__(self, max_entries: int = 100_000) -> None:
        # Two maps, not one of (message, cost) pairs: a pair is one more GC-tracked object per
        # message, and a long story keeps thousands of them for every full collection to traverse.
        self._by_key: dict[tuple[str, str, int], ChatMessage] = {}
        self._costs: dict[tuple[str, str, int], int] = {}
        self._max = max_entries
        # The last tuple converted and its answer: a history view that hands the same tuple to
        # every step of a turn (``LoopHooks.history_view``) is converted once. Tuples only: a
        # list may have changed since.
        self._last: tuple[str, tuple[dict[str, Any], ...], Converted] | None = None

    def convert(self, session_id: str, nodes: Sequence[dict[str, Any]]) -> tuple[list[ChatMessage], list[int]]:
        """The messages and their token counts (shared lists: read them, don't change them)."""
        converted = self.converted(session_id, nodes)
        return converted.messages, converted.costs

    def converted(self, session_id: str, nodes: Sequence[dict[str, Any]]) -> Converted:
        """``convert`` with the costs' running sums and the exchanges' starts, which a tuple
        extending the last one's (the next turn's story) gets by extending the last ones."""
        last = self._last
        if last is not None and last[1] is nodes and last[0] == session_id:
            return last[2]
        memo, cost_of = self._by_key, self._costs
        out = Converted([], [], [0], [])
        start = 0
        if last is not None and last[0] == session_id and isinstance(nodes, tuple) and len(nodes) >= len(last[1]):
            # The next turn's story is the last one plus its new nodes: the same node objects
            # (compared by identity first, so this costs no conversion), converted once already.
            done = len(last[1])
            if nodes[:done] == last[1]:
                # Extended in place, not copied (four lists as long as the story, at every turn):
                # its lists only ever grow at the end, so what a reader took from them stays true.
                out = last[2]
                start = done
                self._last = None  # until extended whole: a failure part way leaves nothing to go on from
        messages, costs, running, starts = out
        total = running[-1]
        for node in nodes[start:] if start else nodes:
            key = (session_id, node["id"], node["seq"])
            message = memo.get(key)
            if message is None:
                message = nodes_to_messages([node])[0]
                cost = message_tokens(message)
                remember_tokens(message, cost)  # never changed: shared by every step and turn
                # A one-off long message (a Writer child's whole prompt) is not kept: a long story
                # has a thousand of them, and each is converted by one request only.
                if len(message.text()) <= LONG_MESSAGE_CHARS:
                    if len(memo) >= self._max:
                        memo.clear()
                        cost_of.clear()
                    memo[key] = message
                    cost_of[key] = cost
            else:
                cost = cost_of[key]
            if not messages or message.role == "user":  # ``history.exchange_starts``
                starts.append(len(messages))
            messages.append(message)
            costs.append(cost)
            total += cost
            running.append(total)
        if isinstance(nodes, tuple):
            self._last = (session_id, nodes, out)
        return out


class Converted(NamedTuple):
    """Converted messages (``ConvertedMessages``), shared: read them, don't change them. The
    converter itself may extend them at the end (the next turn's story goes on from the last), never
    change what they hold: a reader keeps what it read, not their lengths."""

    messages: list[ChatMessage]
    costs: list[int]  # each message's ``history.message_tokens``
    running: list[int]  # the costs' running sums, from 0 (one more than the messages)
    starts: list[int]  # ``history.exchange_starts`` (none without messages)


# The tool calls of every converted message without any: one list, not an empty one per message
# (each a GC-tracked object kept with the converted history). Messages are read, never changed.
NO_CALLS: list[ToolCall] = []


def nodes_to_messages(nodes: list[dict[str, Any]]) -> list[ChatMessage]:
    """Surface nodes → provider-neutral chat messages (reasoning travels in its own field)."""
    out: list[ChatMessage] = []
    for node in nodes:
        role = node["role"]
        content = node["content"]
        if role == "tool":
            out.append(ChatMessage("tool", content, NO_CALLS, tool_call_id=node["toolCallId"], name=node.get("name")))
            continue
        blocks = [b for b in content if b.get("type") in ("text", "image")]
        reasoning_blocks = [b["text"] for b in content if b.get("type") == "reasoning"]
        reasoning = "".join(reasoning_blocks) if reasoning_blocks else None
        calls = [ToolCall(c["id"], c["name"], c["arguments"]) for c in node["toolCalls"]] if node.get("toolCalls") else NO_CALLS
        if role == "assistant":
            text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
            out.append(ChatMessage("assistant", text, tool_calls=calls, reasoning=reasoning))
        else:
            only_text = all(b.get("type") == "text" for b in blocks)
            out.append(ChatMessage("user", "".join(b["text"] for b in blocks) if only_text else blocks, NO_CALLS))
    return out
