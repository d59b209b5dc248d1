"""Agent mode's workspace tools: off by default, the editor and the shell confined to the story's
workspace (outside paths, symlink escapes, a time limit, an output limit)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tests_support import sample_story

from roleplay.core.execution_mode import set_mode
from roleplay.core.run import play_turn, prepare_run
from roleplay.core.settings import SettingsStore
from roleplay.core.workspace_tools import MAX_OUTPUT, PersistentShell, Workspace, editor_tool, sandbox_command, shell_tool
from roleplay.errors import RpError
from roleplay.harness.models.routes import Route
from roleplay.harness.models.scripted import ScriptedModel
from roleplay.harness.store import EventStore
from roleplay.harness.tools import ToolContext

pytestmark = pytest.mark.anyio
CTX = ToolContext("ses_1", "turn", "step", "call")


async def edit(tool, **args):  # type: ignore[no-untyped-def]
    return await tool.handler(args, CTX)


async def refused(tool, **args) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(RpError) as caught:
        await tool.handler(args, CTX)
    return caught.value.code


async def test_the_editor_works_inside_and_refuses_every_escape(tmp_path: Path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("secret")
    workspace = Workspace(tmp_path / "ws", "ses_1")
    tool = editor_tool(workspace)
    await edit(tool, command="create", path="notes/plan.md", file_text="one\ntwo\nthree")
    assert (tmp_path / "ws" / "ses_1" / "notes" / "plan.md").read_text() == "one\ntwo\nthree"
    assert "     2\ttwo" in (await edit(tool, command="view", path="/workspace/notes/plan.md")).content
    await edit(tool, command="str_replace", path="notes/plan.md", old_str="two", new_str="TWO")
    await edit(tool, command="insert", path="notes/plan.md", insert_line=0, new_str="zero")
    assert (tmp_path / "ws" / "ses_1" / "notes" / "plan.md").read_text() == "zero\none\nTWO\nthree"
    await edit(tool, command="undo_edit", path="notes/plan.md")
    assert (tmp_path / "ws" / "ses_1" / "notes" / "plan.md").read_text() == "one\nTWO\nthree"
    assert await refused(tool, command="str_replace", path="notes/plan.md", old_str="zzz", new_str="x") == "workspace.no_unique_match"
    # Escapes: parent folders, absolute host paths, a symlink out (file and folder), the other story.
    ws = tmp_path / "ws" / "ses_1"
    os.symlink(outside, ws / "link.txt")
    os.symlink(tmp_path, ws / "up")
    (tmp_path / "ws" / "ses_2").mkdir()
    for path in ("../../secret.txt", str(outside), "link.txt", "up/secret.txt", "/workspace/../ses_2/x", "../ses_2/x", "/etc/passwd"):
        assert await refused(tool, command="view", path=path) == "workspace.outside", path
        assert await refused(tool, command="create", path=path, file_text="pwned") == "workspace.outside", path
    assert outside.read_text() == "secret" and not (tmp_path / "ws" / "ses_2" / "x").exists()


needs_sandbox = pytest.mark.skipif(sandbox_command(Path("/tmp")) is None, reason="no Linux namespaces here")


@needs_sandbox
async def test_the_shell_persists_and_cannot_leave_the_workspace(tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("TOP-SECRET-42")
    shell = PersistentShell(Workspace(tmp_path / "ws", "ses_1"))
    tool = shell_tool(shell)
    try:
        out = await edit(tool, command="pwd; echo story > a.txt; mkdir sub; cd sub; X=42")
        assert out.content.startswith("/workspace") and out.meta["exitStatus"] == 0
        assert (await edit(tool, command="pwd; echo $X")).content.split("\n")[:2] == ["/workspace/sub", "42"]  # persistent
        assert (tmp_path / "ws" / "ses_1" / "a.txt").read_text() == "story\n"
        escape = await edit(tool, command=f"cat {tmp_path}/secret.txt; cat /etc/passwd; ls /home; ls /")
        assert "TOP-SECRET-42" not in escape.content and "No such file" in escape.content
        assert set(escape.content.split("[exit")[0].split()) >= {"usr", "workspace"}
        os.symlink(tmp_path / "secret.txt", tmp_path / "ws" / "ses_1" / "link")
        assert "TOP-SECRET-42" not in (await edit(tool, command="cat /workspace/link")).content
        assert (await edit(tool, command="echo x > /usr/x")).meta["exitStatus"] != 0  # read-only system folders
    finally:
        await shell.close()


@needs_sandbox
async def test_the_shell_has_a_time_limit_and_an_output_limit(tmp_path: Path) -> None:
    shell = PersistentShell(Workspace(tmp_path, "ses_1"))
    tool = shell_tool(shell)
    try:
        with pytest.raises(RpError) as slow:
            await tool.handler({"command": "sleep 30", "timeout": 0.5}, CTX)
        assert slow.value.code == "workspace.timeout" and shell.process is None
        out = await edit(tool, command="head -c 100000 /dev/zero | tr '\\0' a; echo")
        assert out.meta["outputCut"] and len(out.content) < MAX_OUTPUT + 200 and "[output cut:" in out.content
        assert (await edit(tool, command="echo still here")).content.startswith("still here")
    finally:
        await shell.close()


async def test_the_tools_are_off_by_default_and_on_with_the_setting(store: EventStore, tmp_path: Path) -> None:
    rt, sid = await sample_story(store)
    route = Route("scripted", "scripted")
    await set_mode(rt, sid, "agent")
    assert (await prepare_run(rt, sid, "x", parent_route=route)).workspace_root is None
    model = ScriptedModel(["好的。"])
    rt.models[route.spec] = model
    await play_turn(rt, sid, "看看。", parent_route=route)
    assert not {"bash", "str_replace_editor"} & {t.name for t in model.requests[0].tools}
    await SettingsStore(store).set("agent.workspaceRoot", str(tmp_path))
    model = ScriptedModel(
        [{"tool_calls": [{"name": "str_replace_editor", "arguments": {"command": "create", "path": "../x", "file_text": "x"}}]}, "好的。"]
    )
    rt.models[route.spec] = model
    result = await play_turn(rt, sid, "记一下。", parent_route=route)
    assert {"bash", "str_replace_editor"} <= {t.name for t in model.requests[0].tools}
    assert result.turn.tool_results[0].error["code"] == "workspace.outside"  # type: ignore[index]
    await rt.aclose()
