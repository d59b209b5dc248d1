"""Prompt-only rewrites of the conversation the Writer reads (``register_history_transformers``).

Some community material changes how the conversation *reads in the prompt* without changing the
conversation: SillyTavern's card regex scripts (``promptOnly``, or neither flag) strip status
blocks from older replies, shorten the user's input, and so on. A transformer gets the history
entries and the current input of one prepare and may replace their texts; the log, the surface
and the page keep the words as written, and a replay rebuilds the same prompt from the same log
and assets. Depth follows SillyTavern: the current input is depth 0, the newest history message
depth 1.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace

from .conversation import Entry
from .profile import SessionProfile
from .types import AssetReader, Diagnostic


@dataclass
class PromptHistory:
    """One prepare's conversation as the Writer prompt will read it (transformers edit it)."""

    entries: list[Entry]
    current_input: str
    profile: SessionProfile
    diagnostics: list[Diagnostic] = field(default_factory=list)

    def rewrite(self, rewrite: Callable[[str, str, int], str]) -> None:
        """``rewrite(text, role, depth)`` over the current input and every history entry, newest
        first (a rewrite under a time budget spends it where the Writer looks most); the role is
        ``user`` or ``assistant`` (a writing or non-writing reply)."""
        self.current_input = rewrite(self.current_input, "user", 0)
        count = len(self.entries)
        newest_first = [
            replace(e, text=rewrite(e.text, "user" if e.speaker == "user" else "assistant", count - i))
            for i, e in reversed(list(enumerate(self.entries)))
        ]
        self.entries = newest_first[::-1]


HistoryTransformer = Callable[[PromptHistory, AssetReader], Awaitable[None]]


async def prompt_history(
    transformers: Sequence[HistoryTransformer], entries: list[Entry], current_input: str, profile: SessionProfile, reader: AssetReader
) -> PromptHistory:
    history = PromptHistory(list(entries), current_input, profile)
    for transform in transformers:
        await transform(history, reader)
    return history


__all__ = ["HistoryTransformer", "PromptHistory", "prompt_history"]
