"""One error type for the whole engine.

Every failure a user or a model can cause carries a stable dotted ``code`` (part of the public
contract: tests, the CLI's ``--json`` output and the HTTP API all expose it), a human message, and
where it applies a JSON Pointer (RFC 6901) or other location of the offending input. Several
independent problems can travel together in ``problems`` so that validators report everything at
once instead of one error per round trip.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Problem:
    code: str
    message: str
    pointer: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.pointer is not None:
            out["pointer"] = self.pointer
        if self.details:
            out["details"] = self.details
        return out


class RpError(Exception):
    """Base error. ``code`` is stable; ``message`` is for humans and may change wording."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        pointer: str | None = None,
        details: dict[str, Any] | None = None,
        problems: list[Problem] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.pointer = pointer
        self.details = details or {}
        self.problems = problems or []

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.pointer is not None:
            out["pointer"] = self.pointer
        if self.details:
            out["details"] = self.details
        if self.problems:
            out["problems"] = [p.to_dict() for p in self.problems]
        return out

    def __str__(self) -> str:
        where = f" at {self.pointer}" if self.pointer is not None else ""
        return f"[{self.code}] {self.message}{where}"


class NotFoundError(RpError):
    pass


class ConflictError(RpError):
    pass


class ValidationError(RpError):
    pass


def pointer_from_parts(parts: list[Any] | tuple[Any, ...]) -> str:
    """RFC 6901 pointer from path parts (``jsonschema`` gives paths, never pointers)."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)
