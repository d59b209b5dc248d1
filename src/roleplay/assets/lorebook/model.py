"""Normalised lorebook (世界书) model shared by the importer and the activation engine.

A :class:`LoreBook` is what every supported source format becomes: SillyTavern world-info files of
any age and V2/V3 ``character_book`` objects. Field names are snake_case versions of SillyTavern's
world-info fields because ST's activation semantics are the ones we reproduce; the V2/V3 spelling
(``insertion_order``, ``enabled``, …) is mapped on import.

Losslessness: every entry keeps the exact source object in ``raw`` and the book keeps its top-level
keys (other than ``entries``) in ``raw_top``. Normalised fields are a *view* used by activation;
unknown keys are never dropped because they stay in ``raw``.

Entry ids (``LoreEntry.id``) are strings, unique within the book and stable across re-imports of
the same file:

* the source uid (ST ``uid`` / dict key, card ``id``) rendered as text (``"17"``) when exactly one
  entry in the book carries it;
* otherwise (uid missing, not a number/string, or shared by several entries) ``"h"`` followed by
  the first 12 hex digits of the sha256 of the entry's canonical JSON, so the id does not depend on
  file order; byte-identical duplicates get ``-2``, ``-3``… in source order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum, StrEnum
from typing import Any

from roleplay.errors import Problem


class Slot(StrEnum):
    """The three semantic places an entry can land in the Writer prompt (spec: 三个语义槽位)."""

    WORLD_DESCRIPTION = "world-description"  # 世界设定: before the character card
    CHARACTER_DESCRIPTIONS = "character-descriptions"  # 人物设定: after the character card
    IMPORTANT_RULES = "important-rules"  # 重要规则: after the session state


class SelectiveLogic(IntEnum):
    """``world_info_logic`` codes. Other integers are kept as-is and never pass (as in ST)."""

    AND_ANY = 0
    NOT_ALL = 1
    NOT_ANY = 2
    AND_ALL = 3


class Position(IntEnum):
    """SillyTavern ``world_info_position`` codes (7 = outlet exists only in newer ST)."""

    BEFORE = 0
    AFTER = 1
    AN_TOP = 2
    AN_BOTTOM = 3
    AT_DEPTH = 4
    EM_TOP = 5
    EM_BOTTOM = 6
    OUTLET = 7


# Extra texts an entry may also scan (ST ``match*`` flags); values are GlobalScanData field names.
MATCH_SOURCES: tuple[str, ...] = (
    "persona_description",
    "character_description",
    "character_personality",
    "character_depth_prompt",
    "scenario",
    "creator_notes",
)

DEFAULT_DEPTH = 4
DEFAULT_WEIGHT = 100
DEFAULT_ORDER = 100


@dataclass(frozen=True)
class ImportLimits:
    """Upper bounds enforced on import so that one hostile file cannot exhaust memory or time."""

    max_source_bytes: int = 32 * 1024 * 1024
    max_entries: int = 20_000
    max_keys_per_entry: int = 1_000
    max_key_chars: int = 2_000
    max_content_chars: int = 500_000
    max_json_depth: int = 64


DEFAULT_LIMITS = ImportLimits()


@dataclass(frozen=True)
class CharacterFilter:
    """ST ``characterFilter``: restrict an entry to (or exclude it from) characters/tags."""

    names: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    is_exclude: bool = False


@dataclass(frozen=True)
class LoreEntry:
    id: str
    uid: int | str | None
    keys: tuple[str, ...]
    secondary_keys: tuple[str, ...]
    comment: str
    content: str
    constant: bool
    selective: bool
    selective_logic: int
    order: int | float
    position: int
    slot: Slot
    disabled: bool
    exclude_recursion: bool
    prevent_recursion: bool
    delay_until_recursion: int  # 0 = off; legacy ``true`` is level 1
    probability: int | float
    use_probability: bool
    depth: int
    role: int
    group: str
    group_override: bool
    group_weight: int | float
    scan_depth: int | None
    case_sensitive: bool | None  # None = use the scan's global setting
    match_whole_words: bool | None
    use_group_scoring: bool | None
    sticky: int  # timed effects in messages; 0 = off
    cooldown: int
    delay: int
    outlet_name: str = ""
    ignore_budget: bool = False
    triggers: tuple[str, ...] = ()
    match_sources: frozenset[str] = frozenset()
    character_filter: CharacterFilter | None = None
    state_condition: str | None = None
    automation_id: str = ""
    vectorized: bool = False
    display_index: int | float | None = None
    extensions: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict)
    fingerprint: str = ""

    def uid_sort_key(self) -> tuple[int, int, str]:
        """ST iterates ``entries`` (an object keyed by uid) in ascending integer order; ties among
        equal ``order`` therefore follow numeric uid. Non-numeric uids sort after, by text."""
        if isinstance(self.uid, int):
            return (0, self.uid, "")
        return (1, 0, self.id)


@dataclass(frozen=True)
class LoreBook:
    id: str
    name: str
    source_format: str  # "st-world-info" | "character-book-v2" | "character-book-v3"
    entries: tuple[LoreEntry, ...]
    description: str = ""
    # Card-book level hints (scan_depth, token_budget, recursive_scanning). ST ignores them at
    # activation time and so do we; they are kept so a caller may choose to honour them.
    hints: dict[str, Any] = field(default_factory=dict)
    raw_top: dict[str, Any] = field(default_factory=dict)
    warnings: tuple[Problem, ...] = ()

    def entry(self, entry_id: str) -> LoreEntry:
        for e in self.entries:
            if e.id == entry_id:
                return e
        raise KeyError(entry_id)
