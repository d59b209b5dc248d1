"""Reply options at the command line: ``rp play`` numbers them after a reply and a typed number
sends that option through the normal send path; ``rp say`` lists them (``--json``: ``choices``)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from roleplay.cli import cli
from roleplay.cli_context import CliState

CLEAN = {"RP_DATABASE_URL": "", "RP_MODEL": "", "RP_WRITER_MODEL": ""}


def invoke(home: Path, *args: str, input: str | None = None):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli, ["--home", str(home), *args], env=CLEAN, input=input, obj=CliState())


def ok_json(home: Path, *args: str) -> dict:  # type: ignore[type-arg]
    result = invoke(home, *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def user_inputs(home: Path, session_id: str) -> list[str]:
    """The player's messages in the log, in order (run-context messages left out)."""
    events = ok_json(home, "sessions", "events", session_id)
    events = events if isinstance(events, list) else events["events"]
    texts = []
    for e in events:
        if e["type"] == "user/message" and not (e["payload"].get("source") or {}):
            texts.append(e["payload"]["content"][0]["text"])
    return texts


def shown_options(stdout: str) -> list[list[str]]:
    """Each block of numbered options ``  [n] text`` printed after a reply."""
    blocks: list[list[str]] = []
    previous = 0
    for line in stdout.splitlines():
        if line.startswith("  [") and "] " in line:
            number, text = line[3:].split("] ", 1)
            if int(number) == 1 or previous == 0:
                blocks.append([])
            blocks[-1].append(text)
            previous = int(number)
        else:
            previous = 0
    return blocks


def test_play_numbers_the_options_and_a_number_sends_one(tmp_path: Path) -> None:
    played = invoke(tmp_path, "play", "--sample", "--model", "demo", input="我走进灯塔。\n2\n9\n/quit\n")
    assert played.exit_code == 0, played.output
    blocks = shown_options(played.stdout)
    assert len(blocks) == 3 and all(len(b) == 3 for b in blocks)
    assert "(type a number to send that reply)" in played.stderr
    sid = played.stderr.split("session ", 1)[1].split()[0]
    # "2" sent the second option as the player's message; "9" is no option, so it is story text.
    assert user_inputs(tmp_path, sid) == ["我走进灯塔。", blocks[0][1], "9"]
    assert f"> {blocks[0][1]}" in played.stdout


def test_undo_withdraws_the_offered_options(tmp_path: Path) -> None:
    played = invoke(tmp_path, "play", "--sample", "--model", "demo", input="我走进灯塔。\n/undo\n1\n/quit\n")
    assert played.exit_code == 0, played.output
    sid = played.stderr.split("session ", 1)[1].split()[0]
    assert user_inputs(tmp_path, sid)[-1] == "1"  # after /undo, "1" is just text


def test_say_lists_the_options_and_json_carries_them(tmp_path: Path) -> None:
    sid = ok_json(tmp_path, "new", "--sample", "--model", "demo")["sessionId"]
    assert invoke(tmp_path, "settings", "set", "replyOptions.count", "2").exit_code == 0
    said = ok_json(tmp_path, "say", sid, "我敲了敲铁门。")
    assert said["committed"] and len(said["choices"]) == 2 and all(isinstance(c, str) and c for c in said["choices"])
    human = invoke(tmp_path, "say", sid, "我等她开口。")
    assert human.exit_code == 0, human.output
    assert human.stderr.count("  [") == 2 and "  [1] " not in human.stdout  # the reply alone on stdout
