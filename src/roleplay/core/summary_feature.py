"""``rp-conversation-summary`` as a plugin: what it adds to a runtime.

- the ``rp-conversation-summary/candidate`` and ``/discard`` commands and the ``rp/summary``
  projection (``core.summary``), through which candidates are recorded and read back;
- the offline demo model's answer to the summariser (``core.summary_prompts``).

The turn itself calls ``core.summary`` (landing before prepare, the watch on the parent model);
with the feature off, nothing is generated or landed, and the log keeps every checkpoint, so the
surface still folds them.
"""

from __future__ import annotations

from typing import Any

from roleplay.hookspecs import hookimpl

from .summary import CANDIDATE, DISCARD, FEATURE, candidate_command, discard_command, summary_projection
from .summary_prompts import summary_demo_policy

__all__ = ["FEATURE"]


@hookimpl
def register_session_commands(register: Any) -> None:
    register(CANDIDATE, candidate_command)
    register(DISCARD, discard_command)


@hookimpl
def register_projections(register: Any) -> None:
    register(summary_projection)


@hookimpl
def register_demo_policies(register: Any) -> None:
    register("roleplay-summary", summary_demo_policy)
