"""``mvu inspect``: JSON report for a card and lorebook files; unreadable inputs exit 1."""

import json

from click.testing import CliRunner
from compat.mvu_support import EXAMPLE_CARD

from roleplay.compat.mvu.cli import mvu_group


def test_inspect_prints_the_report(tmp_path):
    card = tmp_path / "card.json"
    card.write_text(
        json.dumps(
            {
                "spec": "chara_card_v2",
                "spec_version": "2.0",
                "data": {
                    "name": "Yuki",
                    "first_mes": "hi\n_.set('a', 2);",
                    "character_book": {"entries": [{"id": 1, "keys": [], "comment": "[initvar]", "content": "a: 1", "enabled": False}]},
                },
            }
        ),
        "utf-8",
    )
    book = tmp_path / "book.json"
    book.write_text(json.dumps({"entries": {"0": {"uid": 0, "comment": "[initvar]x", "content": "b: 2", "disable": True}}}), "utf-8")
    result = CliRunner().invoke(mvu_group, ["inspect", str(card), str(book), "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["ok"] and document["namespace"]["initialValue"] == {"a": 1, "b": 2}
    assert document["openings"][0]["namespace"]["initialValue"] == {"a": 2, "b": 2}
    assert document["openings"][0]["openingMessageText"] == "hi"


def test_unreadable_lorebook_exits_1(tmp_path):
    card = tmp_path / "card.json"
    card.write_text(json.dumps({"spec": "chara_card_v2", "spec_version": "2.0", "data": {"name": "Y"}}), "utf-8")
    bad = tmp_path / "bad.json"
    bad.write_text("{nope", "utf-8")
    result = CliRunner().invoke(mvu_group, ["inspect", str(card), str(bad)])
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith(f"error [mvu.cli.lorebook_unreadable]: {bad}: ")
    as_json = CliRunner().invoke(mvu_group, ["inspect", str(card), str(bad), "--json"])
    error = json.loads(as_json.stdout)["error"]
    assert as_json.exit_code == 1 and error["code"] == "mvu.cli.lorebook_unreadable" and error["details"]["source"] == str(bad)


def test_example_card_with_user_name(mvu_corpus):
    result = CliRunner().invoke(mvu_group, ["inspect", str(mvu_corpus / EXAMPLE_CARD), "--user", "青空黎"])
    assert result.exit_code == 0
    document = json.loads(result.output)
    assert document["detected"] and document["namespace"]["status"] == "ok"
    assert "<user>" not in json.dumps(document["namespace"]["initialValue"], ensure_ascii=False)
