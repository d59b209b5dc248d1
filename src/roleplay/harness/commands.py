"""Native commands: ``command/run`` then ``command/done {kind}``.

A command counts only when a ``command/done`` with ``kind: "success"`` follows its
``command/run`` (matched by ``commandId``). A run with no done (a crash in between) or with an
error done changes nothing; projections that consume commands go through
``successful_commands`` / ``commands_projection`` so that rule lives in one place.

Handlers are plain functions ``(args, ctx) -> result`` registered by features. They validate and
normalise; raising ``RpError`` records ``command/done {kind: "error"}`` with that code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from roleplay.errors import NotFoundError, RpError, ValidationError
from roleplay.harness.names import COMMAND_DONE, COMMAND_RUN

from .events import Event
from .projections import Projection


@dataclass(frozen=True)
class CommandContext:
    session_id: str | None
    command_id: str
    state: dict[str, Any] = field(default_factory=dict)  # read-only views a handler may need


CommandHandler = Callable[[dict[str, Any], CommandContext], Any]


@dataclass(frozen=True)
class CommandSpec:
    """A command to run, e.g. a setup command given at session creation."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)


class CommandRegistry:
    def __init__(self) -> None:
        self._handlers: dict[str, CommandHandler] = {}

    def register(self, name: str, handler: CommandHandler) -> None:
        if name in self._handlers and self._handlers[name] is not handler:
            raise ValidationError("command.duplicate", f"command {name!r} is already registered")
        self._handlers[name] = handler

    def get(self, name: str) -> CommandHandler:
        try:
            return self._handlers[name]
        except KeyError:
            raise NotFoundError(
                "command.unknown", f"unknown command {name!r}; registered: {', '.join(sorted(self._handlers)) or 'none'}"
            ) from None

    def names(self) -> list[str]:
        return sorted(self._handlers)

    def execute(self, spec: CommandSpec, ctx: CommandContext) -> tuple[bool, Any]:
        """Run a handler: (True, result) or (False, error dict). Unknown commands raise."""
        handler = self.get(spec.name)
        if not isinstance(spec.args, dict):
            return False, {"code": "command.invalid_args", "message": "command args must be a JSON object"}
        try:
            return True, handler(spec.args, ctx)
        except RpError as exc:
            err: dict[str, Any] = {"code": exc.code, "message": exc.message}
            if exc.pointer is not None:
                err["pointer"] = exc.pointer
            if exc.details:
                err["details"] = exc.details
            return False, err


def successful_commands(events: Iterable[Event]) -> list[tuple[Event, Event]]:
    """(run, done) pairs whose done is a success, in the order of their ``command/done``."""
    runs: dict[str, Event] = {}
    out: list[tuple[Event, Event]] = []
    for ev in events:
        if ev.type == COMMAND_RUN:
            runs[ev.payload["commandId"]] = ev
        elif ev.type == COMMAND_DONE:
            run = runs.pop(ev.payload["commandId"], None)
            if run is not None and ev.payload["kind"] == "success":
                out.append((run, ev))
    return out


def _initial() -> dict[str, Any]:
    return {"pending": {}, "succeeded": [], "failed": []}


def _apply(state: dict[str, Any], ev: Event) -> dict[str, Any]:
    if ev.type == COMMAND_RUN:
        state["pending"][ev.payload["commandId"]] = {"name": ev.payload["name"], "args": ev.payload["args"], "runSeq": ev.seq}
    elif ev.type == COMMAND_DONE:
        run = state["pending"].pop(ev.payload["commandId"], None)
        if run is None:
            return state  # a done without its run is not a command
        entry = {"commandId": ev.payload["commandId"], **run, "doneSeq": ev.seq}
        if ev.payload["kind"] == "success":
            entry["result"] = ev.payload.get("result")
            state["succeeded"].append(entry)
        else:
            entry["error"] = ev.payload.get("error")
            state["failed"].append(entry)
    return state


commands_projection = Projection(name="harness/commands", version=1, initial=_initial, apply=_apply)
