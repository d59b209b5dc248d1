"""Agent mode end to end with scripted models, on both backends (issue 15 acceptance).

plan → write with a brief → polish → commit; an asset created and bound mid-run; a State
namespace created mid-run and a commit against the new epoch; a disabled catalog item is
invisible; a failing specialist blocks the Writer; a mode switch mid-run is refused; discussion
without the Writer; the brief exists only in Agent mode.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from tests_support import sample_story

from roleplay.core.execution_mode import set_mode
from roleplay.core.agent_mode import AGENT_STEP_LIMIT
from roleplay.core.profile import profile_of
from roleplay.core.run import RunResult, play_turn, prepare_run
from roleplay.core.runtime import RoleplayRuntime
from roleplay.core.settings import SettingsStore
from roleplay.core.subagent_catalog import SUBAGENT_MANAGER, edit_item, load_catalog, save_catalog
from roleplay.errors import ConflictError, RpError
from roleplay.harness.models.routes import Route
from roleplay.harness.models.scripted import ScriptedModel
from roleplay.harness.models.types import ModelRequest
from roleplay.harness.store import EventStore
from roleplay.state.events import state_document

pytestmark = pytest.mark.anyio
ROUTE = Route("scripted", "scripted")
Step = dict[str, Any] | Callable[[ModelRequest], dict[str, Any]]
PLAN = "1. 林汐点亮灯。2. 她提起晨星号。"
DRAFT = "林汐把提灯举高，雾在光里退开了一步。"


class Script:
    """A scripted parent (one step per request that offers tools), a Writer and specialists."""

    def __init__(self, steps: list[Step], specialist: Callable[[ModelRequest], Any] | None = None, writer: str = DRAFT) -> None:
        self.steps = list(steps)
        self.specialist = specialist or (lambda r: {"text": PLAN})
        self.writer = writer

    def __call__(self, request: ModelRequest) -> Any:
        if any(m.role == "user" and "<task_input" in m.text() for m in request.messages):
            return self.specialist(request)
        if not request.tools:
            return {"text": self.writer}
        if not self.steps:
            raise AssertionError(f"the script is exhausted; the last tool result: {tool_text(request)[:1200]}")
        step = self.steps.pop(0)
        return step(request) if callable(step) else step


def call(name: str, arguments: dict[str, Any], text: str = "") -> dict[str, Any]:
    return {"text": text, "tool_calls": [{"name": name, "arguments": arguments}]}


def last_ok_call(request: ModelRequest, name: str) -> str:
    """The id of the latest successful call of ``name`` in the request."""
    results = {m.tool_call_id: m.text() for m in request.messages if m.role == "tool"}
    ids = [c.id for m in request.messages for c in m.tool_calls if c.name == name and not results.get(c.id, "Error").startswith("Error")]
    return ids[-1]


def tool_text(request: ModelRequest, index: int = -1) -> str:
    return [m.text() for m in request.messages if m.role == "tool"][index]


async def agent_story(store: EventStore, script: Script) -> tuple[RoleplayRuntime, str, ScriptedModel]:
    rt, sid = await sample_story(store, plus_features=(SUBAGENT_MANAGER,))
    model = ScriptedModel(responder=script)
    rt.models[ROUTE.spec] = model
    await set_mode(rt, sid, "agent")
    return rt, sid, model


async def turn_events(rt: RoleplayRuntime, result: RunResult) -> list[Any]:
    return [e for e in await rt.service.events(result.session_id) if e.payload.get("turnId") == result.turn.turn_id]


async def prepared_epoch(rt: RoleplayRuntime, result: RunResult) -> str:
    """The epoch frozen at prepare, as the run-context message recorded it."""
    [context] = [e for e in await turn_events(rt, result) if "rpRunContext" in (e.payload.get("source") or {})]
    return str(context.payload["source"]["rpRunContext"]["epoch"])


def results_of(result: RunResult, name: str) -> list[Any]:
    return [r for r in result.turn.tool_results if r.name == name]


async def story_value(rt: RoleplayRuntime, sid: str) -> dict[str, Any]:
    return state_document((await rt.service.projection(sid, "rp/state")).state)["namespaces"]


# -- plan → write with a brief → polish → commit ---------------------------------------------------


async def test_plan_write_with_a_brief_polish_and_commit(store: EventStore) -> None:
    polished = "林汐把提灯举得更高，雾在光里退开了一步。"

    def specialist(request: ModelRequest) -> dict[str, Any]:
        task = json.loads(re.search(r"<task_input format=\"json\">(.*)</task_input>", request.messages[-1].text(), re.S).group(1))  # type: ignore[union-attr]
        return {"text": polished if "draft" in task["input"] else PLAN}

    script = Script(
        [
            call("rp_run_subagent", {"name": "Planning", "task": "Outline the passage.", "input": {"request": "我点灯。"}}),
            lambda r: call(
                "rp_write_turn", {"action": "write", "brief": re.search(r"\n(.*)\n</subagent_result>", tool_text(r), re.S).group(1)}
            ),  # type: ignore[union-attr]
            lambda r: call("rp_run_subagent", {"name": "Polishing", "task": "Polish it.", "input": {"draft": DRAFT, "brief": PLAN}}),
            lambda r: call(
                "rp_commit_turn",
                {"references": {"writer": last_ok_call(r, "rp_write_turn")}, "summary": "灯亮了", "effects": []},
                text=polished,
            ),
        ],
        specialist,
    )
    rt, sid, model = await agent_story(store, script)
    result = await play_turn(rt, sid, "我点灯。", parent_route=ROUTE)
    assert result.committed and result.turn.outcome == "completed", result.turn.error
    assert result.reply == polished and result.prepared.mode == "agent"
    # The parent: layered system prompt, the agent request with the catalog, Agent tools.
    first = next(r for r in model.requests if r.tools)
    system = first.messages[0].text()
    order = [system.index(s) for s in ("narrative engine", "# Roleplay", "# Agent workflow", "## rp_write_turn", "## rp_run_subagent")]
    assert order == sorted(order)
    request = first.messages[-1].text()
    assert request.startswith('<roleplay_request mode="agent">') and '<section name="Current input">' in request
    catalog = json.loads(re.search(r'<specialist_catalog format="json">(.*)</specialist_catalog>', request).group(1))  # type: ignore[union-attr]
    assert [e["name"] for e in catalog] == ["Planning", "Polishing"] and all(set(e) == {"name", "usageContract"} for e in catalog)
    tools = {t.name: t for t in first.tools}
    assert {"rp_write_turn", "rp_run_subagent", "rp_asset", "rp_state", "rp_asset_read", "rp_state_read"} <= set(tools)
    assert "brief" in tools["rp_write_turn"].parameters["properties"]
    # The Writer got the brief at the end of its one prompt.
    writer = results_of(result, "rp_write_turn")[0]
    writer_events = await rt.service.events(writer.meta["childSessionId"])  # type: ignore[index]
    prompt = [e for e in writer_events if e.type == "user/message"][0].payload["content"][0]["text"]
    assert prompt.endswith(f"<writing_brief>\n{PLAN}\n</writing_brief>")
    # Each specialist ran in a fresh child: its instructions verbatim, one <task_input>.
    runs = results_of(result, "rp_run_subagent")
    assert [r.ok for r in runs] == [True, True] and [r.meta["name"] for r in runs] == ["Planning", "Polishing"]  # type: ignore[index]
    catalog_items = (await load_catalog(SettingsStore(store), "en")).items
    for run, item in zip(runs, catalog_items):
        child = await rt.service.get(run.meta["childSessionId"])  # type: ignore[index]
        assert child.parent_id == sid and child.preset == "rp-subagent"
        events = await rt.service.events(child.id)
        [message] = [e for e in events if e.type == "user/message"]
        assert [b["type"] for b in message.payload["content"]] == ["text"]
        assert message.payload["content"][0]["text"].startswith('<task_input format="json">{"input":')
        task_text = message.payload["content"][0]["text"]
        [sent] = [r for r in model.requests if r.messages[-1].text() == task_text]
        assert sent.messages[0].text().endswith("\n\n" + item.instructions) and not sent.tools  # persona: instructions verbatim
    # The commit: Agent mode, the parent's revised text is the body.
    [commit] = [r for r in results_of(result, "rp_commit_turn") if r.ok]
    assert commit.meta["mode"] == "agent" and commit.meta["body"]["source"] == "response"  # type: ignore[index]
    reply = [e for e in await turn_events(rt, result) if e.type == "assistant/message" and e.payload.get("toolCalls")][-1]
    assert reply.payload["content"][0]["text"] == polished
    assert result.turn.steps <= AGENT_STEP_LIMIT
    await rt.aclose()


async def test_a_discussion_is_answered_without_the_writer(store: EventStore) -> None:
    rt, sid, _ = await agent_story(store, Script(["灯塔有一百零八级台阶。"]))  # type: ignore[list-item]
    result = await play_turn(rt, sid, "灯塔有多少级台阶？", parent_route=ROUTE)
    assert result.turn.outcome == "completed" and not result.committed and result.writer is None
    assert result.reply == "灯塔有一百零八级台阶。"
    assert "run.not_committed" in [d["code"] for d in result.diagnostics]
    await rt.aclose()


async def test_the_brief_exists_only_in_agent_mode(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    rt.models[ROUTE.spec] = ScriptedModel(
        responder=Script([call("rp_write_turn", {"action": "write", "brief": "x"}), "好的。"])  # type: ignore[list-item]
    )
    result = await play_turn(rt, sid, "我点灯。", parent_route=ROUTE)  # Chat
    assert results_of(result, "rp_write_turn")[0].error["code"] == "tool.invalid_arguments"  # type: ignore[index]
    chat_tools = {t.name: t for t in rt.models[ROUTE.spec].requests[0].tools}  # type: ignore[attr-defined]
    assert "brief" not in chat_tools["rp_write_turn"].parameters["properties"]
    assert "rp_run_subagent" not in chat_tools and "rp_asset" not in chat_tools
    # Agent: a brief over the bound is refused by the schema.
    rt.models[ROUTE.spec] = ScriptedModel(
        responder=Script([call("rp_write_turn", {"action": "write", "brief": "长" * 4001}), "好的。"])  # type: ignore[list-item]
    )
    await set_mode(rt, sid, "agent")
    result = await play_turn(rt, sid, "我点灯。", parent_route=ROUTE)
    assert results_of(result, "rp_write_turn")[0].error["code"] == "tool.invalid_arguments"  # type: ignore[index]
    await rt.aclose()


# -- in-run writes: an asset created and bound; a State namespace created --------------------------


async def test_an_asset_created_and_bound_mid_run_refreshes_the_context(store: EventStore) -> None:
    created: dict[str, Any] = {}

    def bind(request: ModelRequest) -> dict[str, Any]:
        created["id"] = json.loads(tool_text(request).split("\n")[0])["asset"]["id"]
        return call("rp_asset", {"action": "bind", "bind": {"persona": created["id"]}, "expectedProfileRevision": created["revision"]})

    script = Script(
        [
            call("rp_write_turn", {"action": "write"}),
            call("rp_asset", {"action": "create", "kind": "persona", "data": {"name": "Kai", "description": "A pilot from the harbour."}}),
            bind,
            lambda r: call("rp_commit_turn", {"references": {"writer": last_ok_call(r, "rp_write_turn")}, "effects": []}, text=DRAFT),
            call("rp_write_turn", {"action": "write"}),
            lambda r: call("rp_commit_turn", {"references": {"writer": last_ok_call(r, "rp_write_turn")}, "effects": []}, text=DRAFT),
        ]
    )
    rt, sid, _ = await agent_story(store, script)
    created["revision"] = (await rt.service.projection(sid, "rp/session")).state["revision"]
    result = await play_turn(rt, sid, "我是Kai，我走进灯塔。", parent_route=ROUTE)
    assert result.committed, result.turn.error
    writes = results_of(result, "rp_asset")
    assert [w.ok for w in writes] == [True, True]
    assert writes[0].meta["contextRefresh"]["changed"] is False  # type: ignore[index]  (created, not bound yet)
    refresh = writes[1].meta["contextRefresh"]  # type: ignore[index]
    first_writer = results_of(result, "rp_write_turn")[0].call_id
    assert refresh["changed"] and refresh["droppedWriter"] == first_writer
    replacement = writes[1].meta["commitContextReplacement"]  # type: ignore[index]
    first_epoch = await prepared_epoch(rt, result)
    assert replacement["previousEpoch"] == first_epoch != replacement["epoch"] == result.prepared.build.epoch
    assert "<context_refresh" in writes[1].content and "A pilot from the harbour." in writes[1].content  # type: ignore[operator]
    # The commit with the dropped draft is refused outright; the second Writer saw the persona.
    commits = results_of(result, "rp_commit_turn")
    # (masked again until a new draft exists; the commit session would refuse it too)
    assert [c.ok for c in commits] == [False, True] and commits[0].error["code"] == "tool.not_available"  # type: ignore[index]
    second = results_of(result, "rp_write_turn")[1]
    writer_events = await rt.service.events(second.meta["childSessionId"])  # type: ignore[index]
    assert "A pilot from the harbour." in [e for e in writer_events if e.type == "user/message"][0].payload["content"][0]["text"]
    assert commits[1].meta["context"]["epoch"] == replacement["epoch"] == second.meta["epoch"]  # type: ignore[index]
    profile = profile_of((await rt.service.projection(sid, "rp/session")).state)
    assert profile.resources.persona == created["id"]
    await rt.aclose()


WEATHER = {
    "title": "Weather",
    "updateMode": "schema-only",
    "schema": {
        "type": "object",
        "properties": {"rain": {"type": "integer", "minimum": 0, "maximum": 10}},
        "required": ["rain"],
        "additionalProperties": False,
    },
    "rules": [],
}


async def test_a_state_namespace_created_mid_run_then_a_commit_against_the_new_epoch(store: EventStore) -> None:
    change = {"op": "set", "path": "/rain", "value": 3, "reason": "雨下大了"}
    effect = {"kind": "state.update", "namespace": "weather", "expectedRevision": 1, "payload": {"changes": [change]}}
    script = Script(
        [
            call(
                "rp_state",
                {"action": "create", "namespace": "weather", "expectedRevision": 0, "definition": WEATHER, "initialValue": {"rain": 1}},
            ),
            call("rp_write_turn", {"action": "write"}),
            lambda r: call("rp_commit_turn", {"references": {"writer": last_ok_call(r, "rp_write_turn")}, "effects": [effect]}, text=DRAFT),
        ]
    )
    rt, sid, _ = await agent_story(store, script)
    result = await play_turn(rt, sid, "下雨了。", parent_route=ROUTE)
    assert result.committed, [r.error for r in result.turn.tool_results]
    [configured] = results_of(result, "rp_state")
    replacement = configured.meta["commitContextReplacement"]  # type: ignore[index]
    assert replacement["previousEpoch"] == await prepared_epoch(rt, result) != replacement["epoch"]
    assert "weather" in replacement["commitContext"]
    [commit] = results_of(result, "rp_commit_turn")
    assert commit.meta["context"]["epoch"] == replacement["epoch"]  # type: ignore[index]
    assert (await story_value(rt, sid))["weather"]["value"] == {"rain": 3}
    await rt.aclose()


# -- the catalog: disabled items, failures --------------------------------------------------------


async def test_a_disabled_catalog_item_is_invisible(store: EventStore) -> None:
    script = Script(
        [
            call("rp_run_subagent", {"name": "Polishing", "task": "Polish.", "input": {"draft": "x"}}),
            call("rp_write_turn", {"action": "write"}),
            lambda r: call("rp_commit_turn", {"references": {"writer": last_ok_call(r, "rp_write_turn")}, "effects": []}, text=DRAFT),
        ]
    )
    rt, sid, model = await agent_story(store, script)
    settings = SettingsStore(store)
    catalog = await load_catalog(settings, "en")
    await save_catalog(settings, edit_item(catalog, "Polishing", {"enabled": False}), catalog.revision)
    result = await play_turn(rt, sid, "我点灯。", parent_route=ROUTE)
    request = next(r for r in model.requests if r.tools)
    assert "Polishing" not in request.messages[-1].text() and "Planning" in request.messages[-1].text()
    tool = next(t for t in request.tools if t.name == "rp_run_subagent")
    assert tool.parameters["properties"]["name"]["enum"] == ["Planning"]
    [refused] = results_of(result, "rp_run_subagent")
    assert refused.error["code"] == "subagent.unknown"  # type: ignore[index]
    assert result.committed  # a call that started nothing blocks nothing
    # Both off: the catalog is [] and the tool is not offered at all.
    catalog = await load_catalog(settings, "en")
    await save_catalog(settings, edit_item(catalog, "Planning", {"enabled": False}), catalog.revision)
    prepared = await prepare_run(rt, sid, "我点灯。", parent_route=ROUTE)
    assert '<specialist_catalog format="json">[]</specialist_catalog>' in prepared.run_context
    await rt.aclose()


async def test_a_failing_specialist_blocks_the_writer_until_it_succeeds(store: EventStore) -> None:
    attempts: list[int] = []

    def specialist(request: ModelRequest) -> Any:
        attempts.append(1)
        return RpError("model.unavailable", "the planner's provider is down") if len(attempts) == 1 else {"text": PLAN}

    plan = call("rp_run_subagent", {"name": "Planning", "task": "Outline.", "input": {"request": "我点灯。"}})
    script = Script(
        [
            plan,
            call("rp_write_turn", {"action": "write"}),
            call("rp_commit_turn", {"references": {"writer": "nope"}, "effects": []}, text=DRAFT),
            plan,
            call("rp_write_turn", {"action": "write"}),
            lambda r: call("rp_commit_turn", {"references": {"writer": last_ok_call(r, "rp_write_turn")}, "effects": []}, text=DRAFT),
        ],
        specialist,
    )
    rt, sid, _ = await agent_story(store, script)
    result = await play_turn(rt, sid, "我点灯。", parent_route=ROUTE)
    runs = results_of(result, "rp_run_subagent")
    assert [r.ok for r in runs] == [False, True] and "blocked" in runs[0].error["message"]  # type: ignore[index]
    writes = results_of(result, "rp_write_turn")
    assert [w.ok for w in writes] == [False, True] and writes[0].error["code"] == "subagent.blocking_failure"  # type: ignore[index]
    assert results_of(result, "rp_commit_turn")[0].error["code"] in ("subagent.blocking_failure", "tool.not_available")  # type: ignore[index]
    assert result.committed
    await rt.aclose()


async def test_a_failing_specialist_with_no_retry_ends_the_turn_uncommitted(store: EventStore) -> None:
    script = Script(
        [
            call("rp_run_subagent", {"name": "Planning", "task": "Outline.", "input": {"request": "我点灯。"}}),
            call("rp_write_turn", {"action": "write"}),
            "规划失败了，这一轮没有续写。",  # type: ignore[list-item]
        ],
        lambda r: RpError("model.unavailable", "down"),
    )
    rt, sid, _ = await agent_story(store, script)
    result = await play_turn(rt, sid, "我点灯。", parent_route=ROUTE)
    assert not result.committed and result.writer is None
    assert results_of(result, "rp_write_turn")[0].error["code"] == "subagent.blocking_failure"  # type: ignore[index]
    await rt.aclose()


async def test_specialist_input_must_be_an_object_and_tools_are_the_allow_list_of_installed_ones(store: EventStore) -> None:
    script = Script(
        [
            call("rp_run_subagent", {"name": "Helper", "task": "Look.", "input": '{"a": 1}'}),
            call("rp_run_subagent", {"name": "Helper", "task": "Look.", "input": {"a": 1}}),
            "好的。",  # type: ignore[list-item]
        ]
    )
    rt, sid, model = await agent_story(store, script)
    settings = SettingsStore(store)
    catalog = await load_catalog(settings, "en")
    from roleplay.core.subagent_catalog import SubagentItem, add_item

    helper = SubagentItem.model_validate(
        {
            "name": "Helper",
            "usageContract": "Optional.",
            "instructions": "Help.",
            "tools": ["rp_asset_read", "rp_commit_turn", "rp_asset", "no_such_tool"],
        }
    )
    await save_catalog(settings, add_item(catalog, helper), catalog.revision)
    result = await play_turn(rt, sid, "我点灯。", parent_route=ROUTE)
    runs = results_of(result, "rp_run_subagent")
    assert runs[0].error["code"] == "subagent.input_not_object" and "JSON string" in runs[0].error["message"]  # type: ignore[index]
    assert runs[1].ok
    [child_request] = [r for r in model.requests if "<task_input" in r.messages[-1].text()]
    assert [t.name for t in child_request.tools] == ["rp_asset_read"]
    await rt.aclose()


# -- the mode switch ----------------------------------------------------------------------------


async def test_a_mode_switch_mid_run_is_refused(store: EventStore) -> None:
    gate, entered = asyncio.Event(), asyncio.Event()

    async def parent(request: ModelRequest) -> Any:
        entered.set()
        await gate.wait()
        return {"text": "好的。"}

    rt, sid = await sample_story(store)
    rt.models[ROUTE.spec] = ScriptedModel(responder=parent)
    view = await set_mode(rt, sid, "agent")
    assert view["executionMode"] == "agent"
    task = asyncio.ensure_future(play_turn(rt, sid, "我点灯。", parent_route=ROUTE))
    await asyncio.wait_for(entered.wait(), 10)
    with pytest.raises(ConflictError) as refused:
        await set_mode(rt, sid, "chat")
    assert refused.value.code == "run.busy"
    gate.set()
    result = await task
    assert result.prepared.mode == "agent"
    assert (await set_mode(rt, sid, "chat"))["executionMode"] == "chat"  # idle again: allowed
    with pytest.raises(ConflictError):
        await set_mode(rt, sid, "agent", expected_revision=0)  # a stale revision is refused
    await rt.aclose()


async def test_a_failed_refresh_blocks_the_writer_and_the_commit_but_the_change_stays(
    store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    import roleplay.core.agent_mode as agent_mode

    async def broken(*args: Any, **kw: Any) -> Any:
        raise RpError("context.source_failed", "a source could not be built")

    create = {"action": "create", "namespace": "weather", "expectedRevision": 0, "definition": WEATHER, "initialValue": {"rain": 1}}
    script = Script([call("rp_state", create), call("rp_write_turn", {"action": "write"}), "配置已保存，但这一轮无法续写。"])  # type: ignore[list-item]
    rt, sid, _ = await agent_story(store, script)
    monkeypatch.setattr(agent_mode, "collect_sources", broken)
    result = await play_turn(rt, sid, "加一个天气变量。", parent_route=ROUTE)
    [configured] = results_of(result, "rp_state")
    assert configured.ok and configured.meta["contextRefresh"] == {  # type: ignore[index]
        "ok": False,
        "error": {"code": "context.source_failed", "message": "a source could not be built"},
    }
    assert "blocked for the rest of this turn" in configured.content  # type: ignore[operator]
    assert results_of(result, "rp_write_turn")[0].error["code"] == "run.context_refresh_failed"  # type: ignore[index]
    assert not result.committed
    assert (await story_value(rt, sid))["weather"]["value"] == {"rain": 1}  # the configuration stays
    await rt.aclose()


async def test_a_catalog_change_mid_run_applies_from_the_next_run(store: EventStore) -> None:
    settings = SettingsStore(store)

    async def disable_then_plan(request: ModelRequest) -> dict[str, Any]:
        catalog = await load_catalog(settings, "en")
        await save_catalog(settings, edit_item(catalog, "Planning", {"enabled": False}), catalog.revision)
        return call("rp_run_subagent", {"name": "Planning", "task": "Outline.", "input": {"request": "我点灯。"}})

    script = Script([disable_then_plan, "好的。"])  # type: ignore[list-item]
    rt, sid, _ = await agent_story(store, script)
    result = await play_turn(rt, sid, "我点灯。", parent_route=ROUTE)
    assert results_of(result, "rp_run_subagent")[0].ok  # the run keeps the catalog it started with
    prepared = await prepare_run(rt, sid, "我点灯。", parent_route=ROUTE)
    assert [i.name for i in prepared.catalog] == ["Polishing"]
    await rt.aclose()


async def test_a_specialist_gets_this_turns_images_after_its_task_input(store: EventStore) -> None:
    import base64
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (2, 2), (200, 30, 30)).save(buf, format="PNG")
    image = {"type": "image", "mediaType": "image/png", "data": base64.b64encode(buf.getvalue()).decode("ascii")}
    script = Script([call("rp_run_subagent", {"name": "Planning", "task": "Describe the photo.", "input": {}}), "好的。"])  # type: ignore[list-item]
    rt, sid, _ = await agent_story(store, script)
    result = await play_turn(rt, sid, "你看这张照片。", parent_route=ROUTE, images=[image])
    [run] = results_of(result, "rp_run_subagent")
    assert run.ok, run.error
    [message] = [e for e in await rt.service.events(run.meta["childSessionId"]) if e.type == "user/message"]  # type: ignore[index]
    assert [b["type"] for b in message.payload["content"]] == ["text", "image"]
    await rt.aclose()


async def test_without_the_subagent_manager_the_agent_has_no_specialists(store: EventStore) -> None:
    rt, sid = await sample_story(store)  # rp-subagent-manager off
    await set_mode(rt, sid, "agent")
    prepared = await prepare_run(rt, sid, "我点灯。", parent_route=ROUTE)
    assert prepared.catalog == () and '<specialist_catalog format="json">[]</specialist_catalog>' in prepared.run_context
    await rt.aclose()


async def test_a_bound_asset_updated_mid_run_moves_the_commit_to_its_new_revision(store: EventStore) -> None:
    update: dict[str, Any] = {}
    script = Script(
        [
            call("rp_write_turn", {"action": "write"}),
            lambda r: call("rp_asset", update),
            call("rp_write_turn", {"action": "write"}),
            lambda r: call("rp_commit_turn", {"references": {"writer": last_ok_call(r, "rp_write_turn")}, "effects": []}, text=DRAFT),
        ]
    )
    rt, sid, _ = await agent_story(store, script)
    card_id = profile_of((await rt.service.projection(sid, "rp/session")).state).resources.card
    record = await rt.assets.get(card_id)  # type: ignore[arg-type]
    data = {**record.data, "description": record.data["description"] + "她养了一只叫阿灰的猫。"}
    update.update({"action": "update", "id": card_id, "data": data, "expectedRevision": record.revision})
    result = await play_turn(rt, sid, "我问起那只猫。", parent_route=ROUTE)
    assert result.committed, [r.error for r in result.turn.tool_results]
    [write] = results_of(result, "rp_asset")
    refresh = write.meta["contextRefresh"]  # type: ignore[index]
    assert refresh["changed"] and refresh["droppedWriter"] == results_of(result, "rp_write_turn")[0].call_id
    second = results_of(result, "rp_write_turn")[1]
    prompt = [e for e in await rt.service.events(second.meta["childSessionId"]) if e.type == "user/message"][0]  # type: ignore[index]
    assert "阿灰" in prompt.payload["content"][0]["text"]
    assert result.prepared.sources.live_revisions[card_id] == record.revision + 1  # type: ignore[index]
    await rt.aclose()


async def test_a_specialists_read_tools_read_the_story_it_works_for(store: EventStore) -> None:
    from roleplay.core.subagent_catalog import SubagentItem, add_item

    def reader(request: ModelRequest) -> dict[str, Any]:
        if request.messages[-1].role != "tool":
            return call("rp_asset_read", {"action": "list"})
        return {"text": "bound: " + request.messages[-1].text()[:2000]}

    script = Script([call("rp_run_subagent", {"name": "Reader", "task": "List the bound assets.", "input": {}}), "好的。"], reader)  # type: ignore[list-item]
    rt, sid, _ = await agent_story(store, script)
    settings = SettingsStore(store)
    catalog = await load_catalog(settings, "en")
    item = SubagentItem.model_validate(
        {"name": "Reader", "usageContract": "Optional.", "instructions": "Read.", "tools": ["rp_asset_read"]}
    )
    await save_catalog(settings, add_item(catalog, item), catalog.revision)
    card_id = profile_of((await rt.service.projection(sid, "rp/session")).state).resources.card
    result = await play_turn(rt, sid, "我点灯。", parent_route=ROUTE)
    [run] = results_of(result, "rp_run_subagent")
    assert run.ok and str(card_id) in run.meta["text"] and "林汐" in run.meta["text"]  # type: ignore[index]
    await rt.aclose()
