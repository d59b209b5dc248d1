"""Activation output: the activated entries, their slot layout, and a per-entry explanation.

Reason codes (``EntryDecision.reason``) are stable and part of the public contract:

activated: ``constant``, ``key``, ``sticky``, ``decorator`` (``@@activate``), ``forced``.

not activated: ``disabled``, ``trigger`` (generation type not in ``triggers``),
``character_filter``, ``delay``, ``cooldown``, ``delay_until_recursion``, ``exclude_recursion``,
``dont_activate`` (``@@dont_activate``), ``no_keys``, ``no_match``, ``secondary``,
``state_condition`` (gate evaluated false), ``state_unavailable`` (no evaluator or it returned
None: fail closed), ``group_sticky``, ``group_cooldown``, ``group_score``,
``group_already_active``, ``group_priority``, ``group_roll``, ``probability``, ``budget``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from roleplay.errors import Problem

from .model import LoreEntry, Position, Slot
from .timed import TimedState

ACTIVATED_REASONS = frozenset({"constant", "key", "sticky", "decorator", "forced"})


@dataclass(frozen=True)
class EntryDecision:
    book_id: str
    entry_id: str
    activated: bool
    reason: str
    sweep: int  # 1-based sweep that decided; 0 = decided before any key was looked at
    details: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "bookId": self.book_id,
            "entryId": self.entry_id,
            "activated": self.activated,
            "reason": self.reason,
            "sweep": self.sweep,
            "details": dict(self.details),
        }


@dataclass(frozen=True)
class ActivatedEntry:
    book_id: str
    entry_id: str
    book_index: int  # position of the book in the binding order
    entry: LoreEntry
    content: str  # decorators stripped, macros substituted when a substitute was given
    reason: str
    sweep: int
    details: Mapping[str, Any] = field(default_factory=dict)

    @property
    def slot(self) -> Slot:
        return self.entry.slot


@dataclass(frozen=True)
class ActivationResult:
    activated: tuple[ActivatedEntry, ...]  # in activation order
    timed_state: TimedState
    diagnostics: tuple[Problem, ...]
    sweeps: int
    budget_overflowed: bool
    decisions: Mapping[tuple[str, str], EntryDecision] = field(repr=False, default_factory=dict)
    scan_order: tuple[tuple[str, str], ...] = field(repr=False, default=())
    fallback: Callable[[tuple[str, str]], EntryDecision] | None = field(repr=False, default=None, compare=False)

    def slots(self) -> dict[Slot, tuple[ActivatedEntry, ...]]:
        """Prompt layout per slot: binding order of books, then ascending ``order``. Ties keep
        SillyTavern's layout (it sorts by order descending and ``unshift``s, so equal orders end
        up in reverse activation order). Outlet entries and empty contents are left out, as ST
        never auto-injects outlets and skips empty entries."""
        rank = {id(a): i for i, a in enumerate(self.activated)}
        out: dict[Slot, list[ActivatedEntry]] = {s: [] for s in Slot}
        for a in self.activated:
            if a.entry.position != Position.OUTLET and a.content:
                out[a.slot].append(a)
        return {s: tuple(sorted(v, key=lambda a: (a.book_index, a.entry.order, -rank[id(a)]))) for s, v in out.items()}

    def outlets(self) -> dict[str, tuple[ActivatedEntry, ...]]:
        """Activated outlet entries (position 7) by ``outlet_name``, in the same order rule."""
        rank = {id(a): i for i, a in enumerate(self.activated)}
        out: dict[str, list[ActivatedEntry]] = {}
        for a in self.activated:
            if a.entry.position == Position.OUTLET and a.content:
                out.setdefault(a.entry.outlet_name, []).append(a)
        return {k: tuple(sorted(v, key=lambda a: (a.book_index, a.entry.order, -rank[id(a)]))) for k, v in sorted(out.items())}

    def explain(self, book_id: str, entry_id: str) -> EntryDecision:
        key = (book_id, entry_id)
        found = self.decisions.get(key)
        if found is not None:
            return found
        if self.fallback is None:
            raise KeyError(key)
        return self.fallback(key)  # raises KeyError for an entry that is not in the scan

    def report(self) -> tuple[EntryDecision, ...]:
        """One decision per entry of every book, in scan order. Entries whose keys were never
        hit are explained lazily (``no_match`` or their static reason) to keep activation fast."""
        return tuple(self.explain(*key) for key in self.scan_order)
