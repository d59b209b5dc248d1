"""Reading a reply-options answer: tolerant JSON in, a clean list of options out.

The sub-agent's output is fixed as ``{"options": [string, …]}`` (spec ``rp-reply-options``). A
model in JSON mode still slips (a ```json fence, a trailing comma, prose around the object), so
the text is read leniently: strict JSON first, then ``json-repair`` on answer-sized text only (its
cost grows badly on huge hostile input; the tool-free state-change call does the same). The
*shape* is strict: anything but that object (or a bare array of strings) is
``reply_options.invalid``.

Normalisation, in this order, each step explained by what a player would otherwise see:

1. Whitespace is collapsed to single spaces and trimmed (an option is one line in any UI), and a
   list marker the model added in front (``1.``, ``2)``, ``-``, ``•``) is dropped: the UI numbers
   the options itself.
2. Non-strings and empty items are dropped.
3. An item longer than the ``maxCharacters`` setting is cut there, at a word boundary when the
   text has spaces near the cut, and marked with an ellipsis (the setting is what the player
   asked to read; the model only got it as guidance).
4. Duplicates are dropped, keeping the first: two items are the same when they match after
   Unicode compatibility folding, case folding and removing all whitespace.
5. At most ``count`` items are kept, in the model's order.

Nothing left is ``reply_options.empty``.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

import json_repair

from roleplay.errors import RpError

MAX_REPAIR_CHARS = 20_000  # answer-sized: count ≤ 8 options of ≤ 500 characters, plus slips
ELLIPSIS = "…"
_FENCE = re.compile(r"^\s*```(?:json)?\s*\n?(.*?)\n?\s*```\s*$", re.S)
_MARKER = re.compile(r"^(?:\d{1,2}\s*[.)、:：]|[-*•·])\s+")
# A cut looks back this far (as a share of the limit) for a space to cut at.
_WORD_BACKTRACK = 0.3


@dataclass(frozen=True)
class Normalized:
    options: list[str]
    dropped_duplicates: int
    cut: int
    over_count: int


def parse_answer(text: str) -> list[Any]:
    """The raw ``options`` list of an answer, or ``reply_options.invalid``."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    try:
        value = json.loads(body)
    except ValueError:
        value = _repaired(body)
    if isinstance(value, dict) and isinstance(value.get("options"), list):
        return list(value["options"])
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise RpError(
        "reply_options.invalid",
        'the reply-options answer is not a JSON object {"options": [string, …]}',
        details={"text": text[:500]},
    )


def _repaired(body: str) -> Any:
    if not body or len(body) > MAX_REPAIR_CHARS:
        return None
    try:
        return json_repair.loads(body)
    except Exception:  # noqa: BLE001 - json-repair has no documented exception contract
        return None


def clean_option(item: Any) -> str:
    """One option on one line without a list marker; "" for a non-string or an empty one."""
    if not isinstance(item, str):
        return ""
    text = " ".join(item.split())
    return _MARKER.sub("", text, count=1).strip()


def cut(text: str, limit: int) -> str:
    """``text`` at most ``limit`` characters, ellipsis included, cut at a space when one is near."""
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    space = head.rfind(" ")
    if space >= int(limit * (1 - _WORD_BACKTRACK)):
        head = head[:space]
    return head.rstrip(" ,;:，；：、") + ELLIPSIS


def dedupe_key(text: str) -> str:
    return "".join(unicodedata.normalize("NFKC", text).casefold().split())


def normalize_options(raw: list[Any], *, count: int, max_characters: int) -> Normalized:
    seen: set[str] = set()
    kept: list[str] = []
    duplicates = cut_items = 0
    for item in raw:
        text = clean_option(item)
        if not text:
            continue
        short = cut(text, max_characters)
        cut_items += short != text
        key = dedupe_key(short)
        if key in seen:
            duplicates += 1
            continue
        seen.add(key)
        kept.append(short)
    return Normalized(kept[:count], duplicates, cut_items, max(0, len(kept) - count))


def options_from_answer(text: str, *, count: int, max_characters: int) -> list[str]:
    """Parse and normalise; ``reply_options.invalid`` or ``reply_options.empty`` on failure."""
    normalized = normalize_options(parse_answer(text), count=count, max_characters=max_characters)
    if not normalized.options:
        raise RpError("reply_options.empty", "the reply-options answer holds no usable option", details={"text": text[:500]})
    return normalized.options


__all__ = ["Normalized", "clean_option", "cut", "dedupe_key", "normalize_options", "options_from_answer", "parse_answer"]
