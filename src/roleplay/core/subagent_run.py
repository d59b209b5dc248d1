"""Boundary: how roleplay code runs sub-agents (the spec's ``rp-core/subagent-run``).

The Writer and task sub-agents go through ``run_structured``: capability check first (images need
a model that takes images), then a one-shot child session, then the result (text, or data
validated against a JSON Schema). Timeouts and the parent's abort surface as ``subagent.timeout``
and ``subagent.aborted``, each naming the child session, whose log stays closed and readable.
"""

from __future__ import annotations

import asyncio
from typing import Any

from roleplay.errors import RpError
from roleplay.harness.models.types import ChatModel
from roleplay.harness.sessions import SessionService
from roleplay.harness.subagents import SubagentRequest, SubagentResult, run_subagent
from roleplay.harness.tools import ToolRegistry


def check_capability(model: ChatModel, request: SubagentRequest) -> None:
    """Refuse early what the route cannot do, instead of a provider error mid-run."""
    if request.images and not model.capabilities.supports_images:
        raise RpError(
            "subagent.images_unsupported",
            f"{model.label} does not accept images; choose another route for this sub-agent",
            details={"provider": model.provider, "model": model.model},
        )


async def run_structured(
    service: SessionService,
    parent_session_id: str,
    request: SubagentRequest,
    *,
    model: ChatModel,
    tools: ToolRegistry | None = None,
    abort: asyncio.Event | None = None,
    depth: int = 0,
) -> SubagentResult:
    check_capability(model, request)
    return await run_subagent(service, parent_session_id, request, model=model, tools=tools, abort=abort, depth=depth)


def result_reference(result: SubagentResult) -> dict[str, Any]:
    """What a parent records about a sub-agent run (e.g. in ``tool/result.meta``)."""
    return {"childSessionId": result.session_id, "outcome": result.outcome, "tools": result.tools, "ignoredTools": result.ignored_tools}
