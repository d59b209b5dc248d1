"""What a requested JSON repair lost from a lorebook file (issue 10 item 3): a self-made 29-entry
book cut at 5 KB, cuts at every kind of place, dropped text, and a repair that loses nothing."""

from __future__ import annotations

import json

import json_repair
import pytest

from roleplay.assets.lorebook import import_lorebook
from roleplay.assets.lorebook.repair import repair_losses


def book_29() -> str:
    entries = {
        str(uid): {
            "uid": uid,
            "key": [f"place{uid}", f"Place {uid}"],
            "keysecondary": [],
            "comment": f"Place {uid}",
            "content": f"[ Place {uid}: a walled town on the river road; " + "market, temple, garrison. " * 6 + "]",
            "constant": False,
            "selective": True,
            "order": 100 + uid,
            "position": 0,
            "disable": False,
            "probability": 100,
            "useProbability": True,
            "depth": 4,
            "group": "",
        }
        for uid in range(29)
    }
    return json.dumps({"entries": entries}, separators=(",", ":"))


def assess(text: str):
    repaired, problems = repair_losses(text, json_repair.loads(text))
    return repaired, {p.code: p for p in problems}


def test_a_book_cut_at_5_kb_reports_the_cut_the_kept_entries_and_the_incomplete_one():
    full = book_29()
    assert len(json.loads(full)["entries"]) == 29 and len(full) > 5000
    text = full[:5000]
    repaired, problems = assess(text)
    assert set(problems) == {"lorebook.repair.truncated"}
    cut = problems["lorebook.repair.truncated"]
    kept = len(repaired["entries"])
    assert 0 < kept < 29
    assert cut.pointer == "char:5000"
    assert cut.details["entriesKept"] == kept
    last = str(kept - 1)
    assert cut.details["incompleteEntry"] == f"/entries/{last}"
    assert cut.details["incompleteEntryTitle"] == f"Place {last}"
    assert f"{kept} entries" in cut.message and "lost" in cut.message
    # The repaired book still imports: the user asked for it, knowing what was lost.
    assert len(import_lorebook(repaired, book_id="b").entries) == kept


def test_a_cut_inside_a_text_names_the_value_and_how_much_of_it_survived():
    full = book_29()
    start = full.index('"content":"', full.index('"3":{')) + len('"content":"')
    text = full[: start + 24]  # "[ Place 3: a walled town"
    _, problems = assess(text)
    cut = problems["lorebook.repair.truncated"]
    assert (cut.details["cutValue"], cut.details["cutValueKeptChars"]) == ("/entries/3/content", 24)
    assert cut.details["entriesKept"] == 4 and "/entries/3/content is cut short" in cut.message


def test_a_cut_inside_a_field_name_says_the_field_is_lost():
    full = book_29()
    text = full[: full.index('"probability"', full.index('"2":{')) + 5]
    _, problems = assess(text)
    cut = problems["lorebook.repair.truncated"]
    assert "cutValue" not in cut.details and "field name was cut" in cut.message


def test_a_cut_right_after_an_entry_key_leaves_out_the_empty_stub():
    full = book_29()
    text = full[: full.index('"6":{') + len('"6":')]
    repaired, problems = assess(text)
    cut = problems["lorebook.repair.truncated"]
    assert cut.details["droppedStub"] == "/entries/6" and cut.details["entriesKept"] == 6
    assert "incompleteEntry" not in cut.details and "between two entries" in cut.message
    assert list(repaired["entries"]) == [str(i) for i in range(6)]
    assert set(problems) == {"lorebook.repair.truncated"}  # the stub's key is not "dropped text"
    assert len(import_lorebook(repaired, book_id="b").entries) == 6


def test_text_the_repair_cannot_place_is_reported_as_dropped():
    text = '{"entries": {"0": {"key": ["moon"], "content": "The moon is red."} stray "lost words" }}'
    repaired, problems = assess(text)
    assert repaired == {"entries": {"0": {"key": ["moon"], "content": "The moon is red."}}}
    dropped = problems["lorebook.repair.dropped"]
    assert dropped.details == {"text": "lost words", "chars": 10}
    assert dropped.pointer == "char:%d" % text.index('"lost words"')


def test_a_repair_that_only_fixes_syntax_loses_nothing():
    text = '{"entries": {"0": {"key": ["moon"] "content": "The moon is red."}}}'  # a missing comma
    repaired, problems = assess(text)
    assert problems == {}
    assert repaired["entries"]["0"]["content"] == "The moon is red."


def test_character_book_lists_are_understood_too():
    text = json.dumps(
        {
            "name": "b",
            "entries": [{"id": i, "keys": [f"k{i}"], "content": "x" * 50, "enabled": True, "insertion_order": i} for i in range(5)],
        }
    )
    cut_at = text.index('{"id": 3') + 20
    _, problems = assess(text[:cut_at])
    cut = problems["lorebook.repair.truncated"]
    assert cut.details["incompleteEntry"] == "/entries/3" and cut.details["entriesKept"] == 4


@pytest.mark.parametrize("size", [5_000])
def test_corpus_lorebook_cut_at_5_kb(corpus_dir, size):
    """The issue's own case: Eorzea.json (29 entries) cut at 5 KB."""
    full = (corpus_dir / "lorebooks" / "Eorzea.json").read_bytes()
    assert len(json.loads(full)["entries"]) == 29
    text = full[:size].decode("utf-8", errors="ignore")
    repaired, problems = assess(text)
    cut = problems["lorebook.repair.truncated"]
    assert cut.details["entriesKept"] == len(repaired["entries"]) < 29
    assert cut.details["incompleteEntry"] == f"/entries/{len(repaired['entries']) - 1}"


# --- through the importer and ``rp import`` -------------------------------------------------


@pytest.mark.anyio
async def test_import_refuses_a_cut_book_and_with_repair_reports_what_was_lost(store):
    from roleplay.assets.importing import import_file
    from roleplay.assets.store import AssetStore
    from roleplay.errors import RpError

    assets = AssetStore(store)
    cut = book_29().encode()[:5000]
    with pytest.raises(RpError) as refused:
        await import_file(assets, cut, "places.json")
    assert refused.value.code.endswith(".truncated")
    assert (await assets.list("lorebook")).items == []
    result = await import_file(assets, cut, "places.json", allow_repair=True)
    warnings = {w.code: w for w in result.warnings}
    lost = warnings["lorebook.repair.truncated"]
    record = await assets.get(result.asset_id, kind="lorebook")
    kept = len(record.data["book"]["entries"])
    assert 0 < kept < 29 and lost.details["entriesKept"] == kept
    assert lost.details["incompleteEntry"] == f"/entries/{kept - 1}"


def test_rp_import_exits_1_on_a_cut_book_and_imports_it_with_repair(tmp_path):
    from click.testing import CliRunner

    from roleplay.cli import cli as rp
    from roleplay.cli_context import CliState

    path = tmp_path / "places.json"
    path.write_bytes(book_29().encode()[:5000])

    def invoke(*args: str, home: str = "home"):
        env = {"RP_HOME": str(tmp_path / home), "RP_DATABASE_URL": ""}
        result = CliRunner().invoke(rp, list(args), env=env, obj=CliState())
        return result.exit_code, result.stdout

    code, out = invoke("import", str(path), "--json")
    [refused] = json.loads(out)
    assert code == 1 and refused["error"]["code"].endswith(".truncated")
    code, out = invoke("import", "--repair", str(path), "--json")
    [imported] = json.loads(out)
    assert code == 0 and imported["kind"] == "lorebook"
    lost = next(w for w in imported["warnings"] if w["code"] == "lorebook.repair.truncated")
    assert 0 < lost["details"]["entriesKept"] < 29
    code, out = invoke("import", "--repair", str(path), home="other")
    assert code == 0 and "warning [lorebook.repair.truncated]" in out and "is lost" in out


def test_strings_the_repair_only_unescaped_are_not_reported_as_dropped():
    text = '{"entries": {"0": {"key": ["moon"] "content": "It\\\'s red.\nTruly."}}}'
    repaired, problems = assess(text)
    assert repaired["entries"]["0"]["content"] == "It's red.\nTruly."
    assert problems == {}
