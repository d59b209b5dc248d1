"""Timed effects (sticky, cooldown, delay) as explicit, serialisable per-session state.

SillyTavern keeps these in ``chat_metadata.timedWorldInfo`` and mutates them during a scan. Here
the state is an immutable input (:class:`TimedState`) and the activation returns the next state;
the caller stores it (e.g. in the session event log) and passes it back next turn. Everything is
measured in chat messages (``chat_length``), exactly as in ST:

* an activated entry with ``sticky``/``cooldown`` N records ``[start=chat_length, end=start+N)``;
* a record whose chat did not advance (``chat_length <= start``, e.g. a swipe or regenerate of the
  same turn) is dropped unless *protected*;
* a record whose entry is gone or was edited (fingerprint differs) is not applied, and is deleted
  once its interval has passed;
* a record whose entry no longer has that effect configured is dropped;
* when a sticky interval ends and the entry has a cooldown, a protected cooldown starts at once;
* ``delay`` N needs no record: the entry is suppressed while ``chat_length < N``;
* a dry run neither reads nor writes sticky/cooldown (delay still applies).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from roleplay.errors import ValidationError, pointer_from_parts

from .model import LoreEntry

STICKY, COOLDOWN = "sticky", "cooldown"
EntryKey = tuple[str, str]  # (book id, entry id)


@dataclass(frozen=True)
class TimedEffect:
    kind: str  # "sticky" | "cooldown"
    book_id: str
    entry_id: str
    start: int
    end: int
    fingerprint: str
    protected: bool = False

    @property
    def key(self) -> EntryKey:
        return (self.book_id, self.entry_id)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "bookId": self.book_id,
            "entryId": self.entry_id,
            "start": self.start,
            "end": self.end,
            "fingerprint": self.fingerprint,
            "protected": self.protected,
        }


@dataclass(frozen=True)
class TimedState:
    effects: tuple[TimedEffect, ...] = ()

    @staticmethod
    def of(effects: list[TimedEffect] | tuple[TimedEffect, ...]) -> TimedState:
        """Canonical order so equal states compare and serialise equal."""
        return TimedState(tuple(sorted(effects, key=lambda e: (e.kind, e.book_id, e.entry_id))))

    def get(self, kind: str, key: EntryKey) -> TimedEffect | None:
        for e in self.effects:
            if e.kind == kind and e.key == key:
                return e
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"effects": [e.to_dict() for e in self.effects]}

    @staticmethod
    def from_dict(value: Any) -> TimedState:
        """Strict inverse of :meth:`to_dict`; anything else is a ``lore.timed.invalid`` error."""
        if not isinstance(value, Mapping) or not isinstance(value.get("effects"), list):
            raise ValidationError("lore.timed.invalid", "timed state must be {effects: [...]}", pointer="")
        out: list[TimedEffect] = []
        seen: set[tuple[str, str, str]] = set()
        for i, item in enumerate(value["effects"]):
            ptr = pointer_from_parts(("effects", i))
            if not isinstance(item, Mapping):
                raise ValidationError("lore.timed.invalid", "effect must be an object", pointer=ptr)
            kind, book, entry = item.get("kind"), item.get("bookId"), item.get("entryId")
            start, end, fp, prot = item.get("start"), item.get("end"), item.get("fingerprint"), item.get("protected", False)
            if (
                kind not in (STICKY, COOLDOWN)
                or not isinstance(book, str)
                or not isinstance(entry, str)
                or not _is_int(start)
                or not _is_int(end)
                or not isinstance(fp, str)
                or not isinstance(prot, bool)
            ):
                raise ValidationError(
                    "lore.timed.invalid",
                    "effect needs kind (sticky|cooldown), bookId, entryId, integer start/end, fingerprint, protected",
                    pointer=ptr,
                )
            if (kind, book, entry) in seen:
                raise ValidationError("lore.timed.invalid", f"duplicate {kind} effect for {book}/{entry}", pointer=ptr)
            seen.add((kind, book, entry))
            out.append(TimedEffect(kind, book, entry, start, end, fp, prot))
        return TimedState.of(out)


@dataclass(frozen=True)
class TimedView:
    """What the timed effects mean for one scan."""

    sticky: frozenset[EntryKey]
    cooldown: frozenset[EntryKey]
    delay: frozenset[EntryKey]
    state: TimedState  # state after expiry processing, before this turn's activations


def check_timed_effects(
    state: TimedState,
    entries: Mapping[EntryKey, LoreEntry],
    chat_length: int,
    *,
    dry_run: bool = False,
    delay_keys: Iterable[EntryKey] | None = None,
) -> TimedView:
    """``delay_keys``: the entries that have a delay, when the caller precomputed them."""
    keys = entries.keys() if delay_keys is None else delay_keys
    delay = frozenset(k for k in keys if entries[k].delay and chat_length < entries[k].delay)
    if dry_run:
        return TimedView(frozenset(), frozenset(), delay, state)
    kept: dict[tuple[str, EntryKey], TimedEffect] = {}
    active: dict[str, set[EntryKey]] = {STICKY: set(), COOLDOWN: set()}
    # Sticky first: an ending sticky may start a protected cooldown that the cooldown pass sees.
    pending = [e for e in state.effects if e.kind == STICKY]
    cooldowns = {e.key: e for e in state.effects if e.kind == COOLDOWN}
    for eff in pending:
        _process(eff, entries, chat_length, kept, active, cooldowns)
    for eff in list(cooldowns.values()):
        _process(eff, entries, chat_length, kept, active, None)
    return TimedView(frozenset(active[STICKY]), frozenset(active[COOLDOWN]), delay, TimedState.of(list(kept.values())))


def _process(
    eff: TimedEffect,
    entries: Mapping[EntryKey, LoreEntry],
    n: int,
    kept: dict[tuple[str, EntryKey], TimedEffect],
    active: dict[str, set[EntryKey]],
    cooldowns: dict[EntryKey, TimedEffect] | None,
) -> None:
    if n <= eff.start and not eff.protected:
        return  # chat did not advance (swipe/regenerate): the effect never happened
    entry = entries.get(eff.key)
    if entry is None or entry.fingerprint != eff.fingerprint:
        if n < eff.end:
            kept[(eff.kind, eff.key)] = eff  # unknown here (other book / edited): keep, don't apply
        return
    length = entry.sticky if eff.kind == STICKY else entry.cooldown
    if not length:
        return
    if n >= eff.end:
        if cooldowns is not None and entry.cooldown:
            cooldowns[eff.key] = TimedEffect(COOLDOWN, eff.book_id, eff.entry_id, n, n + entry.cooldown, entry.fingerprint, True)
        return
    kept[(eff.kind, eff.key)] = eff
    active[eff.kind].add(eff.key)


def record_activations(
    view: TimedView, activated: list[tuple[EntryKey, LoreEntry]], chat_length: int, *, dry_run: bool = False
) -> TimedState:
    """State after this turn: start sticky/cooldown for activated entries that lack a record."""
    if dry_run:
        return view.state
    effects = {(e.kind, e.key): e for e in view.state.effects}
    for key, entry in activated:
        for kind, length in ((STICKY, entry.sticky), (COOLDOWN, entry.cooldown)):
            if length and (kind, key) not in effects:
                effects[(kind, key)] = TimedEffect(kind, key[0], key[1], chat_length, chat_length + length, entry.fingerprint)
    return TimedState.of(list(effects.values()))


def _is_int(v: Any) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)
