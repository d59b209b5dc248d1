"""The hard dependencies between features (spec 插件契约): a plain table, importable without
the settings machinery, so ``rp --help`` can tell which commands are on without loading it."""

from __future__ import annotations

from collections.abc import Iterable

from roleplay.names import CHARACTER_CARD_FEATURE, COMPAT_MVU_FEATURE, LOREBOOK_FEATURE, STATE_FEATURE

# feature → the features it cannot work without (rp-compat-mvu 硬依赖角色卡、世界书和 State).
# Everything else needs core alone: a lorebook works without State (its ``stateCondition``
# entries fail closed), and macros, asset tools and the library find the asset features that
# are on at the call boundary.
REQUIRES: dict[str, tuple[str, ...]] = {
    COMPAT_MVU_FEATURE: (CHARACTER_CARD_FEATURE, LOREBOOK_FEATURE, STATE_FEATURE),
}


def required_closure(names: Iterable[str]) -> set[str]:
    """``names`` with everything they need, transitively."""
    out: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name not in out:
            out.add(name)
            todo.extend(REQUIRES.get(name, ()))
    return out


__all__ = ["REQUIRES", "required_closure"]
