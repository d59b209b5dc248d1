"""``state.update``: the effect capability of ``rp_commit_turn`` that changes session State.

It lives with the state domain and is registered only by the ``rp-state`` plugin
(``state/feature.py``'s ``register_effect_capabilities``): with the feature off the commit schema
has no ``state.update`` branch. Core's effect registry (``core/effects.py``) knows no kind.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from roleplay.core.effects import EffectCapability, EffectCheck, EffectItem
from roleplay.core.types import CommitContext, Diagnostic
from roleplay.errors import Problem, RpError
from roleplay.names import STATE_SOURCE
from roleplay.state import EFFECT_KIND as STATE_UPDATE
from roleplay.state import empty_projection, execute_updates, state_update_tool_schema


def _rebase(pointer: str | None, items: Sequence[EffectItem]) -> str:
    """Map a pointer relative to the list handed to ``execute_updates`` (``/{k}/…``) to the
    pointer of that effect in the commit arguments."""
    if not pointer:
        # A list-level problem ("too many state effects"): blame the first state effect, the
        # closest real location in the arguments.
        return items[0].pointer if items else "/effects"
    head, _, rest = pointer[1:].partition("/")
    try:
        item = items[int(head)]
    except (ValueError, IndexError):
        return pointer
    return item.pointer + ("/" + rest if rest else "")


def validate_state_updates(items: Sequence[EffectItem], ctx: CommitContext) -> EffectCheck:
    """``state.update`` through the state package's own validator, against ``ctx.state``.

    ``execute_updates`` is what ``prepare_commit`` runs (and what the ``rp/state`` fold runs again
    when it applies ``meta.effects``), so the commit accepts exactly what the fold will apply.
    """
    projection: Mapping[str, Any] = ctx.state if isinstance(ctx.state, dict) and "namespaces" in ctx.state else empty_projection()
    effects = [item.effect for item in items]
    try:
        outcome = execute_updates(projection, effects, "")
    except RpError as exc:
        problems = exc.problems or [Problem(exc.code, exc.message, exc.pointer, exc.details)]
        return EffectCheck(problems=[Problem(p.code, p.message, _rebase(p.pointer, items), p.details) for p in problems])
    diagnostics = [
        Diagnostic(
            p.code,
            p.message,
            source_id=STATE_SOURCE,
            details={"namespace": name, **({"pointer": p.pointer} if p.pointer else {}), **p.details},
        )
        for name, found in sorted(outcome.diagnostics.items())
        for p in found
    ]
    return EffectCheck(effects=copy.deepcopy(effects), diagnostics=diagnostics)


def state_update_capability() -> EffectCapability:
    return EffectCapability(
        kind=STATE_UPDATE,
        schema=state_update_tool_schema(),
        validate=validate_state_updates,
        description="Change session State through the namespace's rules (one effect per namespace).",
    )


__all__ = ["state_update_capability", "validate_state_updates"]
