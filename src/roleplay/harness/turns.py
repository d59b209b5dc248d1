"""The turn lifecycle as a projection: which turns are open, how the last one ended.

A crash between ``turn/start`` and ``turn/end`` leaves a turn open in the log forever; the agent
loop reads this projection before starting and closes such turns as ``interrupted``.
"""

from __future__ import annotations

from typing import Any

from roleplay.harness.names import TURN_END, TURN_START

from .events import Event
from .projections import Projection


def _initial() -> dict[str, Any]:
    return {"open": {}, "count": 0, "last": None}


def _apply(state: dict[str, Any], ev: Event) -> dict[str, Any]:
    if ev.type == TURN_START:
        state["open"][ev.payload["turnId"]] = ev.seq
        state["count"] += 1
    elif ev.type == TURN_END:
        state["open"].pop(ev.payload["turnId"], None)
        state["last"] = {"turnId": ev.payload["turnId"], "outcome": ev.payload["outcome"], "seq": ev.seq}
    return state


turns_projection = Projection(name="harness/turns", version=1, initial=_initial, apply=_apply)
