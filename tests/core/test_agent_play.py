"""``/mode`` in ``rp play``: the mode shown at start and switched between turns."""

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


def test_play_shows_the_mode_and_switches_it(tmp_path: Path) -> None:
    sid = ok_json(tmp_path, "new", "--sample")["sessionId"]
    played = invoke(tmp_path, "play", "--session", sid, "--model", "demo", input="/mode\n/mode agent\n/mode solo\n我点灯。\n/mode\n/quit\n")
    assert played.exit_code == 0, played.output
    assert "(chat mode: the Writer's text is the reply, as written · /mode switches)" in played.stderr
    assert "(now in agent mode" in played.stderr and "/mode takes chat or agent" in played.stderr
    assert "[demo · offline narration]" in played.stdout
    assert "(agent mode: an orchestrating parent with specialists, asset and State tools; /mode chat switches)" in played.stderr
    assert ok_json(tmp_path, "mode", sid)["executionMode"] == "agent"
