"""``rp quick-replies list|add|edit|delete`` through click: the round trip, ``--json`` on every
subcommand, stable error codes and the revision check."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from roleplay.cli import cli
from roleplay.cli_context import CliState

CLEAN = {"RP_DATABASE_URL": ""}


def invoke(home: Path, *args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli, ["--home", str(home), "quick-replies", *args], env=CLEAN, obj=CliState())


def ok_json(home: Path, *args: str) -> dict:  # type: ignore[type-arg]
    result = invoke(home, *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def error_of(home: Path, *args: str) -> dict:  # type: ignore[type-arg]
    result = invoke(home, *args, "--json")
    assert result.exit_code == 1, result.output
    return json.loads(result.stdout)["error"]  # type: ignore[no-any-return]


def test_add_list_edit_delete_round_trip(tmp_path: Path) -> None:
    assert ok_json(tmp_path, "list") == {"items": [], "revision": 0, "cursor": "end"}
    added = ok_json(tmp_path, "add", "问好", "你好，我是新来的。")
    assert added == {"items": [{"label": "问好", "text": "你好，我是新来的。"}], "revision": 1, "cursor": "end"}
    ok_json(tmp_path, "add", "告别", "再见。", "--expected-revision", "1")
    edited = ok_json(tmp_path, "edit", "告别", "--label", "道别", "--text", "明天见。", "--expected-revision", "2")
    assert edited["items"][1] == {"label": "道别", "text": "明天见。"} and edited["revision"] == 3
    deleted = ok_json(tmp_path, "delete", "问好", "--expected-revision", "3")
    assert deleted["items"] == [{"label": "道别", "text": "明天见。"}] and deleted["revision"] == 4
    assert ok_json(tmp_path, "list") == deleted
    human = invoke(tmp_path, "list")
    assert human.exit_code == 0 and human.stdout == '道别  "明天见。"\n'
    assert "(1 quick replies, revision 4, cursor end)" in human.stderr


def test_duplicates_unknown_labels_and_stale_revisions_are_refused(tmp_path: Path) -> None:
    ok_json(tmp_path, "add", "问好", "你好。")
    dup = error_of(tmp_path, "add", "问好", "又一个")
    assert dup["code"] == "quick_replies.duplicate_label" and dup["pointer"] == "/label"
    assert error_of(tmp_path, "edit", "没有", "--text", "x")["code"] == "quick_replies.not_found"
    assert error_of(tmp_path, "delete", "没有")["code"] == "quick_replies.not_found"
    stale = error_of(tmp_path, "delete", "问好", "--expected-revision", "0")
    assert stale["code"] == "quick_replies.conflict" and stale["details"]["currentRevision"] == 1
    assert error_of(tmp_path, "add", "空", " ")["code"] == "quick_replies.invalid"
    text = invoke(tmp_path, "delete", "没有")
    assert text.exit_code == 1 and "error [quick_replies.not_found]" in text.stderr
    assert ok_json(tmp_path, "list")["items"] == [{"label": "问好", "text": "你好。"}]  # nothing was written
