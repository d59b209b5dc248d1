"""``rp mode``, ``rp subagents`` and ``rp writer-route`` through click, with the demo model."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from roleplay.cli import cli
from roleplay.cli_context import CliState

CLEAN = {"DEEPSEEK_API_KEY": "", "OPENAI_API_KEY": "", "OPENAI_BASE_URL": "", "RP_MODEL": "", "RP_DATABASE_URL": "", "RP_WRITER_MODEL": ""}


def invoke(home: Path, *args: str, input: str | None = None):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli, ["--home", str(home), *args], env=CLEAN, input=input, obj=CliState())


def ok_json(home: Path, *args: str) -> dict:  # type: ignore[type-arg]
    result = invoke(home, *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def new_story(home: Path) -> str:
    return ok_json(home, "new", "--sample")["sessionId"]  # type: ignore[no-any-return]


def test_mode_shows_and_switches_with_a_revision_check(tmp_path: Path) -> None:
    sid = new_story(tmp_path)
    shown = ok_json(tmp_path, "mode", sid)
    assert shown["executionMode"] == "chat" and shown["writerRoute"] is None
    switched = ok_json(tmp_path, "mode", sid, "agent")
    assert switched["executionMode"] == "agent" and switched["profileRevision"] == shown["profileRevision"] + 1
    stale = invoke(tmp_path, "mode", sid, "chat", "--expected-revision", str(shown["profileRevision"]), "--json")
    assert stale.exit_code == 1 and json.loads(stale.stdout)["error"]["code"] == "profile.revision_conflict"
    assert invoke(tmp_path, "mode", sid).stdout.strip().endswith(f"agent mode (profile revision {switched['profileRevision']})")
    bad = invoke(tmp_path, "mode", sid, "solo")
    assert bad.exit_code == 2


def test_an_agent_turn_with_the_demo_plans_writes_with_a_brief_polishes_and_commits(tmp_path: Path) -> None:
    sid = new_story(tmp_path)
    ok_json(tmp_path, "mode", sid, "agent")
    summary = ok_json(tmp_path, "say", sid, "我推开铁门，问她灯塔的事。", "--model", "demo")
    assert summary["committed"]
    assert [t["name"] for t in summary["tools"]] == ["rp_run_subagent", "rp_write_turn", "rp_run_subagent", "rp_commit_turn"]
    events = ok_json(tmp_path, "sessions", "events", sid)
    calls = [e["payload"] for e in (events if isinstance(events, list) else events["events"]) if e["type"] == "tool/call"]
    write = next(json.loads(c["arguments"]) for c in reversed(calls) if c["name"] == "rp_write_turn")
    assert write["brief"].startswith("[demo plan]")


def test_subagents_list_add_edit_disable_enable_delete(tmp_path: Path) -> None:
    catalog = ok_json(tmp_path, "subagents", "list")
    assert [i["name"] for i in catalog["items"]] == ["Planning", "Polishing"] and catalog["revision"] == 1
    added = ok_json(
        tmp_path, "subagents", "add", "Critic", "--contract", "Optional; after the Writer.", "--instructions", "Point out flaws.",
        "--tool", "rp_asset_read", "--route", "demo/demo",
    )  # fmt: skip
    critic = added["items"][-1]
    assert critic == {
        "name": "Critic", "usageContract": "Optional; after the Writer.", "instructions": "Point out flaws.", "enabled": True,
        "tools": ["rp_asset_read"], "route": "demo/demo",
    }  # fmt: skip
    duplicate = invoke(tmp_path, "subagents", "add", "critic", "--contract", "x", "--instructions", "y", "--json")
    assert duplicate.exit_code == 1 and json.loads(duplicate.stdout)["error"]["code"] == "subagents.duplicate_name"
    edited = ok_json(tmp_path, "subagents", "edit", "Critic", "--route", "follow", "--rename", "Reviewer", "--tool", "none")
    assert edited["items"][-1]["name"] == "Reviewer" and edited["items"][-1]["route"] is None and edited["items"][-1]["tools"] == []
    assert ok_json(tmp_path, "subagents", "disable", "Polishing")["items"][1]["enabled"] is False
    assert ok_json(tmp_path, "subagents", "enable", "Polishing")["items"][1]["enabled"] is True
    after = ok_json(tmp_path, "subagents", "delete", "Planning")
    assert [i["name"] for i in after["items"]] == ["Polishing", "Reviewer"]
    # The seeds are never re-created once the catalog exists.
    assert [i["name"] for i in ok_json(tmp_path, "subagents", "list")["items"]] == ["Polishing", "Reviewer"]
    missing = invoke(tmp_path, "subagents", "delete", "Nobody", "--json")
    assert missing.exit_code == 1 and json.loads(missing.stdout)["error"]["code"] == "subagents.unknown"
    incomplete = invoke(tmp_path, "subagents", "add", "Lazy", "--json")
    assert incomplete.exit_code == 1 and json.loads(incomplete.stdout)["error"]["code"] == "subagents.incomplete"


def test_the_seeds_follow_the_language_setting(tmp_path: Path) -> None:
    assert invoke(tmp_path, "settings", "set", "language", "zh").exit_code == 0
    catalog = ok_json(tmp_path, "subagents", "list")
    assert [i["name"] for i in catalog["items"]] == ["规划", "润色"]
    assert "rp_write_turn" in catalog["items"][0]["usageContract"]


def test_writer_route_global_and_per_session(tmp_path: Path) -> None:
    sid = new_story(tmp_path)
    glob = ok_json(tmp_path, "writer-route", "demo/demo")
    assert glob["scope"] == "global" and glob["value"] == "demo/demo"
    assert ok_json(tmp_path, "writer-route", "default")["value"] is None
    fixed = ok_json(tmp_path, "writer-route", sid, "deepseek/deepseek-flash/high")
    assert fixed["writerRoute"] == {"provider": "deepseek", "model": "deepseek-flash", "reasoningEffort": "high"}
    follow = ok_json(tmp_path, "writer-route", sid, "follow")
    assert follow["writerRoute"] == {"followConversation": True}
    back = ok_json(tmp_path, "writer-route", sid, "default")
    assert back["writerRoute"] is None
    bad = invoke(tmp_path, "writer-route", sid, "nosuch/model", "--json")
    assert bad.exit_code == 1 and json.loads(bad.stdout)["error"]["code"] == "model.unknown_provider"


def test_prompt_previews_the_agent_parent_with_its_tools(tmp_path: Path) -> None:
    sid = new_story(tmp_path)
    chat = ok_json(tmp_path, "prompt", sid, "--model", "demo")
    assert chat["parent"]["mode"] == "chat" and "## rp_run_subagent" not in chat["parent"]["system"]
    assert "agent mode" in chat["parent"]["system"]  # the Chat parent points asset and state requests there
    ok_json(tmp_path, "mode", sid, "agent")
    agent = ok_json(tmp_path, "prompt", sid, "--model", "demo")
    assert agent["parent"]["mode"] == "agent" and agent["parent"]["runContext"].startswith('<roleplay_request mode="agent">')
    system = agent["parent"]["system"]
    assert [system.index(h) for h in ("# Roleplay", "# Agent workflow", "## rp_write_turn", "## rp_guide", "## rp_run_subagent")] == sorted(
        system.index(h) for h in ("# Roleplay", "# Agent workflow", "## rp_write_turn", "## rp_guide", "## rp_run_subagent")
    )
    assert ok_json(tmp_path, "prompt", sid, "--model", "demo") == agent  # byte-identical previews


def test_long_texts_come_from_files(tmp_path: Path) -> None:
    instructions = tmp_path / "critic.md"
    instructions.write_text("You review drafts.\n\n- Point out contradictions.\n", encoding="utf-8")
    added = ok_json(tmp_path, "subagents", "add", "Critic", "--contract", "Optional.", "--instructions-file", str(instructions))
    assert added["items"][-1]["instructions"] == "You review drafts.\n\n- Point out contradictions.\n"
    result = CliRunner().invoke(
        cli,
        ["--home", str(tmp_path), "subagents", "edit", "Critic", "--contract-file", "-", "--json"],
        env=CLEAN,
        input="After the Writer.",
        obj=CliState(),
    )
    assert result.exit_code == 0 and json.loads(result.stdout)["items"][-1]["usageContract"] == "After the Writer."
    both = invoke(tmp_path, "subagents", "edit", "Critic", "--instructions", "x", "--instructions-file", str(instructions), "--json")
    assert both.exit_code == 1 and json.loads(both.stdout)["error"]["code"] == "subagents.value_source"
