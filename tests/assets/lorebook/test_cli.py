"""``rp lorebook test`` through click against a stored lorebook."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from roleplay.cli import cli
from roleplay.cli_context import CliState

BOOK = {
    "entries": {
        "0": {"uid": 0, "key": ["dragon"], "content": "Dragons sleep under the mountain.", "comment": "Dragons", "position": 0},
        "1": {"uid": 1, "key": ["mountain"], "content": "The mountain is cold.", "comment": "Mountain", "position": 0},
        "2": {"uid": 2, "key": ["ocean"], "content": "The ocean is far away.", "comment": "Ocean", "position": 0},
    }
}


def invoke(home: Path, *args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli, ["--home", str(home), *args], env={"RP_DATABASE_URL": ""}, obj=CliState())


def test_activation_report_for_a_stored_book(tmp_path: Path) -> None:
    path = tmp_path / "book.json"
    path.write_text(json.dumps(BOOK))
    imported = invoke(tmp_path, "import", str(path), "--json")
    assert imported.exit_code == 0, imported.output
    book_id = json.loads(imported.stdout)[0]["assetId"]

    result = invoke(tmp_path, "lorebook", "test", book_id, "--text", "A dragon appears!", "--json", "--all")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    # "dragon" fires by key; its content mentions the mountain, which fires by recursion.
    assert [a["title"] for a in report["activated"]] == ["Dragons", "Mountain"]
    assert [a["sweep"] for a in report["activated"]] == [1, 2]
    ocean = next(d for d in report["decisions"] if d["title"] == "Ocean")
    assert ocean["activated"] is False and ocean["reason"]
    again = invoke(tmp_path, "lorebook", "test", book_id, "--text", "A dragon appears!", "--json", "--all")
    assert again.stdout == result.stdout  # deterministic

    text = invoke(tmp_path, "lorebook", "test", book_id, "--text", "the ocean")
    assert "1 of 3 entries activate" in text.stdout and "Ocean" in text.stdout


def test_unknown_lorebook_is_a_clear_error(tmp_path: Path) -> None:
    result = invoke(tmp_path, "lorebook", "test", "ast_missing", "--text", "x")
    assert result.exit_code == 1 and "asset.not_found" in result.stderr


def test_titles_and_names_from_the_book_print_inert(tmp_path: Path) -> None:
    hostile = "\x1b]0;owned\x07\x1b[2J\u202e\x9b31m"
    book = {
        "name": "Lore",
        "entries": {
            "0": {"uid": 0, "key": ["dragon"], "content": "x", "comment": f"Dra{hostile}gons 龍 👩\u200d💻", "position": 0},
            "1": {"uid": 1, "key": [f"o{hostile}cean", "sea"], "content": "y", "comment": "", "position": 0},
        },
    }
    path = tmp_path / "book.json"
    path.write_text(json.dumps(book))
    imported = invoke(tmp_path, "import", str(path), "--json")
    assert imported.exit_code == 0, imported.output
    book_id = json.loads(imported.stdout)[0]["assetId"]

    result = invoke(tmp_path, "lorebook", "test", book_id, "--text", "a dragon", "--all")
    assert result.exit_code == 0, result.output
    assert not any(c in result.output for c in "\x1b\x07\x9b\u202e"), result.output
    shown = "\\x1b]0;owned\\x07\\x1b[2J\\u202e\\x9b31m"
    assert f"Dra{shown}gons 龍 👩\u200d💻" in result.stdout and f"o{shown}cean" in result.stdout
