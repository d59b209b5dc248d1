"""Boundary: everything roleplay code reads from a harness session goes through here (the spec's
``rp-core/session-runtime``).

Roleplay features never touch store internals or private session fields. They read a
``SessionSnapshot`` (record, events, surface) and correlate tool calls with the assistant message
that made them and the result that answered them. When the harness changes, only this module and
its contract tests (``tests/core/test_session_runtime.py``) change with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from roleplay.harness.events import Event
from roleplay.harness.projections import fold
from roleplay.harness.sessions import SessionService
from roleplay.harness.store.base import SessionRecord
from roleplay.harness.surface import surface_projection
from roleplay.harness.names import ASSISTANT_MESSAGE, TOOL_CALL, TOOL_RESULT


@dataclass(frozen=True)
class SessionSnapshot:
    record: SessionRecord
    head_seq: int
    events: list[Event]
    surface: list[dict[str, Any]]

    def event(self, seq: int) -> Event:
        """The event at ``seq`` (seqs are gapless from 1, so this is an index)."""
        return self.events[seq - 1]


@dataclass(frozen=True)
class ToolCallRecord:
    call_id: str
    name: str
    arguments: str
    turn_id: str | None
    step_id: str | None
    message_id: str | None  # the assistant message whose toolCalls carry this call
    message_seq: int | None
    call_seq: int | None  # the tool/call event
    result_seq: int | None  # the tool/result event, None while unanswered
    result: dict[str, Any] | None

    @property
    def ok(self) -> bool:
        return bool(self.result and self.result.get("ok"))


async def session_snapshot(service: SessionService, session_id: str, *, until_seq: int | None = None) -> SessionSnapshot:
    """A consistent read of a session: the events up to a seq and the surface they fold to."""
    record = await service.get(session_id)
    events = await service.events(session_id, until_seq=until_seq)
    surface = fold(surface_projection, events)["nodes"]
    return SessionSnapshot(record, events[-1].seq if events else 0, events, surface)


def correlate_tool_calls(events: Iterable[Event]) -> dict[str, ToolCallRecord]:
    """Every tool call in the log, keyed by call id, with its message, call and result events.

    A call id is unique per session (providers mint them per response); if a model ever reuses
    one, the later call wins, which is what the surface would show.
    """
    calls: dict[str, dict[str, Any]] = {}
    for ev in events:
        p = ev.payload
        if ev.type == ASSISTANT_MESSAGE:
            for c in p.get("toolCalls", []):
                calls[c["id"]] = {
                    "call_id": c["id"], "name": c["name"], "arguments": c["arguments"],
                    "turn_id": p.get("turnId"), "step_id": p.get("stepId"),
                    "message_id": p["messageId"], "message_seq": ev.seq,
                    "call_seq": None, "result_seq": None, "result": None,
                }  # fmt: skip
        elif ev.type == TOOL_CALL:
            rec = calls.setdefault(p["callId"], _orphan(p))
            rec["call_seq"] = ev.seq
        elif ev.type == TOOL_RESULT:
            rec = calls.setdefault(p["callId"], _orphan(p))
            rec["result_seq"] = ev.seq
            rec["result"] = p
    return {k: ToolCallRecord(**v) for k, v in calls.items()}


def _orphan(p: dict[str, Any]) -> dict[str, Any]:
    return {
        "call_id": p["callId"], "name": p["name"], "arguments": p.get("arguments", ""),
        "turn_id": p.get("turnId"), "step_id": p.get("stepId"),
        "message_id": None, "message_seq": None, "call_seq": None, "result_seq": None, "result": None,
    }  # fmt: skip


def results_of_kind(events: Iterable[Event], kind: str) -> list[Event]:
    """Successful ``tool/result`` events whose ``meta.kind`` is ``kind`` (e.g. ``rp-agent/turn-commit``)."""
    return [e for e in events if e.type == TOOL_RESULT and e.payload.get("ok") and (e.payload.get("meta") or {}).get("kind") == kind]
