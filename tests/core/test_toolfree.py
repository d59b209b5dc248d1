"""Any model plays (issue 13 item 2): a route that cannot call tools runs Chat mode on the
tool-free path, a provider's refusal of tools falls back to it, the fake OpenAI-compatible server
plays the roleplay protocol, and a reply that was not committed is flagged.

Every turn here goes through ``play_turn`` (the real run, Writer child session and
``rp_commit_turn`` validation); the fake-server tests go through the real ``openai`` SDK path.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from roleplay.cli import cli
from roleplay.cli_context import CliState
from roleplay.core.run import RunResult, play_turn
from roleplay.core.runtime import RoleplayRuntime
from roleplay.core.toolfree import (
    EFFECTS_REJECTED,
    EFFECTS_UNAVAILABLE,
    EFFECTS_UNREADABLE,
    NOT_COMMITTED,
    RUNTIME_CALL_WARNING,
    TOOL_FREE,
    TOOLS_REFUSED,
)
from roleplay.core.writer import WRITER_RESULT_KIND
from roleplay.harness.models.routes import Route, build_model, parse_route_spec
from roleplay.harness.models.scripted import ScriptedModel
from roleplay.harness.models.types import Capabilities, ModelRequest
from roleplay.harness.store import EventStore
from roleplay.state.events import state_document
from roleplay.testing.fake_openai import FakeError, FakeOpenAI, serve_fake_openai
from tests_support import sample_story

pytestmark = pytest.mark.anyio
SCRIPTED = Route("scripted", "scripted")
INPUTS = ["我推开铁门：我只是想看看灯塔。", "我帮她擦铜镜。", "我问起晨星号的事。"]
CLEAN = {"DEEPSEEK_API_KEY": "", "OPENAI_API_KEY": "", "RP_MODEL": "", "RP_DATABASE_URL": "", "RP_WRITER_MODEL": ""}


async def trust(rt: RoleplayRuntime, sid: str) -> int:
    return state_document((await rt.service.projection(sid, "rp/state")).state)["namespaces"]["story"]["value"]["林汐"]["信任"]


async def commit_meta(rt: RoleplayRuntime, result: RunResult) -> dict[str, Any]:
    """The successful commit of the turn, read back from the log, after checking the turn's shape:
    one Writer child session, and the reply message carrying the Writer's draft."""
    assert result.turn.outcome == "completed" and result.committed, result.turn.error
    mine = [e for e in await rt.service.events(result.session_id) if e.payload.get("turnId") == result.turn.turn_id]
    writers = [e for e in mine if e.type == "tool/result" and (e.payload.get("meta") or {}).get("kind") == WRITER_RESULT_KIND]
    assert len(writers) == 1
    child = await rt.service.get(writers[0].payload["meta"]["childSessionId"])
    assert child.parent_id == result.session_id and child.preset == "rp-writer"
    replies = [e for e in mine if e.type == "assistant/message" and "rp_commit_turn" in [c["name"] for c in e.payload.get("toolCalls", [])]]
    assert [b["text"] for b in replies[-1].payload["content"] if b["type"] == "text"] == [result.writer.text]  # type: ignore[union-attr]
    commits = [e.payload for e in mine if e.type == "tool/result" and e.payload["name"] == "rp_commit_turn" and e.payload["ok"]]
    assert len(commits) == 1
    return commits[0]["meta"]


async def assistant_warnings(rt: RoleplayRuntime, result: RunResult) -> list[list[str]]:
    events = await rt.service.events(result.session_id)
    return [
        e.payload["model"].get("warnings", [])
        for e in events
        if e.type == "assistant/message" and e.payload.get("turnId") == result.turn.turn_id
    ]


def codes(result: RunResult) -> list[str]:
    return [d["code"] for d in result.diagnostics]


# -- a route flagged tool-free ----------------------------------------------------------------------


def tool_free_responder(effects_text: Any) -> Any:
    """A model that cannot call tools: it fails the test if it is ever offered one."""

    def respond(request: ModelRequest) -> Any:
        assert not request.tools, "a tool-free route was sent tools"
        if request.extra.get("response_format") == {"type": "json_object"}:
            return effects_text(request) if callable(effects_text) else effects_text
        return "雾中传来回声。林汐看着你，没有说话。"

    return respond


def trust_effect(request: ModelRequest, by: int = 2, rule: str = "trust-shift") -> str:
    revision = int(request.messages[-1].text().split('"expectedRevision":', 1)[1].split(",", 1)[0])
    change = {"op": "increment", "path": "/林汐/信任", "by": by, "ruleId": rule, "reason": "她对你更信任了一点"}
    return json.dumps(
        {"effects": [{"kind": "state.update", "namespace": "story", "expectedRevision": revision, "payload": {"changes": [change]}}]}
    )


async def test_a_route_flagged_tool_free_plays_three_committed_turns(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    model = ScriptedModel(responder=tool_free_responder(trust_effect), capabilities=Capabilities(supports_tools=False))
    rt.models[SCRIPTED.spec] = model
    start = await trust(rt, sid)
    for n, text in enumerate(INPUTS, start=1):
        result = await play_turn(rt, sid, text, parent_route=SCRIPTED)
        meta = await commit_meta(rt, result)
        assert result.turn.steps == 2 and [r.name for r in result.turn.tool_results] == ["rp_write_turn", "rp_commit_turn"]
        assert [e["payload"]["changes"][0]["by"] for e in meta["effects"]] == [2]
        assert TOOL_FREE in [d["code"] for d in meta["diagnostics"]] and TOOL_FREE in codes(result)
        assert NOT_COMMITTED not in codes(result)
        # The runtime's calls say whose they are.
        assert await assistant_warnings(rt, result) == [[RUNTIME_CALL_WARNING], [RUNTIME_CALL_WARNING]]
        assert await trust(rt, sid) == start + 2 * n
    # Per turn: one Writer request and one JSON-mode request, neither with tools; the JSON-mode
    # request carries the turn's commit material and the Writer's draft.
    json_requests = [r for r in model.requests if r.extra.get("response_format")]
    assert len(model.requests) == 6 and len(json_requests) == 3
    assert "state_commit_contract" in json_requests[0].messages[-1].text() and "林汐看着你" in json_requests[0].messages[-1].text()
    await rt.aclose()


async def test_rejected_effects_are_committed_again_without_them(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    wrong_rule = tool_free_responder(lambda r: trust_effect(r, rule="mood"))  # mood is not the trust rule
    rt.models[SCRIPTED.spec] = ScriptedModel(responder=wrong_rule, capabilities=Capabilities(supports_tools=False))
    start = await trust(rt, sid)
    result = await play_turn(rt, sid, INPUTS[0], parent_route=SCRIPTED)
    meta = await commit_meta(rt, result)
    assert [r.ok for r in result.turn.tool_results] == [True, False, True] and meta["effects"] == []
    rejected = next(d for d in meta["diagnostics"] if d["code"] == EFFECTS_REJECTED)
    assert rejected["details"]["effects"][0]["payload"]["changes"][0]["ruleId"] == "mood"
    assert "commit.effect_invalid" in rejected["details"]["error"]
    assert await trust(rt, sid) == start


@pytest.mark.parametrize("answer", ["the lamp is lit", '{"changes": 3}', ""])
async def test_an_unreadable_state_answer_commits_the_reply_without_effects(store: EventStore, answer: str) -> None:
    rt, sid = await sample_story(store)
    rt.models[SCRIPTED.spec] = ScriptedModel(responder=tool_free_responder(answer), capabilities=Capabilities(supports_tools=False))
    start = await trust(rt, sid)
    result = await play_turn(rt, sid, INPUTS[0], parent_route=SCRIPTED)
    meta = await commit_meta(rt, result)
    assert meta["effects"] == [] and EFFECTS_UNREADABLE in codes(result)
    assert await trust(rt, sid) == start


async def test_a_writer_that_keeps_failing_ends_the_tool_free_turn_as_an_error(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    rt.models[SCRIPTED.spec] = ScriptedModel(responder=lambda r: "   ", capabilities=Capabilities(supports_tools=False))
    result = await play_turn(rt, sid, INPUTS[0], parent_route=SCRIPTED)
    assert result.turn.outcome == "error" and not result.committed
    assert result.turn.error["code"] == "writer.failed"  # type: ignore[index]
    assert [r.error["code"] for r in result.turn.tool_results] == ["writer.empty", "writer.empty"]  # type: ignore[index]
    assert NOT_COMMITTED in codes(result)


# -- the fake OpenAI-compatible server, real provider path -------------------------------------------


def fake_route(fake: FakeOpenAI, spec: str, rt: RoleplayRuntime) -> Route:
    route = parse_route_spec(spec)
    rt.models[route.spec] = build_model(route, env={"OPENAI_BASE_URL": fake.base_url})
    return route


async def test_the_fake_server_plays_three_committed_turns_with_state_changes(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    start = await trust(rt, sid)
    with serve_fake_openai(flavor="openai") as fake:  # unscripted: the roleplay protocol
        route = fake_route(fake, "openai/fake", rt)
        for n, text in enumerate(INPUTS, start=1):
            result = await play_turn(rt, sid, text, parent_route=route)
            meta = await commit_meta(rt, result)
            assert [r.name for r in result.turn.tool_results] == ["rp_write_turn", "rp_commit_turn"]
            assert meta["effects"][0]["payload"]["changes"][0]["ruleId"] == "trust-shift"
            assert result.reply.startswith("[fake server: not a real model]") and "<roleplay_request" not in result.reply
            assert text in result.reply and await trust(rt, sid) == start + n
        await rt.aclose()
    # Per turn: the parent offered the tools twice (write, commit), the Writer request had none.
    offered = [bool(r.body.get("tools")) for r in fake.chat_requests]
    assert offered == [True, False, True] * 3


async def test_a_tool_free_route_through_the_fake_server_takes_state_changes_from_json_mode(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    start = await trust(rt, sid)
    with serve_fake_openai(flavor="openai") as fake:
        route = fake_route(fake, "openai/fake?tools=off", rt)
        for n, text in enumerate(INPUTS, start=1):
            result = await play_turn(rt, sid, text, parent_route=route)
            meta = await commit_meta(rt, result)
            assert TOOL_FREE in codes(result) and meta["effects"][0]["payload"]["changes"][0]["by"] == 1
            assert await trust(rt, sid) == start + n
        await rt.aclose()
    bodies = [r.body for r in fake.chat_requests]
    assert len(bodies) == 6 and not any("tools" in b for b in bodies)
    assert [b.get("response_format") for b in bodies] == [None, {"type": "json_object"}] * 3


async def test_without_json_mode_a_tool_free_turn_commits_no_effects_and_says_so(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    start = await trust(rt, sid)
    with serve_fake_openai(flavor="openai") as fake:
        route = fake_route(fake, "openai/fake?tools=off&json=off", rt)
        result = await play_turn(rt, sid, INPUTS[0], parent_route=route)
        meta = await commit_meta(rt, result)
        await rt.aclose()
    assert meta["effects"] == [] and EFFECTS_UNAVAILABLE in [d["code"] for d in meta["diagnostics"]]
    assert len(fake.chat_requests) == 1 and await trust(rt, sid) == start  # the Writer only


async def test_a_provider_refusal_of_tools_falls_back_to_the_tool_free_path_for_that_run(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    start = await trust(rt, sid)
    with serve_fake_openai(flavor="openai") as fake:
        fake.enqueue(FakeError.tools_unsupported("gemma3"))
        route = fake_route(fake, "openai/fake", rt)
        refused = await play_turn(rt, sid, INPUTS[0], parent_route=route)
        meta = await commit_meta(rt, refused)
        note = next(d for d in meta["diagnostics"] if d["code"] == TOOLS_REFUSED)
        assert note["details"]["cause"] == "model.tools_unsupported" and "does not support tools" in note["message"]
        assert meta["effects"] and await trust(rt, sid) == start + 1  # the JSON-mode call recorded it
        # The next run tries tools again (the fake now accepts them).
        after = await play_turn(rt, sid, INPUTS[1], parent_route=route)
        assert TOOLS_REFUSED not in codes(after) and (await commit_meta(rt, after))["effects"]
        await rt.aclose()
    first = fake.chat_requests[0].body
    assert first["tools"] and len([r for r in fake.chat_requests if r.body.get("tools")]) == 1 + 2


# -- an uncommitted reply is flagged ------------------------------------------------------------------


async def test_a_plain_answer_without_the_writer_is_flagged_as_not_committed(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    rt.models[SCRIPTED.spec] = ScriptedModel(["灯塔有一百零八级台阶。"])
    result = await play_turn(rt, sid, "灯塔有多少级台阶？", parent_route=SCRIPTED)
    assert result.turn.outcome == "completed" and not result.committed
    flag = next(d for d in result.diagnostics if d["code"] == NOT_COMMITTED)
    assert "?tools=off" in flag["message"] and flag["details"]["toolCalls"] == 0


def cli_env(fake: FakeOpenAI) -> dict[str, str]:
    return {**CLEAN, "OPENAI_BASE_URL": fake.base_url}


def test_rp_say_warns_when_the_reply_was_not_committed(tmp_path: Path) -> None:
    runner = CliRunner()
    with serve_fake_openai(flavor="openai") as fake:
        env = cli_env(fake)
        sid = json.loads(runner.invoke(cli, ["--home", str(tmp_path), "new", "--sample", "--json"], env=env, obj=CliState()).stdout)[
            "sessionId"
        ]
        fake.enqueue("I am a small local model and I just chat.")  # a plain answer, no tool call
        said = runner.invoke(cli, ["--home", str(tmp_path), "say", sid, "你好", "--model", "openai/fake"], env=env, obj=CliState())
    assert said.exit_code == 0, said.output  # a discussion answer is a legitimate reply
    assert said.stdout.startswith("I am a small local model")
    assert f"warning [{NOT_COMMITTED}]" in said.stderr and "?tools=off" in said.stderr


def test_rp_say_plays_a_tool_free_route_through_the_fake_server(tmp_path: Path) -> None:
    runner = CliRunner()
    with serve_fake_openai(flavor="openai") as fake:
        env = cli_env(fake)
        sid = json.loads(runner.invoke(cli, ["--home", str(tmp_path), "new", "--sample", "--json"], env=env, obj=CliState()).stdout)[
            "sessionId"
        ]
        args = ["--home", str(tmp_path), "say", sid, "我敲了敲铁门。", "--model", "openai/fake?tools=off"]
        said = runner.invoke(cli, args, env=env, obj=CliState())
        summary = json.loads(runner.invoke(cli, [*args, "--json"], env=env, obj=CliState()).stdout)
    assert said.exit_code == 0, said.output
    assert said.stdout.startswith("[fake server: not a real model]") and "warning" not in said.stderr
    assert summary["committed"] and [t["name"] for t in summary["tools"]] == ["rp_write_turn", "rp_commit_turn"]
    assert TOOL_FREE in [d["code"] for d in summary["diagnostics"]]


async def test_the_demo_answers_the_state_change_call_so_a_tool_free_demo_story_changes_state(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    route = parse_route_spec("demo?tools=off")
    start = await trust(rt, sid)
    for n, text in enumerate(INPUTS, start=1):
        result = await play_turn(rt, sid, text, parent_route=route)
        assert result.committed and TOOL_FREE in codes(result)
        assert not [c for c in codes(result) if c.startswith("toolfree.")]  # the answer was read and accepted
        assert await trust(rt, sid) == start + n
    await rt.aclose()


def test_rp_new_keeps_the_tool_free_option_and_later_commands_play_on_it(tmp_path: Path) -> None:
    """The stored route carries ``?tools=off``: no --model on later commands."""
    runner = CliRunner()
    env = {"DEEPSEEK_API_KEY": "", "OPENAI_API_KEY": "", "OPENAI_BASE_URL": "", "RP_MODEL": "", "RP_DATABASE_URL": ""}
    base = ["--home", str(tmp_path)]
    new = json.loads(runner.invoke(cli, [*base, "new", "--sample", "--model", "demo?tools=off", "--json"], env=env, obj=CliState()).stdout)
    assert new["route"] == "demo/demo?tools=off"
    summary = json.loads(runner.invoke(cli, [*base, "say", new["sessionId"], "我敲门。", "--json"], env=env, obj=CliState()).stdout)
    assert summary["committed"] and TOOL_FREE in [d["code"] for d in summary["diagnostics"]]
    assert [t["name"] for t in summary["tools"]] == ["rp_write_turn", "rp_commit_turn"]
