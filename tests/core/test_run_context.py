"""The typed run context: what a roleplay run lends its tools, read by attribute, and one coded
error when a tool runs where no run lent it (``rp chat``, a sub-agent, a foreign value)."""

from __future__ import annotations

import pytest

from roleplay.core.asset_tools import tool_mode
from roleplay.core.commit import commit_tool
from roleplay.core.run_context import RpRunDeps, require_run_deps, run_deps
from roleplay.core.writer import write_turn_tool
from roleplay.errors import RpError
from roleplay.harness.models.types import ToolCall
from roleplay.harness.sessions import SessionService
from roleplay.harness.store import EventStore
from roleplay.harness.tools import ToolContext, ToolRegistry
from roleplay.names import COMMIT_TURN_TOOL, WRITE_TURN_TOOL
from tests_support import state_effect_registry

pytestmark = pytest.mark.anyio


def ctx(deps: object = None, depth: int = 0) -> ToolContext:
    return ToolContext("ses", "turn", "step", "call", depth=depth, deps=deps)


def test_run_deps_narrows_to_the_dataclass_and_nothing_else() -> None:
    deps = RpRunDeps(mode="agent")
    assert run_deps(ctx(deps)) is deps
    assert run_deps(ctx()) is None
    assert run_deps(ctx({"rpMode": "agent"})) is None  # the old string-keyed shape is not a run context
    with pytest.raises(RpError) as exc:
        require_run_deps(ctx({"rpCommit": object()}), "some_tool", "some.no_run")
    assert exc.value.code == "some.no_run" and "some_tool" in exc.value.message


def test_the_mode_is_agent_only_for_a_top_level_agent_run() -> None:
    assert tool_mode(ctx(RpRunDeps(mode="agent"))) == "agent"
    assert tool_mode(ctx(RpRunDeps(mode="agent"), depth=1)) == "chat"
    assert tool_mode(ctx(RpRunDeps(mode="chat"))) == "chat"
    assert tool_mode(ctx()) == "chat"


async def test_run_tools_outside_a_run_fail_with_their_codes(store: EventStore) -> None:
    registry = ToolRegistry([write_turn_tool(SessionService(store)), commit_tool(state_effect_registry())])
    for name, code, deps in [
        (WRITE_TURN_TOOL, "writer.no_run", None),
        (WRITE_TURN_TOOL, "writer.no_run", RpRunDeps()),  # a run context without a Writer slot
        (COMMIT_TURN_TOOL, "commit.no_session", None),
        (COMMIT_TURN_TOOL, "commit.no_session", RpRunDeps()),
    ]:
        args = '{"action": "write"}' if name == WRITE_TURN_TOOL else '{"references": {"writer": "w"}, "effects": []}'
        result = await registry.execute(ToolCall("call", name, args), ctx(deps))
        assert not result.ok and result.error is not None and result.error["code"] == code, (name, deps, result.error)
