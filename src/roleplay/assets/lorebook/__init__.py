"""Lorebooks (世界书): SillyTavern-compatible import and deterministic activation.

Pure code only: storage, editing and prompt assembly live elsewhere.

* :func:`parse_lorebook` / :func:`import_lorebook` turn world-info JSON (every ST field age) and
  V2/V3 ``character_book`` objects into a :class:`LoreBook` (see :mod:`.importer` for the
  three-slot classification and :mod:`.model` for entry ids).
* :class:`LoreEngine` precompiles bound books; :meth:`LoreEngine.activate` runs SillyTavern's
  ``checkWorldInfo`` for one turn and returns an :class:`ActivationResult` with the activated
  entries, their slot layout, a per-entry explanation and the next :class:`TimedState`.
"""

from .activation import (
    ChatMessage,
    GlobalScanData,
    LoreEngine,
    ScanSettings,
    TurnInput,
    parse_decorators,
    unit_roll,
)
from .importer import classify_slot, import_character_book, import_lorebook, import_world_info, parse_lorebook
from .model import (
    DEFAULT_LIMITS,
    CharacterFilter,
    ImportLimits,
    LoreBook,
    LoreEntry,
    Position,
    SelectiveLogic,
    Slot,
)
from .report import ActivatedEntry, ActivationResult, EntryDecision
from .timed import TimedEffect, TimedState

__all__ = [
    "DEFAULT_LIMITS",
    "ActivatedEntry",
    "ActivationResult",
    "CharacterFilter",
    "ChatMessage",
    "EntryDecision",
    "GlobalScanData",
    "ImportLimits",
    "LoreBook",
    "LoreEngine",
    "LoreEntry",
    "Position",
    "ScanSettings",
    "SelectiveLogic",
    "Slot",
    "TimedEffect",
    "TimedState",
    "TurnInput",
    "classify_slot",
    "import_character_book",
    "import_lorebook",
    "import_world_info",
    "parse_decorators",
    "parse_lorebook",
    "unit_roll",
]
