"""The real ``rp play`` at a terminal (a pty driven by pexpect): line editing, history, the play
commands, ``/continue`` and ``/impersonate`` as a player types them (issue 13, "The play loop")."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

pexpect = pytest.importorskip("pexpect")

CLEAN = {"DEEPSEEK_API_KEY": "", "OPENAI_API_KEY": "", "OPENAI_BASE_URL": "", "RP_MODEL": "", "RP_DATABASE_URL": ""}
READY = "\x1b[?2004h"  # prompt_toolkit turns bracketed paste on when the prompt is ready for a line
LEFT, UP, HOME = "\x1b[D", "\x1b[A", "\x01"  # Ctrl-A: the start of the line (emacs keys, the default)


def spawn(home: Path, *args: str):  # type: ignore[no-untyped-def]
    # No cursor-position requests: a pty answers none, and prompt_toolkit would warn and wait.
    env = {**os.environ, **CLEAN, "RP_HOME": str(home), "TERM": "xterm", "PROMPT_TOOLKIT_NO_CPR": "1"}
    child = pexpect.spawn(
        sys.executable, ["-c", "from roleplay.cli import main; main()", *args], env=env, encoding="utf-8", timeout=60, dimensions=(50, 200)
    )
    child.expect_exact(READY)
    return child


def inputs(home: Path, sid: str) -> list[str]:
    """What the player sent, in order, from the log (the turn inputs; a Continue's instruction is none)."""
    from click.testing import CliRunner

    from roleplay.cli import cli
    from roleplay.cli_context import CliState

    out = CliRunner().invoke(cli, ["--home", str(home), "sessions", "events", sid, "--json"], env=CLEAN, obj=CliState())
    events = json.loads(out.stdout)
    turn_inputs = {e["payload"].get("inputMessageId") for e in events if e["type"] == "turn/start"}
    return [
        e["payload"]["content"][0]["text"]
        for e in events
        if e["type"] == "user/message"
        and e["payload"]["messageId"] in turn_inputs
        and "rpContinue" not in (e["payload"].get("source") or {})
    ]


@pytest.mark.slow
def test_play_at_a_terminal_edits_lines_recalls_history_continues_and_impersonates(tmp_path: Path) -> None:
    child = spawn(tmp_path, "play", "--sample", "--model", "demo")
    assert "Stories call you 'User'" in child.before  # first play asks for your name; Enter keeps it
    child.send("\r")
    child.expect_exact(READY)
    sid = child.before.split("session ", 1)[1].split()[0]

    child.send("/undo\r")  # nothing to undo yet: reported, play goes on
    child.expect_exact("error [message.nothing_to_undo]")
    child.expect_exact(READY)
    child.send("/dance\r")
    child.expect_exact("error [cli.play.unknown_command]: unknown command /dance")
    child.expect_exact(READY)
    child.send("/help\r")
    child.expect_exact("/impersonate draft your next message")
    child.expect_exact(READY)

    # Type, move left over "knock", insert a word, Enter: the edited line is what is played.
    child.send("I knock" + LEFT * 5 + "gently \r")
    child.expect_exact("“I gently knock”")
    child.expect_exact(READY)

    child.send("/continue\r")
    child.expect_exact("[demo · continued]")
    child.expect_exact(READY)

    # The draft is offered as the editable next line; nothing is sent until Enter.
    child.send("/impersonate\r")
    child.expect_exact("(your draft is in the line below")
    child.expect_exact("[demo draft]")
    child.send(HOME + "Softly: \r")
    child.expect_exact("“Softly: I ")
    child.expect_exact(READY)

    # Up recalls the line before (the history): sent again as it was.
    child.send(UP + "\r")
    child.expect_exact("“Softly: I ")
    child.expect_exact(READY)
    child.send("/quit\r")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0

    sent = inputs(tmp_path, sid)
    assert sent[0] == "I gently knock" and len(sent) == 3
    assert sent[1].startswith("Softly: I ") and sent[1].endswith("[demo draft]") and sent[2] == sent[1]
    history = (tmp_path / "history" / "play").read_text(encoding="utf-8")
    assert "I gently knock" in history and "/continue" in history  # kept per home for the next session
    assert (tmp_path / "history" / "play").stat().st_mode & 0o077 == 0

    # The next session starts with that history: the line before /quit is two up.
    again = spawn(tmp_path, "play", "--session", sid)
    again.send(UP * 2 + "\r")
    again.expect_exact("“Softly: I ")
    again.expect_exact(READY)
    again.sendcontrol("d")  # Ctrl-D leaves
    again.expect(pexpect.EOF)
    again.close()
    assert again.exitstatus == 0
