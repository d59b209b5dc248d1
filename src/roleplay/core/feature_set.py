"""The feature manager's enabled set (spec ``rp-feature-manager``): one saved selection with a
hard-dependency closure.

The selection is the ``features.enabled`` setting (revision CAS, both backends). Every change is
one revision-checked write of that key, so two managers never lose each other's change. The set
always stays closed under the hard dependencies:

- ``rp-compat-mvu`` needs ``rp-character-card``, ``rp-lore-book`` and ``rp-state``. Enabling it
  enables them; disabling one of them disables it too (the answer names every feature it turned
  off, so nothing goes off silently).
- Everything else depends on core alone. A lorebook does not need State: without it the
  ``stateCondition`` entries fail closed. ``rp-macro``, ``rp-asset-tools`` and ``rp-library``
  find the asset features that are on at the call boundary.

Changes apply from the next runtime: the next ``rp`` command, or the next new or reopened
conversation of a long-running process. Turning a feature off never deletes data: session
bindings, logs and assets stay, and turning it on again rebuilds its projections from the log.
This module knows feature *names* only; the code of each feature is a plugin (``roleplay.plugins``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from roleplay.errors import ConflictError, RpError, ValidationError
from roleplay.harness.store.base import EventStore

from roleplay.feature_catalog import REQUIRES, required_closure
from .settings import ALWAYS_ON, DEFS, FEATURES, SettingsStore
from roleplay.names import CONVERSATION_SUMMARY_FEATURE, QUICK_REPLIES_FEATURE, REPLY_OPTIONS_FEATURE, SUBAGENT_MANAGER_FEATURE

KEY = "features.enabled"


# The settings each feature's card carries (spec: 在功能卡中承载已启用能力的用户设置入口), by key
# prefix; `rp settings` edits them.
SETTINGS_PREFIXES: dict[str, tuple[str, ...]] = {
    SUBAGENT_MANAGER_FEATURE: ("writer.", "subagents."),
    CONVERSATION_SUMMARY_FEATURE: ("summary.",),
    REPLY_OPTIONS_FEATURE: ("replyOptions.",),
    QUICK_REPLIES_FEATURE: ("quickReplies.",),
}


def feature_settings(name: str) -> list[str]:
    prefixes = SETTINGS_PREFIXES.get(name)
    return [key for key in DEFS if key.startswith(prefixes)] if prefixes else []


def closure(names: Iterable[str]) -> tuple[str, ...]:
    """``names`` with everything they need, in catalogue order."""
    out = required_closure(names)
    return tuple(f for f in FEATURES if f in out)


def dependents(name: str, among: Iterable[str]) -> tuple[str, ...]:
    """The features of ``among`` that need ``name``, directly or through another, catalogue order."""
    among = set(among)
    gone = {name}
    changed = True
    while changed:
        changed = False
        for feature in among - gone:
            if any(req in gone for req in REQUIRES.get(feature, ())):
                gone.add(feature)
                changed = True
    return tuple(f for f in FEATURES if f in gone and f != name)


def check_name(name: str) -> str:
    if name in ALWAYS_ON:
        raise RpError("features.always_on", f"{name} is always on and cannot be switched", pointer="/name", details={"feature": name})
    if name not in FEATURES:
        raise ValidationError(
            "features.unknown",
            f"unknown feature {name!r}; `rp features list` shows them",
            pointer="/name",
            details={"feature": name, "known": list(FEATURES)},
        )
    return name


@dataclass(frozen=True)
class FeatureState:
    enabled: tuple[str, ...]  # closed, catalogue order
    revision: int  # the revision of features.enabled; pass it back as expected_revision

    def rows(self) -> list[dict[str, Any]]:
        on = set(self.enabled)
        return [
            {
                "name": name,
                "enabled": name in on,
                "requires": list(REQUIRES.get(name, ())),
                "requiredBy": [f for f in FEATURES if name in REQUIRES.get(f, ())],
                "settings": feature_settings(name),
            }
            for name in FEATURES
        ]

    def to_dict(self) -> dict[str, Any]:
        return {"enabled": list(self.enabled), "revision": self.revision, "alwaysOn": list(ALWAYS_ON), "features": self.rows()}


@dataclass(frozen=True)
class FeatureChange:
    feature: str
    enabled: bool
    also: tuple[str, ...]  # what the closure switched with it (enabled dependencies, disabled dependents)
    state: FeatureState
    changed: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "feature": self.feature,
            "on": self.enabled,  # the feature's new state; "enabled" is the whole set
            "also": list(self.also),
            "changed": self.changed,
            **self.state.to_dict(),
        }


class FeatureManager:
    def __init__(self, events: EventStore) -> None:
        self._settings = SettingsStore(events)

    async def state(self) -> FeatureState:
        record = await self._settings.get(KEY)
        # The stored list is validated against the catalogue on write; closing it here also
        # covers a list written by hand with ``rp settings set`` that left a dependency out.
        return FeatureState(closure(record.value), record.revision)

    async def enabled(self) -> tuple[str, ...]:
        return (await self.state()).enabled

    async def enable(self, name: str, *, expected_revision: int | None = None) -> FeatureChange:
        check_name(name)
        current = await self._current(expected_revision)
        wanted = closure([*current.enabled, name])
        also = tuple(f for f in wanted if f not in current.enabled and f != name)
        return await self._write(current, name, True, wanted, also)

    async def disable(self, name: str, *, expected_revision: int | None = None) -> FeatureChange:
        check_name(name)
        current = await self._current(expected_revision)
        also = tuple(f for f in dependents(name, current.enabled) if f in current.enabled)
        wanted = tuple(f for f in current.enabled if f != name and f not in also)
        return await self._write(current, name, False, wanted, also)

    async def _current(self, expected: int | None) -> FeatureState:
        current = await self.state()
        if expected is not None and expected != current.revision:
            raise _conflict(expected, current.revision)
        return current

    async def _write(self, current: FeatureState, name: str, on: bool, wanted: tuple[str, ...], also: tuple[str, ...]) -> FeatureChange:
        if wanted == current.enabled:
            return FeatureChange(name, on, also, current, False)
        try:
            record = await self._settings.set(KEY, list(wanted), expected_revision=current.revision)
        except ConflictError as exc:  # another manager wrote in between
            raise _conflict(current.revision, exc.details.get("currentRevision", -1)) from None
        return FeatureChange(name, on, also, FeatureState(closure(record.value), record.revision), True)


def _conflict(expected: int, actual: int) -> ConflictError:
    return ConflictError(
        "features.conflict",
        f"the feature selection is at revision {actual}, not at the expected revision {expected}; list it again and retry",
        details={"expectedRevision": expected, "currentRevision": actual},
    )


__all__ = [
    "KEY",
    "REQUIRES",
    "SETTINGS_PREFIXES",
    "feature_settings",
    "FeatureChange",
    "FeatureManager",
    "FeatureState",
    "check_name",
    "closure",
    "dependents",
]
