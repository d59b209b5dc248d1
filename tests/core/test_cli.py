"""``rp new``, ``rp say``, ``rp play`` and ``rp prompt`` through click, with the demo model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from roleplay.cli import cli
from roleplay.canonical import sha256_hex
from roleplay.cli_context import CliState

CLEAN = {"DEEPSEEK_API_KEY": "", "OPENAI_API_KEY": "", "OPENAI_BASE_URL": "", "RP_MODEL": "", "RP_DATABASE_URL": ""}


def invoke(home: Path, *args: str, input: str | None = None):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli, ["--home", str(home), *args], env=CLEAN, input=input, obj=CliState())


def new_sample(home: Path, *extra: str) -> dict:  # type: ignore[type-arg]
    result = invoke(home, "new", "--sample", "--json", *extra)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_new_say_and_prompt(tmp_path: Path) -> None:
    story = new_sample(tmp_path)
    assert story["title"] == "林汐" and "林汐" in story["opening"] and "{{char}}" not in story["opening"]
    sid = story["sessionId"]
    said = invoke(tmp_path, "say", sid, "我敲了敲铁门。", "--model", "demo")
    assert said.exit_code == 0, said.output
    assert said.stdout.startswith("[demo · offline narration]") and said.stdout.count("[demo") == 1
    summary = json.loads(invoke(tmp_path, "say", sid, "我说明来意。", "--model", "demo", "--json").stdout)
    assert summary["outcome"] == "completed" and summary["committed"] and summary["writer"]["childSessionId"]
    assert [t["name"] for t in summary["tools"]] == ["rp_write_turn", "rp_commit_turn", "rp_commit_turn"]

    first = invoke(tmp_path, "prompt", sid, "--model", "demo")
    second = invoke(tmp_path, "prompt", sid, "--model", "demo")
    assert first.exit_code == 0 and first.stdout == second.stdout  # byte-identical
    assert "===== WRITER PROMPT =====" in first.stdout and "<roleplay_request" in first.stdout
    assert "我说明来意。" in first.stdout  # the conversation so far is in the Writer prompt
    view = json.loads(invoke(tmp_path, "prompt", sid, "--model", "demo", "--json").stdout)
    assert view["writer"]["user"].count("(next input)") == 1 and len(view["epoch"]) == 64


def test_openings(tmp_path: Path) -> None:
    alt = new_sample(tmp_path, "--opening", "1")
    assert alt["opening"].startswith("灯室里")
    skipped = new_sample(tmp_path, "--opening", "skip")
    assert skipped["opening"] is None
    custom = new_sample(tmp_path, "--opening", "custom", "--opening-text", "{{user}}来到雾港。")
    assert custom["opening"] == "User来到雾港。"  # macros expanded with the default persona's name
    bad = invoke(tmp_path, "new", "--sample", "--opening", "7")
    assert bad.exit_code == 1 and "story.opening_out_of_range" in bad.stderr
    missing = invoke(tmp_path, "new")
    assert missing.exit_code == 1 and "cli.card_required" in missing.stderr


def test_new_leaves_kinds_out_with_no(tmp_path: Path) -> None:
    bare = invoke(tmp_path, "new", "--no", "card", "--no", "persona", "--no", "preset", "--no", "styles", "--opening", "skip", "--json")
    assert bare.exit_code == 0, bare.output
    view = json.loads(invoke(tmp_path, "prompt", json.loads(bare.stdout)["sessionId"], "--model", "demo", "--json").stdout)
    sections = view["writer"]["sections"]
    assert "player" in sections and not {"persona", "character"} & set(sections)
    assert not [s for s in sections if s.startswith(("preset-", "style-"))]
    both = invoke(tmp_path, "new", "--sample", "--persona", "ast_x", "--no", "persona")
    assert both.exit_code == 1 and "cli.conflicting_options" in both.stderr


def test_new_sets_participation_and_prompt_shows_it(tmp_path: Path) -> None:
    default = new_sample(tmp_path)
    assert default["participation"] == "adaptive"  # nothing to configure up front
    story = new_sample(tmp_path, "--participation", "director")
    view = json.loads(invoke(tmp_path, "prompt", story["sessionId"], "--model", "demo", "--json").stdout)
    assert view["participation"] == "director"
    assert "Player boundary: participation is director." in view["writer"]["user"]
    assert "Player boundary: participation is director." in view["parent"]["runContext"]
    text = invoke(tmp_path, "prompt", default["sessionId"], "--model", "demo").stdout
    assert "Player boundary: participation is adaptive." in text
    bad = invoke(tmp_path, "new", "--sample", "--participation", "narrator")
    assert bad.exit_code == 2 and "narrator" in bad.output
    played = invoke(tmp_path, "play", "--sample", "--participation", "actor", "--model", "demo", input="/quit\n")
    assert played.exit_code == 0, played.output
    sid = played.stderr.split("session ", 1)[1].split()[0]
    assert json.loads(invoke(tmp_path, "prompt", sid, "--model", "demo", "--json").stdout)["participation"] == "actor"


def test_play_repl_with_state_and_undo(tmp_path: Path) -> None:
    result = invoke(tmp_path, "play", "--sample", "--model", "demo", input="我走进灯塔。\n/state\n/undo\n/state\n/quit\n")
    assert result.exit_code == 0, result.output
    states = [json.loads(block) for block in _json_blocks(result.stdout)]
    assert states[0]["values"]["story"]["林汐"]["信任"] == 21
    assert states[1]["values"]["story"]["林汐"]["信任"] == 20  # /undo retracted the commit
    assert "(undone:" in result.stderr


def _json_blocks(text: str) -> list[str]:
    blocks, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                blocks.append(text[start : i + 1])
    return blocks


RP = [sys.executable, "-c", "from roleplay.cli import main; main()"]
HOSTILE = "\x1b]0;owned\x07\x1b[2J\u202eevil\x9b31m"


def rp(home: Path, *args: str, stdin: bytes = b"", env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    full = {**os.environ, **CLEAN, "RP_HOME": str(home), **(env or {})}
    return subprocess.run([*RP, *args], input=stdin, capture_output=True, env=full, timeout=120)


# A strict stdin (a UTF-8 locale) raises on bad bytes; a C/POSIX locale smuggles them in as lone surrogates.
@pytest.mark.parametrize("stdin_encoding", ["utf-8:strict", "utf-8:surrogateescape"])
def test_play_refuses_an_input_line_that_is_not_utf8_and_plays_on(tmp_path: Path, stdin_encoding: str) -> None:
    lines = b"\xff\n" + b"caf\xe9\n" + b"\xed\xa0\x80\n" + "我走进灯塔。\n/quit\n".encode()
    proc = rp(tmp_path, "play", "--sample", "--model", "demo", stdin=lines, env={"PYTHONIOENCODING": stdin_encoding})
    err = proc.stderr.decode()
    assert proc.returncode == 0 and "Traceback" not in err, err
    assert err.count("error [cli.input.invalid_utf8]") == 3
    assert proc.stdout.decode().count("[demo · offline narration]") == 1  # only the good line was played


def test_story_output_shows_terminal_escapes_from_cards_and_replies_inert(tmp_path: Path) -> None:
    # Card prose may hold bidi controls (import refuses C0/C1 there); titles, the player's input and
    # everything a model streams may hold anything.
    card = {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {"name": "Mallory", "description": "A lighthouse keeper.", "first_mes": "灯塔 👩\u200d💻 \u202eevil\nsecond line"},
    }
    path = tmp_path / "card.json"
    path.write_text(json.dumps(card))
    imported = invoke(tmp_path, "import", str(path), "--json")
    assert imported.exit_code == 0, imported.output
    card_id = json.loads(imported.stdout)[0]["assetId"]

    def assert_inert(text: str, shown: str = "\\x1b]0;owned\\x07\\x1b[2J\\u202eevil\\x9b31m") -> None:
        assert not any(c in text for c in "\x1b\x07\x9b\u202e"), text
        assert shown in text, text

    new = rp(tmp_path, "new", "--card", card_id, "--title", f"T {HOSTILE}")
    out, err = new.stdout.decode(), new.stderr.decode()
    assert new.returncode == 0, err
    assert_inert(out, "灯塔 👩\u200d💻 \\u202eevil\nsecond line")  # CJK, ZWJ emoji and newlines unchanged
    assert_inert(err)
    sid = err.split("session ", 1)[1].split()[0]

    said = rp(tmp_path, "say", sid, f"hello {HOSTILE}", "--model", "demo")  # the demo quotes the input back
    assert said.returncode == 0, said.stderr.decode()
    assert_inert(said.stdout.decode())
    prompt = rp(tmp_path, "prompt", sid, "--model", "demo")
    assert_inert(prompt.stdout.decode())
    played = rp(tmp_path, "play", "--card", card_id, "--model", "demo", stdin=f"hi {HOSTILE}\n/quit\n".encode())
    assert played.returncode == 0, played.stderr.decode()
    assert_inert(played.stdout.decode())


# -- routes kept on the session (issue 13 item 3) ------------------------------------------------


def test_new_with_model_keeps_the_route_and_later_commands_use_it(tmp_path: Path) -> None:
    story = new_sample(tmp_path, "--model", "demo")
    sid = story["sessionId"]
    assert story["route"].startswith("demo/")
    said = invoke(tmp_path, "say", sid, "我敲了敲铁门。")  # no --model, no key, no RP_MODEL
    assert said.exit_code == 0, said.output
    assert said.stdout.startswith("[demo · offline narration]")
    view = json.loads(invoke(tmp_path, "prompt", sid, "--json").stdout)
    assert view["parent"]["route"] == story["route"] and view["writer"]["route"] == story["route"]
    played = invoke(tmp_path, "play", "--session", sid, input="我说明来意。\n/quit\n")
    assert played.exit_code == 0, played.output
    assert "[demo · offline narration]" in played.stdout


def test_an_explicit_model_overrides_the_stored_route_for_that_command_only(tmp_path: Path) -> None:
    sid = new_sample(tmp_path, "--model", "demo")["sessionId"]
    view = json.loads(invoke(tmp_path, "prompt", sid, "--model", "deepseek/deepseek-flash", "--json").stdout)
    assert view["parent"]["route"] == "deepseek/deepseek-flash"
    again = json.loads(invoke(tmp_path, "prompt", sid, "--json").stdout)
    assert again["parent"]["route"].startswith("demo/")


def test_a_session_without_its_own_route_follows_the_environment(tmp_path: Path) -> None:
    sid = new_sample(tmp_path)["sessionId"]
    refused = invoke(tmp_path, "say", sid, "你好")
    assert refused.exit_code == 1 and "model.not_configured" in refused.stderr
    result = CliRunner().invoke(cli, ["--home", str(tmp_path), "say", sid, "你好"], env={**CLEAN, "RP_MODEL": "demo"}, obj=CliState())
    assert result.exit_code == 0 and result.stdout.startswith("[demo · offline narration]")


def test_a_bad_route_on_new_creates_no_session(tmp_path: Path) -> None:
    bad = invoke(tmp_path, "new", "--sample", "--model", "nosuch/model")
    assert bad.exit_code == 1 and "model.unknown_provider" in bad.stderr
    listed = json.loads(invoke(tmp_path, "sessions", "list", "--all", "--json").stdout)
    assert listed == []


def test_the_stored_route_carries_no_credentials(tmp_path: Path) -> None:
    env = {**CLEAN, "OPENAI_API_KEY": "sk-secret-key", "OPENAI_BASE_URL": "http://user:hunter2@llm.example/v1?token=abc"}
    made = CliRunner().invoke(
        cli, ["--home", str(tmp_path), "new", "--sample", "--model", "openai/some-model", "--json"], env=env, obj=CliState()
    )
    assert made.exit_code == 0, made.output
    sid = json.loads(made.stdout)["sessionId"]
    events = invoke(tmp_path, "sessions", "events", sid, "--json").stdout
    assert "hunter2" not in events and "sk-secret" not in events and "token=abc" not in events
    runs = [e for e in json.loads(events) if e["type"] == "command/done"]
    assert runs[0]["payload"]["result"]["profile"]["runtime"]["route"] == {"provider": "openai", "model": "some-model"}


# -- rp play rough edges (issue 13 item 8) ------------------------------------------------------


def test_play_help_lists_every_command_and_refuses_unknown_ones_and_an_empty_undo(tmp_path: Path) -> None:
    from roleplay.core.cli import PLAY_COMMANDS

    lines = "/help\n/undo\n/dance wildly\n//slash text\n/quit\n"
    proc = rp(tmp_path, "play", "--sample", "--model", "demo", stdin=lines.encode())
    err = proc.stderr.decode()
    assert proc.returncode == 0 and "Traceback" not in err, err
    for name in PLAY_COMMANDS:
        assert f"\n{name} " in err
    assert "error [message.nothing_to_undo]" in err  # reported; play went on to the next lines
    assert "error [cli.play.unknown_command]: unknown command /dance" in err
    out = proc.stdout.decode()
    assert out.count("[demo · offline narration]") == 1  # only "//slash text" was played
    assert "dance" not in out


def test_play_counts_an_undo_in_messages_the_player_saw(tmp_path: Path) -> None:
    result = invoke(tmp_path, "play", "--sample", "--model", "demo", input="我走进灯塔。\n/undo\n/quit\n")
    assert result.exit_code == 0, result.output
    assert "(undone: your last turn, 1 message of yours and 1 reply)" in result.stderr


def test_resuming_a_session_recaps_the_last_exchange(tmp_path: Path) -> None:
    sid = new_sample(tmp_path, "--model", "demo")["sessionId"]
    said = invoke(tmp_path, "say", sid, "我敲了敲铁门。")
    reply = said.stdout.strip()
    resumed = invoke(tmp_path, "play", "--session", sid, input="/quit\n")
    assert resumed.exit_code == 0, resumed.output
    assert "(where you left off)" in resumed.stderr
    assert "> 我敲了敲铁门。" in resumed.stdout and reply.splitlines()[-1] in resumed.stdout
    fresh = new_sample(tmp_path, "--model", "demo")
    opened = invoke(tmp_path, "play", "--session", fresh["sessionId"], input="/quit\n")
    assert fresh["opening"].splitlines()[0] in opened.stdout  # never spoke: the opening is the recap


def test_prompt_shows_the_history_cut_in_a_small_window_and_the_next_turn_builds_the_same(tmp_path: Path) -> None:
    assert invoke(tmp_path, "settings", "set", "language", "zh").exit_code == 0  # the window is sized for these defaults
    sid = new_sample(tmp_path)["sessionId"]
    turns = ["我敲了敲铁门。", "我说明来意，想借宿一晚。", "我问她灯塔里还有谁。", "我帮她修理灯罩。", "夜深了，我们坐在楼梯上聊天。"]
    for text in turns:
        assert invoke(tmp_path, "say", sid, text, "--model", "demo").exit_code == 0
    whole = json.loads(invoke(tmp_path, "prompt", sid, "--model", "demo", "--json").stdout)
    assert whole["window"] is None  # the demo lists no window: nothing is left out
    assert all(text in whole["writer"]["user"] for text in turns)
    assert invoke(tmp_path, "settings", "set", "context.windows", '{"demo/demo": 5000}').exit_code == 0

    view = json.loads(invoke(tmp_path, "prompt", sid, "--model", "demo", "--text", "我继续。", "--json").stdout)
    window = view["window"]
    assert window["window"] == 5000 and 0 < window["omitted"] < window["messages"]
    assert window["promptTokens"] <= window["budget"] == 5000 - window["replyReserve"] - window["fixedTokens"]
    prompt = view["writer"]["user"]
    assert turns[0] not in prompt and turns[-1] in prompt  # the oldest went first, the newest stayed
    [note] = [d for d in view["diagnostics"] if d["code"] == "context.history_trimmed"]
    assert note["details"]["omitted"] == window["omitted"]

    text = invoke(tmp_path, "prompt", sid, "--model", "demo", "--text", "我继续。")
    assert "===== WRITER WINDOW =====" in text.stdout
    assert (
        f"{window['messages'] - window['omitted']} of {window['messages']} messages kept, {window['omitted']} oldest left out"
        in text.stdout
    )
    assert "[context.history_trimmed]" in text.stderr

    # The turn that follows the preview sends exactly the previewed Writer prompt.
    said = json.loads(invoke(tmp_path, "say", sid, "我继续。", "--model", "demo", "--json").stdout)
    assert said["committed"] and said["writer"]["promptHash"] == sha256_hex(prompt)


def test_play_at_a_real_terminal_prompts_and_survives_its_mistakes(tmp_path: Path) -> None:
    pty = pytest.importorskip("pty")
    import select

    master, slave = pty.openpty()
    env = {**os.environ, **CLEAN, "RP_HOME": str(tmp_path)}
    proc = subprocess.Popen([*RP, "play", "--sample", "--model", "demo"], stdin=slave, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    os.write(master, "\n/undo\n/nope\n/help\n/quit\n".encode())  # Enter first: keep the offered name
    out = b""
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        if not ready:
            proc.kill()
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    assert proc.wait(timeout=60) == 0
    os.close(master)
    text = out.decode("utf-8", "replace")
    assert "> " in text and "error [message.nothing_to_undo]" in text and "error [cli.play.unknown_command]" in text
    assert "/state     show the story state" in text and "Traceback" not in text


# -- quick replies in rp play (issue 11 item 6) ---------------------------------------------------


def user_turns(home: Path, sid: str) -> list[str]:
    """The player's input of every turn in the log (the opening has none)."""
    events = json.loads(invoke(home, "sessions", "events", sid, "--json").stdout)
    inputs = {e["payload"].get("inputMessageId") for e in events if e["type"] == "turn/start"}
    return [e["payload"]["content"][0]["text"] for e in events if e["type"] == "user/message" and e["payload"]["messageId"] in inputs]


def test_qr_puts_a_quick_reply_in_the_draft_and_only_send_plays_it(tmp_path: Path) -> None:
    assert invoke(tmp_path, "quick-replies", "add", "问好", "你好，我是新来的守灯人。").exit_code == 0
    sid = new_sample(tmp_path, "--model", "demo")["sessionId"]
    inserted = rp(tmp_path, "play", "--session", sid, stdin="/qr 问好\n/draft\n/qr 没有\n/quit\n".encode())
    err = inserted.stderr.decode()
    assert inserted.returncode == 0 and "Traceback" not in err, err
    assert "draft: 你好，我是新来的守灯人。|" in err and "error [quick_replies.not_found]" in err
    assert "[demo" not in inserted.stdout.decode() and user_turns(tmp_path, sid) == []  # nothing was sent

    assert invoke(tmp_path, "settings", "set", "quickReplies.cursor", "start").exit_code == 0
    sent = rp(tmp_path, "play", "--session", sid, stdin="/send\n/qr 问好\n我推开门。\n/send\n/help\n/quit\n".encode())
    err = sent.stderr.decode()
    assert sent.returncode == 0 and "error [cli.play.empty_draft]" in err and "draft: 我推开门。|你好" in err
    assert "/qr        put a quick reply" in err
    assert sent.stdout.decode().count("[demo · offline narration]") == 1
    assert user_turns(tmp_path, sid) == ["我推开门。你好，我是新来的守灯人。"]


def test_say_prints_the_writers_first_words_before_the_writer_finishes(tmp_path: Path) -> None:
    from roleplay.testing.fake_openai import serve_fake_openai

    sid = new_sample(tmp_path)["sessionId"]
    # Every streamed frame takes 50 ms: the Writer's reply takes well over a second to arrive.
    with serve_fake_openai(flavor="deepseek", chunk_delay=0.05) as fake:
        env = {**os.environ, **CLEAN, "RP_HOME": str(tmp_path), "DEEPSEEK_API_KEY": "sk-test", "DEEPSEEK_BASE_URL": fake.root_url}
        proc = subprocess.Popen(
            [*RP, "say", sid, "我敲了敲铁门。", "--model", "deepseek/deepseek-flash"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        try:
            assert proc.stdout is not None
            first = os.read(proc.stdout.fileno(), 64)
            # The parent's Writer call and the Writer itself have been asked; the parent's commit
            # (made only once the Writer has finished) has not.
            asked = len(fake.chat_requests)
            rest, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert first and asked == 2, (first, asked)
    assert proc.returncode == 0, err.decode()
    out = (first + rest).decode()
    assert out.startswith("[fake server: not a real model]") and out.count("[fake server") == 1  # delivered once
    assert out.endswith("\n") and "writing…" not in out  # the indicator is on stderr only
    lines = err.decode().splitlines()
    # The timing closes the reply; reply options ("  [n] …") may follow it.
    timing = lines.index("writing…") + 1
    assert lines[timing].startswith("(first text after ") and lines[timing].endswith(" s)")
    assert all(line.startswith("  [") for line in lines[timing + 1 :])


# -- a card's Character's Note (issue 13 item 6) --------------------------------------------------


def test_prompt_shows_the_cards_depth_prompt_at_its_depth(tmp_path: Path) -> None:
    note = {"prompt": "{{char}} hums when nervous.", "depth": 2, "role": "system"}
    card = {"name": "Mira", "description": "A ferrywoman.", "first_mes": "The ferry waits.", "extensions": {"depth_prompt": note}}
    path = tmp_path / "mira.json"
    path.write_text(json.dumps({"spec": "chara_card_v2", "spec_version": "2.0", "data": card}))
    card_id = json.loads(invoke(tmp_path, "import", str(path), "--json").stdout)[0]["assetId"]
    sid = json.loads(invoke(tmp_path, "new", "--card", card_id, "--json").stdout)["sessionId"]
    for text in ("Hello.", "Where to?"):
        assert invoke(tmp_path, "say", sid, text, "--model", "demo").exit_code == 0
    shown = invoke(tmp_path, "prompt", sid, "--model", "demo").stdout
    conversation = shown.split('<section name="Conversation">', 1)[1].split("</section>", 1)[0]
    labels = [line for line in conversation.splitlines() if line.startswith("[") and line.endswith("]")]
    # opening, Hello., reply, Where to?, reply: two messages back from the newest
    assert labels == ["[Writing reply]", "[User]", "[Writing reply]", "[Character's note]", "[User]", "[Writing reply]"]
    assert "[Character's note]\nMira hums when nervous." in conversation  # macros expanded
    assert shown.count("hums when nervous") == 1


# -- start-up cost (issue 13 item 8) -------------------------------------------------------------


def test_playing_with_the_demo_model_never_imports_the_openai_sdk(tmp_path: Path) -> None:
    """The SDK costs about a second to import; only a real provider's route loads it."""
    sid = new_sample(tmp_path, "--model", "demo")["sessionId"]
    for args, stdin in ((("say", sid, "我敲门。"), b""), (("play", "--session", sid), "我走进去。\n/quit\n".encode())):
        full = {**os.environ, **CLEAN, "RP_HOME": str(tmp_path)}
        proc = subprocess.run([sys.executable, "-X", "importtime", *RP[1:], *args], input=stdin, capture_output=True, env=full, timeout=120)
        err = proc.stderr.decode()
        assert proc.returncode == 0 and "[demo · offline narration]" in proc.stdout.decode(), err[-2000:]
        modules = {line.rsplit("|", 1)[1].strip() for line in err.splitlines() if line.startswith("import time:")}
        assert "roleplay.core.run" in modules  # the trace recorded the turn's imports
        assert not {m for m in modules if m == "openai" or m.startswith("openai.")}


def test_play_json_gives_one_json_event_per_line_and_people_notes_on_stderr(tmp_path: Path) -> None:
    script = "我走进灯塔。\n/bogus\n/undo\n/undo\n/quit\n".encode()
    proc = rp(tmp_path, "play", "--sample", "--model", "demo", "--json", stdin=script)
    assert proc.returncode == 0, proc.stderr.decode()
    events = [json.loads(line) for line in proc.stdout.decode().splitlines()]  # every stdout line is JSON
    kinds = [e["type"] for e in events]
    assert kinds == ["session", "opening", "turn", "error", "error"], events
    session, opening, turn = events[0], events[1], events[2]
    assert session["new"] is True and opening["text"]
    assert turn["committed"] is True and turn["reply"] and turn["sessionId"] == session["sessionId"]
    assert isinstance(turn["choices"], list)
    assert events[3]["error"]["code"] != events[4]["error"]["code"]  # the unknown command, then nothing to undo
    assert "(undone:" in proc.stderr.decode()  # what a person reads stays off the JSON stream

    resumed = rp(tmp_path, "play", "--session", session["sessionId"], "--json", stdin=b"/quit\n")
    again = [json.loads(line) for line in resumed.stdout.decode().splitlines()]
    assert [e["type"] for e in again] == ["session", "recap"]
    assert again[1]["messages"][-1]["text"] == opening["text"]  # the undo left the opening last
