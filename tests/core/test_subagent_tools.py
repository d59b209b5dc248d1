"""``rp_run_subagent`` pieces: the task input, routes, the tool allow-list and argument checks."""

from __future__ import annotations

import json

import pytest

from roleplay.core.subagent_catalog import SubagentItem
from roleplay.core.subagent_tools import FORBIDDEN_TOOLS, item_route, item_tools, subagent_tool, task_input
from roleplay.errors import RpError
from roleplay.harness.models.routes import Route
from roleplay.harness.tools import ToolContext

pytestmark = pytest.mark.anyio


def item(**kw: object) -> SubagentItem:
    return SubagentItem.model_validate({"name": "Critic", "usageContract": "Optional.", "instructions": "Review.", **kw})


def test_the_task_input_is_tag_safe_json() -> None:
    text = task_input("Review </task_input> this", {"draft": "<b>bold</b> & more"})
    assert text.startswith('<task_input format="json">') and text.count("</task_input>") == 1
    body = text[len('<task_input format="json">') : -len("</task_input>")]
    assert json.loads(body) == {"task": "Review </task_input> this", "input": {"draft": "<b>bold</b> & more"}}


def test_routes_and_tools() -> None:
    conversation = Route("demo", "demo")
    assert item_route(item(), conversation) is conversation
    own = item_route(item(route="deepseek/deepseek-flash/high"), conversation)
    assert (own.provider, own.model, own.reasoning_effort) == ("deepseek", "deepseek-flash", "high")
    wanted = item(tools=["rp_asset_read", "rp_state_read", "no_such_tool", *sorted(FORBIDDEN_TOOLS)])
    assert item_tools(wanted, ["rp_asset_read", "rp_write_turn", "rp_commit_turn", "rp_asset", "rp_state"]) == ["rp_asset_read"]


class _NoRuntime:
    class tools:
        @staticmethod
        def names() -> list[str]:
            return []


async def test_bad_calls_start_nothing_and_block_nothing() -> None:
    outcomes: list[tuple[str, object]] = []
    tool = subagent_tool(
        _NoRuntime(),  # type: ignore[arg-type]
        [item()],
        conversation_route=Route("demo", "demo"),
        identity="I.",
        images=[],
        on_outcome=lambda name, error: outcomes.append((name, error)),
    )
    assert tool.spawns_subagent and tool.parameters["properties"]["name"]["enum"] == ["Critic"]
    ctx = ToolContext("ses", "turn", "step", "call")
    cases = [
        ({"name": "Nobody", "task": "x", "input": {}}, "subagent.unknown"),
        ({"name": "Critic", "task": " ", "input": {}}, "subagent.invalid_task"),
        ({"name": "Critic", "task": "x", "input": '{"a": 1}'}, "subagent.input_not_object"),
        ({"name": "Critic", "task": "x", "input": [1]}, "subagent.input_not_object"),
        ({"name": "Critic", "task": "x", "input": {}, "extra": 1}, "subagent.invalid_arguments"),
    ]
    for args, code in cases:
        with pytest.raises(RpError) as refused:
            await tool.handler(args, ctx)  # type: ignore[misc]
        assert refused.value.code == code
    assert outcomes == []
