"""The typed run context a roleplay run hands its tools (and artifact generators).

The harness carries one opaque slot, ``ToolContext.deps`` (from ``AgentSpec.deps``), and knows
nothing of what is in it: ``rp chat`` runs with none. A roleplay run puts one :class:`RpRunDeps`
there; core's tools read it with attribute access through :func:`run_deps` /
:func:`require_run_deps`, so a missing or foreign value is one clear coded error, never a
``KeyError`` on a string key.

The field types are imported for the type checker only: the modules that define them (the Writer
tool, the commit tool, the run) read this module, so importing them here would be a cycle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from roleplay.errors import RpError
from roleplay.harness.tools import ToolContext

if TYPE_CHECKING:
    from .commit import CommitSession
    from .run import RpRun
    from .writer import WriterSlot

RunMode = Literal["chat", "agent"]


@dataclass(frozen=True)
class RpRunDeps:
    """What one roleplay run lends its tools. ``None`` fields: this run has no such part."""

    mode: RunMode = "chat"
    writer: WriterSlot | None = None  # read and filled by ``rp_write_turn``
    commit: CommitSession | None = None  # the per-run state of ``rp_commit_turn``
    run: RpRun | None = None  # the run itself (runtime, prepared build), for artifact generators


def run_deps(ctx: ToolContext) -> RpRunDeps | None:
    """The run's dependencies, or ``None`` outside a roleplay run (``rp chat``, a sub-agent)."""
    deps = ctx.deps
    return deps if isinstance(deps, RpRunDeps) else None


def require_run_deps(ctx: ToolContext, tool: str, code: str) -> RpRunDeps:
    """The run's dependencies; ``code`` when the tool is called outside a roleplay run."""
    deps = run_deps(ctx)
    if deps is None:
        raise RpError(code, f"{tool} is only available inside a roleplay run (the run provides no RpRunDeps)")
    return deps


__all__ = ["RpRunDeps", "RunMode", "require_run_deps", "run_deps"]
