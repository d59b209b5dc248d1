"""Identity macros (``rp-macro``): ``{{char}}`` / ``{{user}}`` and SillyTavern's legacy ``<BOT>``,
``<CHAR>``, ``<USER>``.

What and when (spec, plugin row ``rp-macro``: "按 Run 冻结当前角色卡与人设名称，展开新输入、上下文
与模型输出中的 char／user 身份宏；资料源码和已结算消息编辑保持不变"):

* The names are frozen once per run in a :class:`MacroContext` (card display name — the V3
  ``nickname`` when present — and persona name), so every text of one run agrees even if an asset
  is edited mid-run.
* :func:`expand` is applied to the *new* user input, to the material of this run's context, and
  to model output (:class:`MacroStream` for streamed chunks). It is never applied to sources at
  rest (assets keep their macros, so a renamed persona is picked up next turn) nor to a settled
  message a user edits (the edit is saved verbatim; the spec forbids re-running text
  transformers on it).

Matching follows SillyTavern: case-insensitive (``{{Char}}``, ``<user>``), no whitespace inside
the braces, one left-to-right pass. A name is inserted literally and never rescanned, so a persona
called ``{{char}}`` cannot chain into another substitution. An unbound identity (no card, or a
dangling card reference read as unbound) leaves its macros untouched: the text stays visible and
repairable instead of silently losing who was meant.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# No macro is a prefix of another and no proper suffix of one starts another, which is what lets
# MacroStream split a text anywhere outside a held-back macro prefix.
_MACROS = ("{{char}}", "{{user}}", "<bot>", "<char>", "<user>")
_PATTERN = re.compile("|".join(re.escape(m) for m in _MACROS), re.IGNORECASE)
_CHAR = frozenset({"{{char}}", "<bot>", "<char>"})
_MAX_LEN = max(len(m) for m in _MACROS)


@dataclass(frozen=True)
class MacroContext:
    """The two names of one run; ``None`` = unbound (its macros stay as written)."""

    char_name: str | None = None
    user_name: str | None = None

    def value(self, macro: str) -> str | None:
        return self.char_name if macro.lower() in _CHAR else self.user_name


def expand(text: str, ctx: MacroContext) -> str:
    """Replace the identity macros in ``text`` (pure; see the module docstring for when)."""
    if not text:
        return text

    def sub(match: re.Match[str]) -> str:
        value = ctx.value(match.group())
        return match.group() if value is None else value

    return _PATTERN.sub(sub, text)


# Every proper prefix of a macro: a streamed tail that is one may still grow into it.
_PREFIXES = frozenset(m[:k] for m in _MACROS for k in range(1, len(m)))


def _partial_suffix(text: str) -> int:
    """Length of the longest suffix of ``text`` that could still grow into a macro (called for
    every streamed chunk: a set lookup per length, not a scan of the macros)."""
    lowered = text[-(_MAX_LEN - 1) :].lower()
    for n in range(len(lowered), 0, -1):
        if lowered[-n:] in _PREFIXES:
            return n
    return 0


class MacroStream:
    """Expand streamed model output chunk by chunk with the same result as expanding the whole
    text at once: a tail that may be the start of a macro is held back until the next chunk (or
    :meth:`flush`) decides it. Holds at most seven characters."""

    def __init__(self, ctx: MacroContext) -> None:
        self.ctx = ctx
        self._pending = ""

    def feed(self, chunk: str) -> str:
        text = self._pending + chunk
        keep = _partial_suffix(text)
        ready, self._pending = (text[:-keep], text[-keep:]) if keep else (text, "")
        return expand(ready, self.ctx)

    def flush(self) -> str:
        text, self._pending = self._pending, ""
        return expand(text, self.ctx)


def macro_context_from(card: Mapping[str, Any] | None, persona: Mapping[str, Any] | None) -> MacroContext:
    """Names from the normalised card data (``nickname`` wins, as V3 says) and the persona data.
    ``None`` for either means unbound or unavailable."""
    char_name = None
    if card is not None:
        nickname, name = card.get("nickname"), card.get("name")
        char_name = nickname if isinstance(nickname, str) and nickname else name if isinstance(name, str) and name else None
    user_name = None
    if persona is not None and isinstance(persona.get("name"), str) and persona["name"]:
        user_name = persona["name"]
    return MacroContext(char_name, user_name)


async def expand_opening(m: Any) -> None:
    """Core's new-story materializer: the opening message shows its source with the run's
    identity macros expanded (a feature materializer that set its own text wins)."""
    if m.opening_text is not None and m.opening_message_text is None:
        m.opening_message_text = expand(m.opening_text, m.macros)


__all__ = ["MacroContext", "MacroStream", "expand", "expand_opening", "macro_context_from"]
