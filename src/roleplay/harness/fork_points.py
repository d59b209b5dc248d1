"""Where a fork may cut a session's log: only between turns.

A prefix that ends inside a turn keeps that turn's ``turn/start`` and user message but not its
reply or ``turn/end``. The branch would show a user message nobody answered, and its next run
would close the copied turn as ``interrupted`` and put a second user message right after the
first. So a fork point inside a turn *snaps back* to the end of the last closed turn (the event
just before that turn's ``turn/start``), and the caller is told that it did. A fork point inside
the session's first turn has no closed turn before it and is refused (``session.fork_mid_turn``):
snapping there would silently drop everything, the session's setup included.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from roleplay.errors import ValidationError
from roleplay.harness.names import TURN_END, TURN_START

from .projections import load
from .store.base import EventStore
from .turns import turns_projection

END_SCAN_LIMIT = 500  # events read past the fork point to find where the cut turn ended (a hint)


@dataclass(frozen=True)
class ForkPoint:
    requested_seq: int
    at_seq: int  # where the fork actually cuts
    turn_id: str | None = None  # the turn the requested seq was inside, when it snapped
    turn_start_seq: int | None = None
    turn_end_seq: int | None = None  # that turn's turn/end in the source, if it has one

    @property
    def snapped(self) -> bool:
        return self.at_seq != self.requested_seq

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"requestedSeq": self.requested_seq, "atSeq": self.at_seq, "snapped": self.snapped}
        if self.snapped:
            out["turn"] = {"turnId": self.turn_id, "startSeq": self.turn_start_seq, "endSeq": self.turn_end_seq}
        return out

    def describe(self) -> str:
        if not self.snapped:
            return f"seq {self.requested_seq}"
        whole = f" (use --at {self.turn_end_seq} to keep that whole turn)" if self.turn_end_seq is not None else ""
        return (
            f"seq {self.at_seq}: seq {self.requested_seq} is inside turn {self.turn_id} (started at seq {self.turn_start_seq}), "
            f"so the fork snapped back to the end of the last closed turn{whole}"
        )


async def closed_turn_fork_point(store: EventStore, session_id: str, at_seq: int) -> ForkPoint:
    """The fork point for ``at_seq``: itself between turns, else the end of the last closed turn.
    Out-of-range seqs are left to the store, which refuses them."""
    record = await store.get_session(session_id)
    if not isinstance(at_seq, int) or isinstance(at_seq, bool) or not 0 < at_seq <= record.head_seq:
        return ForkPoint(at_seq, at_seq)
    open_turns = (await load(store, session_id, turns_projection, until_seq=at_seq, snapshot_every=None)).state["open"]
    if not open_turns:
        return ForkPoint(at_seq, at_seq)
    turn_id, start = min(open_turns.items(), key=lambda kv: kv[1])
    end = await _turn_end(store, session_id, turn_id, at_seq)
    if start <= 1:
        raise ValidationError(
            "session.fork_mid_turn",
            f"cannot fork {session_id} at seq {at_seq}: it is inside turn {turn_id}, the session's first, and no closed turn ends before it"
            + (f"; fork at seq {end} to keep that turn" if end is not None else ""),
            pointer="/atSeq",
            details={"sessionId": session_id, "atSeq": at_seq, "turnId": turn_id, "turnStartSeq": start, "turnEndSeq": end},
        )
    return ForkPoint(at_seq, start - 1, turn_id, start, end)


async def _turn_end(store: EventStore, session_id: str, turn_id: str, after_seq: int) -> int | None:
    for event in await store.read(session_id, after_seq=after_seq, limit=END_SCAN_LIMIT):
        if event.type == TURN_END and event.payload.get("turnId") == turn_id:
            return event.seq
    return None


async def after_turn_fork_point(store: EventStore, session_id: str, turn_end_seq: int) -> ForkPoint:
    """The fork point that keeps a closed turn whole: its ``turn/end`` at ``turn_end_seq`` and
    every event logged after it before the next ``turn/start`` (an edit of its reply, a profile
    change, a message action), so a branch holds the log exactly as it stood after that turn.
    ``requestedSeq`` is the turn's end; ``atSeq`` where the cut falls."""
    cut = turn_end_seq
    async for event in store.iter_events(session_id, after_seq=turn_end_seq):
        if event.type == TURN_START:
            break
        cut = event.seq
    return ForkPoint(turn_end_seq, cut) if cut == turn_end_seq else _Extended(turn_end_seq, cut)


@dataclass(frozen=True)
class _Extended(ForkPoint):
    """A cut moved *forward* over between-turn events (never into a turn): not a snap."""

    @property
    def snapped(self) -> bool:
        return False

    def to_dict(self) -> dict[str, Any]:
        return {
            "requestedSeq": self.requested_seq,
            "atSeq": self.at_seq,
            "snapped": False,
            "betweenTurns": self.at_seq - self.requested_seq,
        }

    def describe(self) -> str:
        return f"seq {self.at_seq} (the turn ended at seq {self.requested_seq}; the events after it, before the next turn, are kept)"
