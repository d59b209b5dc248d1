"""Reply options at the command line: ``rp play`` numbers them after a reply and a typed number
sends that option through the normal send path; after resume, ``/undo``, ``/delete``, ``/swipe``
and ``/branch`` it shows the options of the reply now last; ``rp say`` lists them (``--json``:
``choices``, and ``commitDiagnostics`` saying why there are none)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from roleplay.cli import cli
from roleplay.cli_context import CliState
from roleplay.reply_options.generator import SYSTEM_MARKER
from roleplay.testing.fake_openai import FakeReply, RecordedRequest, serve_fake_openai

CLEAN = {"RP_DATABASE_URL": "", "RP_MODEL": "", "RP_WRITER_MODEL": ""}


def invoke(home: Path, *args: str, input: str | None = None, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli, ["--home", str(home), *args], env={**CLEAN, **(env or {})}, input=input, obj=CliState())


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


def said_by_me(home: Path, session_id: str) -> list[str]:
    """The player's messages on the conversation now (undone and deleted ones left out)."""
    return [m["text"] for m in ok_json(home, "messages", session_id)["messages"] if m["speaker"] == "user"]


def play(home: Path, lines: str, *args: str) -> tuple[str, list[list[str]]]:
    played = invoke(home, "play", *args, "--model", "demo", input=lines + "/quit\n")
    assert played.exit_code == 0, played.output
    sid = played.stderr.split("session ", 1)[1].split()[0] if "--session" not in args else args[1]
    return sid, shown_options(played.stdout)


def test_undo_and_delete_show_the_options_of_the_reply_now_last(tmp_path: Path) -> None:
    sid, blocks = play(tmp_path, "我走进灯塔。\n我帮她擦铜镜。\n/undo\n2\n", "--sample")
    first, second, after_undo, last = blocks
    assert first != second and after_undo == first  # the first reply's own options, numbered again
    assert said_by_me(tmp_path, sid) == ["我走进灯塔。", first[1]]  # "2" sent the first reply's option 2
    _, blocks = play(tmp_path, "我帮她擦铜镜。\n/delete 4\n3\n", "--session", sid)
    shown_at_start, _, after_delete, _ = blocks
    assert shown_at_start == last  # resuming shows the last reply's options
    assert after_delete == first  # message 4 on deleted: the first reply is the last again
    assert said_by_me(tmp_path, sid) == ["我走进灯塔。", first[2]]


def test_resume_swipe_and_branch_show_the_options_of_the_reply_now_last(tmp_path: Path) -> None:
    sid, blocks = play(tmp_path, "我走进灯塔。\n", "--sample")
    _, blocks = play(tmp_path, "1\n", "--session", sid)
    resumed, after = blocks
    assert said_by_me(tmp_path, sid)[-1] == resumed[0]  # a number typed right after resuming sends that option
    _, blocks = play(tmp_path, "/regen\n/swipe left\n2\n", "--session", sid)
    at_start, regenerated, swiped, _ = blocks
    assert at_start == after and swiped == after  # the alternative swiped back to brings its own options
    assert said_by_me(tmp_path, sid)[-1] == swiped[1]
    played = invoke(tmp_path, "play", "--session", sid, "--model", "demo", input="/branch 3\n3\n/quit\n")
    assert played.exit_code == 0, played.output
    branched = played.stderr.split("now playing branch ", 1)[1].split(";")[0]
    at_start, on_branch, _ = shown_options(played.stdout)
    assert on_branch == resumed and said_by_me(tmp_path, branched)[-1] == resumed[2]


def test_a_reply_without_options_shows_none_and_a_failed_generator_says_why(tmp_path: Path) -> None:
    def answer(record: RecordedRequest) -> FakeReply | None:
        system = json.dumps(record.body.get("messages", [{}])[0], ensure_ascii=False)
        return FakeReply(text="I would say hello.") if SYSTEM_MARKER in system else None

    with serve_fake_openai(responder=answer) as fake:
        env = {"OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "x"}
        sid = json.loads(invoke(tmp_path, "new", "--sample", "--model", "openai/fake", "--json", env=env).stdout)["sessionId"]
        said = json.loads(invoke(tmp_path, "say", sid, "我推开铁门。", "--json", env=env).stdout)
        assert said["committed"] and said["choices"] == []
        [diagnostic] = said["commitDiagnostics"]
        assert diagnostic["code"] == "artifact.failed" and diagnostic["sourceId"] == "rp.reply-options"
        assert diagnostic["details"]["error"]["code"] == "reply_options.invalid"
        played = invoke(tmp_path, "play", "--session", sid, input="1\n/quit\n", env=env)
    assert played.exit_code == 0, played.output
    assert shown_options(played.stdout) == [] and said_by_me(tmp_path, sid)[-1] == "1"  # no options: "1" is text
    demo = ok_json(tmp_path, "say", sid, "我等她开口。", "--model", "demo")
    assert demo["choices"] and demo["commitDiagnostics"] == []
