"""``rp import``, ``rp assets list|show|delete`` and ``rp export card`` through click, on both
backends, through the real ``rp`` group."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import pytest
from click.testing import CliRunner

from roleplay.assets.cards import import_card_bytes
from roleplay.cli import cli as rp
from roleplay.cli_context import CliState
from tests_support import fresh_pg_schema


@pytest.fixture(params=["sqlite", "postgres"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, str]]:
    if request.param == "sqlite":  # the default database under --home / RP_HOME
        yield {"RP_HOME": str(tmp_path / "home"), "RP_DATABASE_URL": ""}
        return
    with fresh_pg_schema() as url:
        yield {"RP_DATABASE_URL": url, "RP_HOME": str(tmp_path / "home")}


def invoke(env: dict[str, str | None], *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(rp, list(args), env=env, obj=CliState())
    return result.exit_code, result.stdout, result.stderr


def card_file(tmp_path: Path, name: str = "alice.json") -> Path:
    data = {
        "name": "Alice",
        "first_mes": "Hi.",
        "system_prompt": "Obey.",
        "character_book": {
            "name": "Alice lore",
            "entries": [{"id": 1, "keys": ["sword"], "content": "A sword.", "enabled": True, "insertion_order": 1, "extensions": {}}],
        },
    }
    path = tmp_path / name
    path.write_text(json.dumps({"spec": "chara_card_v2", "spec_version": "2.0", "data": data}))
    return path


def test_import_json_reports_ids_and_warnings(env: dict[str, str], tmp_path: Path) -> None:
    path = card_file(tmp_path)
    code, out, _ = invoke(env, "import", str(path), "--json")
    assert code == 0
    [result] = json.loads(out)
    assert (result["kind"], result["duplicate"]) == ("card", False)
    assert [a["kind"] for a in result["assets"]] == ["card", "lorebook"]
    assert isinstance(result["warnings"], list)
    code, out, _ = invoke(env, "import", str(path), "--json")
    assert json.loads(out)[0]["duplicate"] is True and json.loads(out)[0]["assetId"] == result["assetId"]


def test_import_failure_exits_1_but_imports_the_other_files(env: dict[str, str], tmp_path: Path) -> None:
    bad = tmp_path / "notes.txt"
    bad.write_text("hello")
    code, out, _ = invoke(env, "import", str(bad), str(card_file(tmp_path)), "--json")
    assert code == 1
    bad_result, good = json.loads(out)
    assert bad_result["error"]["code"] == "asset.import.unsupported"
    assert good["kind"] == "card"
    code, out, err = invoke(env, "import", str(bad))
    assert code == 1 and "error [asset.import.unsupported]" in err


def test_list_show_delete(env: dict[str, str], tmp_path: Path) -> None:
    code, out, _ = invoke(env, "import", str(card_file(tmp_path)), "--json")
    card_id = json.loads(out)[0]["assetId"]
    code, out, _ = invoke(env, "assets", "list", "--json")
    rows = json.loads(out)
    assert code == 0
    kinds = sorted(r["kind"] for r in rows)
    assert kinds == ["card", "lorebook", "persona", "preset", "writing-style"]  # seeds appear on first open
    assert {r["kind"] for r in rows if r["default"]} == {"persona", "preset", "writing-style"}
    code, out, _ = invoke(env, "assets", "list", "--kind", "card")
    assert code == 0 and "Alice" in out and "rev 1" in out
    code, out, _ = invoke(env, "assets", "show", card_id, "--json")
    shown = json.loads(out)
    assert shown["data"]["name"] == "Alice" and len(shown["linkedLorebooks"]) == 1
    assert {b["role"] for b in shown["blobs"]} == {"isolated-prompts", "source"}
    code, _, err = invoke(env, "assets", "delete", card_id, "--revision", "9")
    assert code == 1 and "asset.revision_conflict" in err
    code, out, _ = invoke(env, "assets", "delete", card_id, "--json")
    assert [d["kind"] for d in json.loads(out)["deleted"]] == ["card", "lorebook"]
    code, out, _ = invoke(env, "assets", "show", card_id, "--json")
    assert code == 1 and json.loads(out)["error"]["code"] == "asset.not_found"


def test_export_card_writes_a_png(env: dict[str, str], tmp_path: Path) -> None:
    _, out, _ = invoke(env, "import", str(card_file(tmp_path)), "--json")
    card_id = json.loads(out)[0]["assetId"]
    target = tmp_path / "out.png"
    code, out, _ = invoke(env, "export", "card", card_id, "-o", str(target))
    assert code == 0 and "wrote" in out
    back = import_card_bytes(target.read_bytes())
    assert back.card.name == "Alice"
    assert back.lorebook is not None and back.lorebook["entries"][0]["content"] == "A sword."
    assert back.isolated_prompts.is_empty
    code, _, err = invoke(env, "export", "card", "ast_missing", "-o", str(target))
    assert code == 1 and "asset.not_found" in err


def test_home_option_on_the_command(tmp_path: Path) -> None:
    home = tmp_path / "elsewhere"
    clean = {"RP_HOME": None, "RP_DATABASE_URL": None}  # only --home decides
    code, out, _ = invoke(clean, "assets", "list", "--home", str(home), "--json")  # type: ignore[arg-type]
    assert code == 0 and len(json.loads(out)) == 3
    assert any(home.rglob("*.db"))


def test_trust_isolated_prompts(env: dict[str, str], tmp_path: Path) -> None:
    code, out, _ = invoke(env, "import", str(card_file(tmp_path)), "--json")
    card_id = json.loads(out)[0]["assetId"]
    code, out, _ = invoke(env, "assets", "trust", card_id, "--json")
    assert code == 0 and json.loads(out) == {"cardId": card_id, "trusted": True}
    code, out, _ = invoke(env, "assets", "trust", card_id, "--revoke")
    assert code == 0 and out.startswith("untrusted")
    book = tmp_path / "plain.json"
    book.write_text(json.dumps({"name": "Bob", "first_mes": "Hey."}))
    code, out, _ = invoke(env, "import", str(book), "--json")
    code, out, err = invoke(env, "assets", "trust", json.loads(out)[0]["assetId"])
    assert code == 1 and "asset.no_isolated_prompts" in err


def test_import_output_shows_hostile_file_names_inert(env: dict[str, str], tmp_path: Path) -> None:
    # A card without a name is named after its file; the file name here carries ESC/OSC and BEL.
    path = tmp_path / "evil\x1b]0;owned\x07\u202e.json"
    path.write_text(json.dumps({"spec": "chara_card_v2", "spec_version": "2.0", "data": {"name": "", "first_mes": "Hi."}}))
    code, out, err = invoke(env, "import", str(path))
    assert code == 0, err
    assert "\x1b" not in out + err and "\x07" not in out + err and "\u202e" not in out + err
    assert "\\x1b]0;owned\\x07\\u202e.json: imported card" in out
    code, out, _ = invoke(env, "assets", "list", "--kind", "card", "--json")
    assert json.loads(out)[0]["name"] == "evil ]0;owned"  # the derived name is a clean label


def test_import_of_a_non_utf8_file_name_does_not_crash(env: dict[str, str], tmp_path: Path) -> None:
    path = tmp_path / "caf\udce9.json"  # the bytes b"caf\xe9.json" on disk
    path.write_text(json.dumps({"spec": "chara_card_v2", "spec_version": "2.0", "data": {"name": "", "first_mes": "Hi."}}))
    code, out, err = invoke(env, "import", str(path), "--json")
    assert code == 0, err
    [result] = json.loads(out)
    assert result["file"].endswith("caf\ufffd.json") and result["assets"][0]["name"] == "caf\ufffd"


def test_import_errors_name_the_cause_on_the_command_line(env: dict[str, str], tmp_path: Path) -> None:
    empty = tmp_path / "empty.json"
    empty.write_bytes(b"")
    cut = tmp_path / "cut.json"
    cut.write_text('{"spec": "chara_card_v2", "data": {"name": "Tru')
    code, _, err = invoke(env, "import", str(empty), str(cut))
    assert code == 1
    assert "empty.json: error [asset.import.empty]" in err and "cut.json: error [asset.json.truncated]" in err


def test_an_id_of_the_wrong_kind_says_what_it_is(env: dict[str, str], tmp_path: Path) -> None:
    _, out, _ = invoke(env, "import", str(card_file(tmp_path)), "--json")
    card_id, book_id = (a["id"] for a in json.loads(out)[0]["assets"])
    code, _, err = invoke(env, "export", "card", book_id, "-o", str(tmp_path / "x.png"))
    assert code == 1 and f"asset '{book_id}' is a lorebook ('Alice lore'), not a card" in err
    code, out, _ = invoke(env, "assets", "trust", book_id, "--json")
    error = json.loads(out)["error"]
    assert (error["code"], error["details"]["kind"], error["details"]["expected"]) == ("asset.not_found", "lorebook", "card")
    code, _, err = invoke(env, "lorebook", "test", card_id, "--text", "x")
    assert code == 1 and "is a card ('Alice'), not a lorebook" in err


def _story(env: dict[str, str], card_id: str, title: str) -> str:
    result = CliRunner().invoke(rp, ["new", "--card", card_id, "--title", title, "--json"], env=env, obj=CliState())
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["sessionId"]


def test_deleting_a_card_that_stories_use_lists_them_and_asks_first(env: dict[str, str], tmp_path: Path) -> None:
    code, out, _ = invoke(env, "import", str(card_file(tmp_path)), "--json")
    assets = {a["kind"]: a["id"] for a in json.loads(out)[0]["assets"]}
    card, book = assets["card"], assets["lorebook"]
    sid = _story(env, card, "Tea at dawn")

    refused = CliRunner().invoke(rp, ["assets", "delete", card], env=env, obj=CliState(), input="\n")
    assert refused.exit_code == 1 and "delete it anyway?" in refused.stderr
    assert f"{sid}  Tea at dawn" in refused.stderr and "error [asset.in_use]" in refused.stderr
    no = CliRunner().invoke(rp, ["assets", "delete", card], env=env, obj=CliState(), input="n\n")
    assert no.exit_code == 1 and invoke(env, "assets", "show", card)[0] == 0  # nothing was deleted

    code, out, _ = invoke(env, "assets", "delete", card, "--json")
    error = json.loads(out)["error"]
    assert code == 1 and error["code"] == "asset.in_use"
    assert {(s["sessionId"], s["at"]) for s in error["details"]["sessions"]} == {(sid, "/resources/card"), (sid, "/resources/lorebooks/0")}

    # The lorebook alone is in use too (the story binds the card's lorebook).
    code, out, _ = invoke(env, "assets", "delete", book, "--json")
    assert code == 1 and [s["at"] for s in json.loads(out)["error"]["details"]["sessions"]] == ["/resources/lorebooks/0"]

    yes = CliRunner().invoke(rp, ["assets", "delete", card], env=env, obj=CliState(), input="y\n")
    assert yes.exit_code == 0 and f"deleted card {card}" in yes.stdout
    assert invoke(env, "sessions", "show", sid)[0] == 0  # the story itself is untouched


def test_deleting_an_unused_asset_or_with_yes_does_not_ask(env: dict[str, str], tmp_path: Path) -> None:
    code, out, _ = invoke(env, "import", str(card_file(tmp_path)), "--json")
    card = next(a["id"] for a in json.loads(out)[0]["assets"] if a["kind"] == "card")
    bob = tmp_path / "bob.json"
    bob.write_text(json.dumps({"spec": "chara_card_v2", "spec_version": "2.0", "data": {"name": "Bob", "first_mes": "Yo."}}))
    code, out, _ = invoke(env, "import", str(bob), "--json")
    unused = json.loads(out)[0]["assets"][0]["id"]
    _story(env, card, "In use")
    code, out, err = invoke(env, "assets", "delete", card, "--yes")
    assert code == 0 and "anyway" not in err and f"deleted card {card}" in out
    code, out, err = invoke(env, "assets", "delete", unused)
    assert code == 0 and "anyway" not in err and f"deleted card {unused}" in out


# -- what a card and a preset carry (issue 13 item 6) ---------------------------------------------


def test_plain_import_says_what_was_not_carried_over(env: dict[str, str], tmp_path: Path) -> None:
    code, out, _ = invoke(env, "import", str(card_file(tmp_path)))
    assert code == 0
    card_id = out.split("imported card ", 1)[1].split()[0]
    assert f"kept aside: the card's system prompt; not sent to the model until you run `rp assets trust {card_id}`" in out
    preset = tmp_path / "vivid.json"
    preset.write_text(
        json.dumps(
            {
                "prompts": [{"identifier": "main", "name": "Main Prompt", "content": "Write vividly."}],
                "prompt_order": [{"character_id": 100001, "order": [{"identifier": "main", "enabled": True}]}],
                "temperature": 0.7,
                "top_k": 40,
            }
        )
    )
    code, out, _ = invoke(env, "import", str(preset))
    assert code == 0
    assert "not carried over [sillytavern.setting.sampler]: setting 'top_k' has no equivalent in a preset (at /top_k)" in out
    assert "'temperature'" not in out  # carried into the preset's sampling
    code, out, _ = invoke(env, "import", str(preset), "--json")
    [again] = json.loads(out)
    code, out, _ = invoke(env, "assets", "show", again["assetId"], "--json")
    assert json.loads(out)["data"]["sampling"] == {"temperature": 0.7}


def test_export_warns_when_it_leaves_out_isolated_prompts(env: dict[str, str], tmp_path: Path) -> None:
    _, out, _ = invoke(env, "import", str(card_file(tmp_path)), "--json")
    card_id = json.loads(out)[0]["assetId"]
    target = tmp_path / "out.png"
    code, out, err = invoke(env, "export", "card", card_id, "-o", str(target))
    assert code == 0 and "wrote" in out
    assert "warning [card.export.isolated_prompts_left_out]: the card's system prompt was left out" in err
    code, out, _ = invoke(env, "export", "card", card_id, "-o", str(target), "--json")
    assert [w["fields"] for w in json.loads(out)["warnings"]] == [["system_prompt"]]
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"name": "Bob", "first_mes": "Hey."}))
    _, out, _ = invoke(env, "import", str(plain), "--json")
    code, out, err = invoke(env, "export", "card", json.loads(out)[0]["assetId"], "-o", str(target))
    assert code == 0 and "warning" not in err


def test_import_shows_the_kept_aside_prompts_and_trust_trusts_them(env: dict[str, str], tmp_path: Path) -> None:
    path = card_file(tmp_path)
    code, out, _ = invoke(env, "import", str(path))
    card_id = out.split("imported card ", 1)[1].split()[0]
    assert "(or import with --trust)" in out and "\n    system prompt: Obey.\n" in out
    code, out, _ = invoke(env, "import", str(path), "--trust")  # the same file again: trusts the existing card
    assert code == 0 and f"trusted: the card's system prompt reach the Writer (`rp assets trust {card_id} --revoke`" in out
    code, out, _ = invoke(env, "import", str(path), "--json")
    [item] = json.loads(out)
    assert item["duplicate"] and item["isolatedPrompts"] == ["system_prompt"] and item["trusted"] is True
    assert "_previews" not in item


def test_import_trust_on_a_new_card_and_cards_without_prompts(env: dict[str, str], tmp_path: Path) -> None:
    code, out, _ = invoke(env, "import", str(card_file(tmp_path, "fresh.json")), "--trust", "--json")
    [item] = json.loads(out)
    assert code == 0 and not item["duplicate"] and item["trusted"] is True
    code, out, _ = invoke(env, "assets", "trust", item["assetId"], "--revoke", "--json")
    assert json.loads(out)["trusted"] is False
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"spec": "chara_card_v2", "spec_version": "2.0", "data": {"name": "Bob", "first_mes": "Yo."}}))
    code, out, _ = invoke(env, "import", str(plain), "--trust", "--json")
    [bob] = json.loads(out)
    assert code == 0 and "trusted" not in bob and not bob.get("isolatedPrompts")
