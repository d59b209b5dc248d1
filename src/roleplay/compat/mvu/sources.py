"""The inputs of the adapter in one neutral shape: a card's greetings and lorebooks with locations.

A character card embeds a V2/V3 ``character_book`` (entries in a list, ``enabled``) and a session
may bind SillyTavern world-info files (entries keyed by uid, ``disable``). MVU only needs each
entry's title (``comment``), content and position, so both are read here into :class:`Book`,
keeping a JSON Pointer to every entry so diagnostics point into the original object. Macro
expansion lives here too because MVU applies SillyTavern's ``substituteParams`` before parsing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from roleplay.errors import Problem

from .diagnostics import Loc, diag


@dataclass(frozen=True)
class BookEntry:
    uid: str
    title: str
    content: str
    enabled: bool
    loc: Loc


@dataclass(frozen=True)
class Book:
    name: str
    entries: tuple[BookEntry, ...]
    role: str = "character"  # "global" | "character" | "additional" (MVU's load order)


@dataclass(frozen=True)
class Greeting:
    """One opening: ``source`` is ``default``, ``alternate`` (with ``index``) or ``custom``."""

    source: str
    index: int | None
    text: str
    loc: Loc

    @property
    def key(self) -> str:
        return self.source if self.index is None else f"{self.source}:{self.index}"


@dataclass
class CardSource:
    name: str
    greetings: list[Greeting]
    books: list[Book]
    extensions: dict[str, Any] = field(default_factory=dict)
    source: str = "card"


def _pointer_token(value: Any) -> str:
    return str(value).replace("~", "~0").replace("/", "~1")


def read_book(value: Any, *, name: str, source: str, base: str = "", role: str = "additional") -> tuple[Book | None, list[Problem]]:
    """A lorebook from a decoded world-info file or ``character_book`` object."""
    if not isinstance(value, dict) or not isinstance(value.get("entries"), (dict, list)):
        return None, [diag("mvu.source.lorebook_invalid", "not a lorebook: expected an object with 'entries'", Loc(source, base or ""))]
    raw = value["entries"]
    items: Iterable[tuple[Any, Any]] = raw.items() if isinstance(raw, dict) else enumerate(raw)
    entries: list[BookEntry] = []
    problems: list[Problem] = []
    for key, entry in items:
        pointer = f"{base}/entries/{_pointer_token(key)}"
        if not isinstance(entry, dict):
            problems.append(diag("mvu.source.entry_invalid", "a lorebook entry must be an object", Loc(source, pointer)))
            continue
        comment, label, text = entry.get("comment"), entry.get("name"), entry.get("content")
        title = comment if isinstance(comment, str) else label if isinstance(label, str) else ""
        content = text if isinstance(text, str) else ""
        # world info says ``disable``; character books say ``enabled`` (default true).
        enabled = not bool(entry.get("disable", False)) and bool(entry.get("enabled", True))
        uid = entry.get("uid", entry.get("id", key))
        entries.append(BookEntry(str(uid), title, content, enabled, Loc(source, pointer + "/content", title or None)))
    own_name = value.get("name")
    book_name = own_name if isinstance(own_name, str) and own_name else name
    return Book(book_name, tuple(entries), role), problems


def read_card(card_import: Any, *, source: str = "card") -> tuple[CardSource, list[Problem]]:
    """Greetings and the embedded lorebook of a :class:`~roleplay.assets.cards.CardImport`."""
    card = card_import.card
    raw = card_import.raw if isinstance(card_import.raw, dict) else {}
    # Pointers address the source object: V2/V3 keep fields under ``data``, V1 at the root.
    base = "/data" if isinstance(raw.get("data"), dict) else ""
    greetings = [Greeting("default", None, card.first_mes, Loc(source, f"{base}/first_mes"))]
    greetings += [
        Greeting("alternate", i, text, Loc(source, f"{base}/alternate_greetings/{i}")) for i, text in enumerate(card.alternate_greetings)
    ]
    books: list[Book] = []
    problems: list[Problem] = []
    if card_import.lorebook:
        book, found = read_book(card_import.lorebook, name=card.name, source=source, base=f"{base}/character_book", role="character")
        problems += found
        if book is not None:
            books.append(book)
    return CardSource(card.display_name(), greetings, books, dict(card.extensions), source), problems


# --- macros -------------------------------------------------------------------------------------------

_MACRO = re.compile(r"\{\{\s*(char|user)\s*\}\}|<(user|bot|char)>", re.IGNORECASE)
_OTHER_MACRO = re.compile(r"\{\{[^{}]*\}\}")


def expand_macros(text: str, *, char: str, user: str) -> str:
    """``{{char}}``/``{{user}}`` and SillyTavern's legacy ``<USER>``/``<BOT>``/``<CHAR>``."""

    def sub(match: re.Match) -> str:
        name = (match.group(1) or match.group(2)).lower()
        return user if name == "user" else char

    return _MACRO.sub(sub, text)


def leftover_macros(text: str) -> list[str]:
    return sorted(set(_OTHER_MACRO.findall(text)))
