"""Diagnostics of the MVU adapter: one :class:`~roleplay.errors.Problem` per finding.

Every diagnostic names where it comes from, because a card author must be able to fix the input:
``pointer`` is a JSON Pointer into the source object when there is one (a card field, a lorebook
entry), and ``details`` carries ``severity`` plus whichever of ``source`` (file or asset),
``entry`` (lorebook entry title), ``line`` / ``column`` (1-based, inside that text) apply.

Severities: ``error`` means the construct was refused (fail closed); ``warning`` means the input
was accepted after a bounded repair or with a lost nuance; ``info`` records a construct that was
recognised and intentionally dropped (scripts, display-only protocol).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from roleplay.errors import Problem

SEVERITIES = ("error", "warning", "info")


@dataclass(frozen=True)
class Loc:
    """Where a text came from; ``line_offset`` maps lines of an extracted block back to the source."""

    source: str = "input"
    pointer: str | None = None
    entry: str | None = None
    line_offset: int = 0

    def at(self, line: int | None = None, column: int | None = None) -> Where:
        return Where(self, None if line is None else line + self.line_offset, column)

    def shifted(self, lines: int) -> Loc:
        return replace(self, line_offset=self.line_offset + lines)

    def with_pointer(self, pointer: str) -> Loc:
        return replace(self, pointer=pointer)


@dataclass(frozen=True)
class Where:
    loc: Loc
    line: int | None = None
    column: int | None = None


def diag(code: str, message: str, where: Loc | Where, severity: str = "error", **details: Any) -> Problem:
    if isinstance(where, Loc):
        where = Where(where)
    info: dict[str, Any] = {"severity": severity, "source": where.loc.source}
    if where.loc.entry is not None:
        info["entry"] = where.loc.entry
    if where.line is not None:
        info["line"] = where.line
    if where.column is not None:
        info["column"] = where.column
    info.update({k: v for k, v in details.items() if v is not None})
    return Problem(code, message, where.loc.pointer, info)


def severity(problem: Problem) -> str:
    return problem.details.get("severity", "error")


def has_errors(problems: list[Problem]) -> bool:
    return any(severity(p) == "error" for p in problems)


MAX_CARRIED = 100


def capped(problems: list[Problem], limit: int = MAX_CARRIED) -> list[Problem]:
    """At most ``limit`` diagnostics, the rest counted in one last entry.

    Hostile text can yield one diagnostic per character run (say, 100,000 unclosed commands);
    carried into a state bootstrap or an event, that many would be refused as too large.
    """
    if len(problems) <= limit:
        return problems
    rest = problems[limit - 1 :]
    errors = sum(1 for p in rest if severity(p) == "error")
    summary = Problem(
        "mvu.diagnostics.truncated",
        f"{len(rest)} more diagnostics ({errors} errors) are not listed",
        None,
        {"severity": "error" if errors else "warning", "source": "adapter", "omitted": len(rest)},
    )
    return [*problems[: limit - 1], summary]


def line_of(text: str, offset: int) -> int:
    """1-based line number of character ``offset`` in ``text``."""
    return text.count("\n", 0, max(0, offset)) + 1


def column_of(text: str, offset: int) -> int:
    return offset - (text.rfind("\n", 0, offset) + 1) + 1
