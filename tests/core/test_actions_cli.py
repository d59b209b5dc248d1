"""``rp messages|edit|delete|regenerate|swipe|branch|metrics`` and ``rp state show`` with the demo model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from roleplay.cli import cli
from roleplay.cli_context import CliState
from roleplay.testing.fake_openai import serve_fake_openai

CLEAN = {"DEEPSEEK_API_KEY": "", "OPENAI_API_KEY": "", "OPENAI_BASE_URL": "", "RP_MODEL": "", "RP_DATABASE_URL": ""}


def invoke(home: Path, *args: str, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli, ["--home", str(home), *args], env={**CLEAN, **(env or {})}, obj=CliState())


def ok(home: Path, *args: str) -> Any:
    result = invoke(home, *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def story(home: Path) -> str:
    sid: str = ok(home, "new", "--sample", "--model", "demo")["sessionId"]
    for text in ("我推开铁门。", "我帮她擦铜镜。"):
        assert invoke(home, "say", sid, text).exit_code == 0
    return sid


def test_messages_edit_delete(tmp_path: Path) -> None:
    sid = story(tmp_path)
    listed = ok(tmp_path, "messages", sid)["messages"]
    assert [m["speaker"] for m in listed] == ["writing", "user", "writing", "user", "writing"]
    assert [m["number"] for m in listed] == [1, 2, 3, 4, 5]
    assert listed[2]["outcome"] == "committed" and listed[2]["bodyOwner"] == "commit" and listed[2]["turnId"]
    before = ok(tmp_path, "state", "show", sid)
    edited = ok(tmp_path, "edit", sid, "3", "（改写）铁门开了。")
    assert edited["messageId"] == listed[2]["messageId"]
    after = ok(tmp_path, "messages", sid)["messages"]
    assert after[2]["text"] == "（改写）铁门开了。" and after[2]["edited"] and after[2]["messageId"] == listed[2]["messageId"]
    assert ok(tmp_path, "state", "show", sid) == before  # an edit repeats no effect
    plain = invoke(tmp_path, "messages", sid)
    assert "[3] story: （改写）铁门开了。  (edited)" in plain.stdout
    deleted = ok(tmp_path, "delete", sid, listed[3]["messageId"])
    assert deleted["deleted"][0] == listed[3]["messageId"]
    assert len(ok(tmp_path, "messages", sid)["messages"]) == 3
    shown = ok(tmp_path, "state", "show", sid)["namespaces"]["story"]
    assert shown["value"]["林汐"]["信任"] == before["namespaces"]["story"]["value"]["林汐"]["信任"] - 1  # back to after turn 1
    missing = invoke(tmp_path, "delete", sid, "9")
    assert missing.exit_code == 1 and "message.not_found" in missing.stderr


def test_regenerate_swipe_branch_metrics(tmp_path: Path) -> None:
    sid = story(tmp_path)
    first = ok(tmp_path, "state", "show", sid)
    again = ok(tmp_path, "regenerate", sid)
    assert again["committed"] and again["outcome"] == "completed"
    saved = ok(tmp_path, "regenerate", sid, "--save-edit", "我轻轻帮她擦铜镜。")
    assert "我轻轻帮她擦铜镜。" in saved["reply"]
    last = ok(tmp_path, "messages", sid)["messages"][-1]
    assert last["alternatives"] == {"index": 2, "count": 3}
    moved = ok(tmp_path, "swipe", sid, "1")
    assert (moved["index"], moved["count"]) == (0, 3) and "我帮她擦铜镜。" in moved["reply"]["text"]
    assert ok(tmp_path, "state", "show", sid) == first
    listed = invoke(tmp_path, "messages", sid).stdout.splitlines()
    assert listed[-1].startswith("[5] story ‹1/3›: ") and "‹" not in "".join(listed[:-1])  # the swipe counter
    plain = invoke(tmp_path, "swipe", sid, "left")
    assert plain.exit_code == 1 and "message.no_alternative" in plain.stderr
    assert invoke(tmp_path, "swipe", sid, "up").exit_code == 1
    made = ok(tmp_path, "branch", sid, "--at", "3")
    assert made["branch"]["sourceSessionId"] == sid and made["tree"]["sessionId"] == sid
    branch_id = made["branch"]["sessionId"]
    assert len(ok(tmp_path, "messages", branch_id)["messages"]) == 3
    tree = invoke(tmp_path, "branch", sid, "--tree")
    assert tree.exit_code == 0 and branch_id in tree.stdout and "← this story" in tree.stdout
    report = ok(tmp_path, "metrics", sid, "--price", "demo/demo=1,1")
    assert [r["live"] for r in report["replies"]] == [True, True, False, False]  # swiped back to the first reply
    assert report["all"]["replies"] == 4 and report["live"]["cost"] is not None
    assert invoke(tmp_path, "metrics", sid, "--price", "nope").exit_code == 1
    assert "spent in total" in invoke(tmp_path, "metrics", sid).stdout


def test_messages_mark_the_turn_a_run_is_writing(tmp_path: Path) -> None:
    sid = story(tmp_path)
    idle = ok(tmp_path, "messages", sid)
    assert idle["running"] is False and idle["activeTurnId"] is None
    assert all(m["active"] is False for m in idle["messages"] if "turnId" in m)
    with serve_fake_openai(chunk_delay=0.1) as fake:  # a reply that takes seconds to arrive
        env = {**os.environ, **CLEAN, "RP_HOME": str(tmp_path), "OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "x"}
        rp = [sys.executable, "-c", "from roleplay.cli import main; main()"]
        proc = subprocess.Popen([*rp, "say", sid, "我敲了敲铁门。", "--model", "openai/fake"], stdout=subprocess.PIPE, env=env)
        try:
            deadline = time.monotonic() + 60
            # The lease comes before the turn is logged: wait for both.
            while not ((during := ok(tmp_path, "messages", sid))["running"] and during["messages"][-1]["text"] == "我敲了敲铁门。"):
                assert proc.poll() is None and time.monotonic() < deadline, "the run never showed as active"
                time.sleep(0.05)
            mine = during["messages"][-1]
            assert mine["active"] and mine["outcome"] == "open" and mine["turnId"] == during["activeTurnId"]
            assert not any(m.get("active") for m in during["messages"][:-1])
            shown = invoke(tmp_path, "messages", sid).stdout
            assert shown.splitlines()[-1].endswith("(a run is writing this turn now)")
            assert proc.wait(120) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
    after = ok(tmp_path, "messages", sid)
    assert after["running"] is False and not any(m.get("active") for m in after["messages"])
