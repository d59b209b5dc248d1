"""Contract tests of the subagent-run boundary (the spec's ``test:compat``, part 2): capability,
result shape, timeout and parent abort."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest

from roleplay.core.subagent_run import check_capability, result_reference, run_structured
from roleplay.errors import RpError
from roleplay.harness.models.scripted import ScriptedModel
from roleplay.harness.models.types import Capabilities
from roleplay.harness.sessions import SessionService
from roleplay.harness.store import EventStore
from roleplay.harness.subagents import SubagentRequest

pytestmark = pytest.mark.anyio

IMAGE = {"type": "image", "mediaType": "image/png", "data": "iVBORw0KGgo="}


async def slow(req: Any) -> str:
    await asyncio.sleep(30)
    return "late"


async def test_capability_is_checked_before_any_child_exists(store: EventStore) -> None:
    service = SessionService(store)
    parent = await service.create("roleplay")
    text_only = ScriptedModel(["x"], capabilities=replace(Capabilities(), supports_images=False))
    req = SubagentRequest("writer", "Writer.", "Write.", images=[IMAGE])
    with pytest.raises(RpError) as exc:
        await run_structured(service, parent.id, req, model=text_only)
    assert exc.value.code == "subagent.images_unsupported"
    assert await service.children(parent.id) == []
    check_capability(ScriptedModel(["x"]), req)  # a model that takes images passes


async def test_result_shape(store: EventStore) -> None:
    service = SessionService(store)
    parent = await service.create("roleplay")
    schema = {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"], "additionalProperties": False}
    result = await run_structured(
        service, parent.id, SubagentRequest("task", "Name it.", "Scene.", result_schema=schema), model=ScriptedModel(['{"title": "Night"}'])
    )
    assert result.data == {"title": "Night"} and result.outcome == "completed" and result.text == '{"title": "Night"}'
    ref = result_reference(result)
    assert ref == {"childSessionId": result.session_id, "outcome": "completed", "tools": [], "ignoredTools": []}
    assert (await service.get(result.session_id)).parent_id == parent.id


async def test_timeout_and_abort_name_the_child(store: EventStore) -> None:
    service = SessionService(store)
    parent = await service.create("roleplay")
    with pytest.raises(RpError) as exc:
        await run_structured(service, parent.id, SubagentRequest("t", "s", "u", timeout=0.2), model=ScriptedModel(responder=slow))
    assert exc.value.code == "subagent.timeout"
    child = exc.value.details["childSessionId"]
    assert (await service.events(child))[-1].payload["outcome"] == "aborted"

    abort = asyncio.Event()
    task = asyncio.ensure_future(
        run_structured(service, parent.id, SubagentRequest("t", "s", "u"), model=ScriptedModel(responder=slow), abort=abort)
    )
    await asyncio.sleep(0.2)
    abort.set()
    with pytest.raises(RpError) as exc:
        await asyncio.wait_for(task, 10)
    assert exc.value.code == "subagent.aborted" and exc.value.details["childSessionId"] != child
