"""``rp settings get|set|reset`` through click, and the setting reaching ``rp prompt``."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from roleplay.cli import cli
from roleplay.cli_context import CliState
from roleplay.core.settings import DEFS

CLEAN = {"DEEPSEEK_API_KEY": "", "OPENAI_API_KEY": "", "OPENAI_BASE_URL": "", "RP_MODEL": "", "RP_DATABASE_URL": "", "RP_WRITER_MODEL": ""}


def invoke(home: Path, *args: str, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli, ["--home", str(home), *args], env={**CLEAN, **(env or {})}, obj=CliState())


def ok_json(home: Path, *args: str) -> dict:  # type: ignore[type-arg]
    result = invoke(home, *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_get_lists_every_key_with_its_default(tmp_path: Path) -> None:
    listed = ok_json(tmp_path, "settings", "get")["settings"]
    assert [s["key"] for s in listed] == list(DEFS)
    assert all(s["isDefault"] and s["revision"] == 0 and s["value"] == s["default"] for s in listed)
    text = invoke(tmp_path, "settings", "get", "replyOptions.count")
    assert text.exit_code == 0 and text.stdout == "replyOptions.count = 3  (default, revision 0)\n"


def test_set_get_reset_round_trip_with_revisions(tmp_path: Path) -> None:
    first = ok_json(tmp_path, "settings", "set", "writer.defaultRoute", "deepseek-flash")
    assert (first["value"], first["revision"], first["isDefault"]) == ("deepseek/deepseek-flash", 1, False)
    assert ok_json(tmp_path, "settings", "get", "writer.defaultRoute") == first
    windows = ok_json(tmp_path, "settings", "set", "context.windows", '{"openai/gpt-4o": 64000}', "--expected-revision", "0")
    assert windows["value"] == {"openai/gpt-4o": 64000}
    human = invoke(tmp_path, "settings", "set", "quickReplies.items", '[{"label": "问好", "text": "你好。"}]')
    assert human.exit_code == 0 and human.stdout.startswith('quickReplies.items = [{"label": "问好", "text": "你好。"}]  (set, revision 1)')
    reset = ok_json(tmp_path, "settings", "reset", "writer.defaultRoute", "--expected-revision", "1")
    assert (reset["value"], reset["revision"], reset["isDefault"]) == (None, 2, True)


def test_errors_are_stable_codes_with_pointers_and_write_nothing(tmp_path: Path) -> None:
    unknown = invoke(tmp_path, "settings", "set", "writer.model", "demo")
    assert unknown.exit_code == 1 and "error [settings.unknown_key]" in unknown.stderr and "(at /key)" in unknown.stderr
    bad = invoke(tmp_path, "settings", "set", "context.windows", '{"openai/gpt-4o": 5}', "--json")
    assert bad.exit_code == 1
    error = json.loads(bad.stdout)["error"]
    assert error["code"] == "settings.invalid_value" and error["pointer"] == "/value/openai~1gpt-4o"
    not_json = invoke(tmp_path, "settings", "set", "replyOptions.count", "three")
    assert not_json.exit_code == 1 and "error [settings.invalid_json]" in not_json.stderr
    ok_json(tmp_path, "settings", "set", "replyOptions.count", "4")
    stale = invoke(tmp_path, "settings", "set", "replyOptions.count", "5", "--expected-revision", "0", "--json")
    assert stale.exit_code == 1 and json.loads(stale.stdout)["error"]["details"]["currentRevision"] == 1
    assert ok_json(tmp_path, "settings", "get", "replyOptions.count")["value"] == 4
    negative = invoke(tmp_path, "settings", "reset", "replyOptions.count", "--expected-revision", "-1")
    assert negative.exit_code == 2  # a usage error from click, before anything runs


def test_rp_writer_model_is_named_when_it_overrides_the_stored_route(tmp_path: Path) -> None:
    result = invoke(tmp_path, "settings", "set", "writer.defaultRoute", "demo", env={"RP_WRITER_MODEL": "openai/gpt-4o"})
    assert result.exit_code == 0 and "RP_WRITER_MODEL is set" in result.stderr
    quiet = invoke(tmp_path, "settings", "set", "writer.defaultRoute", "demo")
    assert quiet.exit_code == 0 and quiet.stderr == ""


def test_rp_prompt_shows_the_identity_and_writer_route_settings(tmp_path: Path) -> None:
    story = ok_json(tmp_path, "new", "--sample")
    sid = story["sessionId"]
    own = "You are the harbour's chronicler."
    ok_json(tmp_path, "settings", "set", "prompt.identity", own)
    ok_json(tmp_path, "settings", "set", "writer.defaultRoute", "openai/gpt-4o-mini/low")
    view = ok_json(tmp_path, "prompt", sid, "--model", "demo")
    assert view["writer"]["system"].startswith(own) and view["writer"]["route"] == "openai/gpt-4o-mini/low"
    # RP_WRITER_MODEL still overrides the stored default for one process.
    result = invoke(tmp_path, "prompt", sid, "--model", "demo", "--json", env={"RP_WRITER_MODEL": "demo"})
    assert result.exit_code == 0 and json.loads(result.stdout)["writer"]["route"] == "demo/demo"
    ok_json(tmp_path, "settings", "reset", "prompt.identity")
    assert not ok_json(tmp_path, "prompt", sid, "--model", "demo")["writer"]["system"].startswith(own)


def test_set_reads_a_long_value_from_a_file_or_stdin(tmp_path: Path) -> None:
    identity = tmp_path / "identity.txt"
    identity.write_text("You are the chronicler.\nNever speak for the user.\n", encoding="utf-8")
    record = ok_json(tmp_path, "settings", "set", "prompt.identity", "--file", str(identity))
    assert record["value"] == "You are the chronicler.\nNever speak for the user.\n"
    piped = CliRunner().invoke(
        cli,
        ["--home", str(tmp_path), "settings", "set", "replyOptions.keywords", "--file", "-", "--json"],
        env=CLEAN,
        input='["温柔"]',
        obj=CliState(),
    )
    assert piped.exit_code == 0 and json.loads(piped.stdout)["value"] == ["温柔"]
    both = invoke(tmp_path, "settings", "set", "prompt.identity", "x", "--file", str(identity))
    assert both.exit_code == 1 and "error [settings.value_source]" in both.stderr
    neither = invoke(tmp_path, "settings", "set", "prompt.identity")
    assert neither.exit_code == 1 and "error [settings.value_source]" in neither.stderr
    latin = tmp_path / "latin1.txt"
    latin.write_bytes("caf\xe9".encode("latin-1"))
    bad = invoke(tmp_path, "settings", "set", "prompt.identity", "--file", str(latin))
    assert bad.exit_code == 1 and "error [settings.file_not_utf8]" in bad.stderr
    assert ok_json(tmp_path, "settings", "get", "prompt.identity")["revision"] == 1  # the refusals wrote nothing


def test_setting_the_language_switches_the_unedited_defaults_at_once(tmp_path: Path) -> None:
    edited = CliRunner().invoke(
        cli, ["--home", str(tmp_path), "persona", "edit", "--file", "-"], input="name: Alex\n", env=CLEAN, obj=CliState()
    )
    assert edited.exit_code == 0, edited.output
    text = invoke(tmp_path, "settings", "set", "language", "zh")
    assert text.exit_code == 0 and text.stdout.splitlines() == [
        'language = "zh"  (set, revision 1)',
        "  built-in preset: now in Chinese",
        "  built-in writing-style: now in Chinese",
        "  built-in persona: kept as you edited it",
    ]
    # A reset derives the language from the locale (the tests' English) once, and stores it.
    reset = ok_json(tmp_path, "settings", "reset", "language")
    assert (reset["value"], reset["revision"]) == ("en", 3)
    assert [s["action"] for s in reset["seeds"]] == ["upgrade", "upgrade", "keep-edited", "settled"]
    assert reset["seeds"][-1]["reason"] == "language: en (from your system locale; change with rp settings set language zh)"
    bad = invoke(tmp_path, "settings", "set", "language", "fr")
    assert bad.exit_code == 1 and bad.stderr.startswith("error [settings.invalid_value]: language: ")
    assert "seeds" not in ok_json(tmp_path, "settings", "set", "replyOptions.count", "4")


def test_the_first_story_stores_the_locales_language_and_a_later_locale_keeps_it(tmp_path: Path) -> None:
    first = invoke(tmp_path, "new", "--sample", "--model", "demo", env={"LANG": "zh_CN.UTF-8"})
    assert first.exit_code == 0, first.output
    notice = "language: zh (from your system locale; change with rp settings set language en)"
    assert first.stderr.splitlines()[0] == notice
    second = invoke(tmp_path, "new", "--sample", "--model", "demo", env={"LANG": "en_US.UTF-8"})
    assert second.exit_code == 0 and "language:" not in second.stderr  # said once
    assert invoke(tmp_path, "settings", "get", "language").stdout == 'language = "zh"  (set, revision 1)\n'
    personas = ok_json(tmp_path, "assets", "list", "--kind", "persona")
    assert [a["name"] for a in personas] == ["用户"]

    reset = invoke(tmp_path, "settings", "reset", "language", env={"LANG": "en_US.UTF-8"})
    assert reset.exit_code == 0 and reset.stdout.splitlines() == [
        'language = "en"  (set, revision 3)',
        "  built-in preset: now in English",
        "  built-in writing-style: now in English",
        "  built-in persona: now in English",
        "  language: en (from your system locale; change with rp settings set language zh)",
    ]
    again = invoke(tmp_path, "new", "--sample", "--model", "demo", env={"LANG": "zh_CN.UTF-8"})
    assert again.exit_code == 0 and "language:" not in again.stderr
    assert ok_json(tmp_path, "settings", "get", "language")["value"] == "en"
