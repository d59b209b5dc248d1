from __future__ import annotations

import io
import json
import zipfile

import pytest

from roleplay.assets.cards.detect import classify_json_object, find_zip_start, sniff_asset_kind


def _zip(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return out.getvalue()


def test_png_is_card_png_from_signature(helpers):
    assert sniff_asset_kind(helpers.tiny_png(), "whatever.bin") == "card-png"


def test_charx_needs_card_json():
    assert sniff_asset_kind(_zip({"card.json": b"{}"}), "x.charx") == "charx"
    assert sniff_asset_kind(_zip({"readme.txt": b"hi"}), "x.charx") == "unknown"


def test_jpeg_prefixed_charx_is_found(helpers):
    data = b"\xff\xd8\xff\xe0" + b"\x00" * 100 + _zip({"card.json": b"{}"})
    assert find_zip_start(data) == 104
    assert sniff_asset_kind(data, "card.jpg") == "charx"


@pytest.mark.parametrize(
    ("obj", "kind"),
    [
        ({"spec": "chara_card_v3", "data": {}}, "card-json"),
        ({"spec": "chara_card_v2", "data": {}}, "card-json"),
        ({"data": {"name": "x", "first_mes": "y"}}, "card-json"),
        ({"name": "x", "description": "d"}, "card-json"),
        ({"char_name": "x"}, "card-json"),
        ({"entries": {"0": {"key": ["a"], "content": "c"}}}, "lorebook"),
        ({"name": "Book", "entries": [{"keys": ["a"], "content": "c"}]}, "lorebook"),
        ({"spec": "lorebook_v3", "data": {"entries": []}}, "lorebook"),
        ({"lorebookVersion": 5, "entries": []}, "lorebook"),
        ({"prompts": [{"identifier": "main"}], "prompt_order": []}, "preset"),
        ({"temperature": 1, "top_p": 0.9, "rep_pen": 1.1}, "preset"),
        ({"hello": "world"}, "unknown"),
        ({"name": "Creative", "description": "d", "generation_settings": {"temperature": 1}}, "unknown"),
        ([1, 2], "unknown"),
    ],
)
def test_classify_json_object(obj, kind):
    assert classify_json_object(obj) == kind


def test_card_with_entries_key_is_still_a_card():
    assert classify_json_object({"name": "x", "first_mes": "hi", "entries": {}}) == "card-json"


def test_sniff_json_variants():
    card = json.dumps({"spec": "chara_card_v2", "data": {"name": "A"}}).encode()
    assert sniff_asset_kind(b"\xef\xbb\xbf  " + card, "a.json") == "card-json"
    assert sniff_asset_kind('{"entries": {}}'.encode("utf-16"), None) == "lorebook"
    assert sniff_asset_kind(b"{broken", "a.json") == "unknown"
    assert sniff_asset_kind(b"random \x00\x01 bytes", "a.json") == "unknown"
    assert sniff_asset_kind(b"", None) == "unknown"


def test_corpus_files_are_classified(corpus_dir):
    expected = {
        "cards/Aqua.png": "card-png",
        "cards/test_character.charx": "charx",
        "cards/白棠-卡.json": "card-json",
        "lorebooks/Eldoria.json": "lorebook",
        "lorebooks/Eldoria.2023-legacy.json": "lorebook",
        "lorebooks/HSR.json": "lorebook",
        "presets/Default.json": "preset",
        "presets/示例预设.json": "preset",
    }
    for rel, kind in expected.items():
        path = corpus_dir / rel
        assert sniff_asset_kind(path.read_bytes(), path.name) == kind, rel
