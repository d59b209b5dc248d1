from __future__ import annotations

import base64
import io
import json

import pytest
from PIL import Image

from roleplay.assets.cards.avatar import placeholder_avatar
from roleplay.assets.cards.export import (
    MERGED_FROM_KEY,
    build_v2_object,
    build_v3_object,
    export_card_png,
    merge_lorebooks,
    strip_decorators,
)
from roleplay.assets.cards.importer import import_card_bytes
from roleplay.assets.cards.normalize import parse_card_json
from roleplay.assets.cards.png_chunks import iter_chunks, read_text_chunks
from roleplay.errors import RpError


def _payloads(png: bytes) -> dict[str, dict]:
    return {t.keyword: json.loads(base64.b64decode(t.text)) for t in read_text_chunks(png).texts}


def _book(name: str, *ids: int, content: str = "text") -> dict:
    return {
        "name": name,
        "entries": [{"id": i, "keys": [f"k{i}"], "content": content, "enabled": True, "insertion_order": 10} for i in ids],
    }


def test_export_writes_ccv3_and_real_v2_chara_before_iend(helpers):
    parsed = parse_card_json(helpers.v3_card(nickname="Ally", source=["x"]))
    png = export_card_png(parsed.card, helpers.tiny_png(), [_book("B", 1)])
    types = [c.type_name for c in iter_chunks(png)]
    assert types[-3:] == ["tEXt", "tEXt", "IEND"]
    payloads = _payloads(png)
    v3, v2 = payloads["ccv3"], payloads["chara"]
    assert (v3["spec"], v3["spec_version"]) == ("chara_card_v3", "3.0")
    assert (v2["spec"], v2["spec_version"]) == ("chara_card_v2", "2.0")
    assert v3["data"]["nickname"] == "Ally" and v3["data"]["group_only_greetings"] == ["Hi all"]
    assert "nickname" not in v2["data"] and "group_only_greetings" not in v2["data"] and "assets" not in v2["data"]
    assert v2["name"] == "Alice" and v2["first_mes"] == "Hello, {{user}}."  # V1 root mirror
    assert v3["data"]["character_book"]["entries"][0]["use_regex"] is False
    assert v2["data"]["character_book"]["entries"][0]["content"] == "text"


def test_isolated_prompts_are_never_exported(helpers):
    parsed = parse_card_json(helpers.v2_card())
    assert not parsed.isolated_prompts.is_empty
    payloads = _payloads(export_card_png(parsed.card))
    for obj in payloads.values():
        assert obj["data"]["system_prompt"] == "" and obj["data"]["post_history_instructions"] == ""
    assert b"Be Alice" not in export_card_png(parsed.card)


def test_placeholder_avatar_when_none(helpers):
    png = export_card_png(parse_card_json(helpers.v2_card()).card)
    with Image.open(io.BytesIO(png)) as image:
        assert image.size == (400, 600)
    idat = b"".join(bytes(c.data) for c in iter_chunks(png) if c.type == b"IDAT")
    assert idat == b"".join(bytes(c.data) for c in iter_chunks(placeholder_avatar()) if c.type == b"IDAT")


def test_export_is_deterministic(helpers):
    card = parse_card_json(helpers.v3_card()).card
    assert export_card_png(card, helpers.tiny_png()) == export_card_png(card, helpers.tiny_png())


def test_unknown_fields_survive_export(helpers):
    obj = helpers.v3_card(x_data_key={"k": 1})
    obj["x_root_key"] = "kept"
    v3 = build_v3_object(parse_card_json(obj).card, None)
    assert v3["x_root_key"] == "kept" and v3["data"]["x_data_key"] == {"k": 1}
    assert v3["data"]["extensions"] == {"talkativeness": "0.5", "x_custom": {"nested": [1, 2]}}


def test_round_trip_of_synthetic_v2_with_book(helpers):
    book = _book("Lore", 3, content="@@depth 2\n@@@role system\nBody")
    original = import_card_bytes(json.dumps(helpers.v2_card(character_book=book)).encode(), "alice.json")
    png = export_card_png(original.card, None, [original.lorebook])
    again = import_card_bytes(png)
    assert again.card == original.card
    assert again.lorebook == merge_lorebooks([book])
    assert again.lorebook["entries"][0]["content"].startswith("@@depth 2")  # V3 keeps decorators
    assert _payloads(png)["chara"]["data"]["character_book"]["entries"][0]["content"] == "Body"
    assert not original.isolated_prompts.is_empty and again.isolated_prompts.is_empty
    assert again.source_spec == "v3" and again.warnings == []


def test_merge_single_book_fills_required_defaults_only():
    book = {"name": "B", "scan_depth": 3, "entries": [{"keys": ["a"], "content": "c", "use_regex": True}]}
    merged = merge_lorebooks([book])
    assert merged == {
        "name": "B",
        "scan_depth": 3,
        "extensions": {},
        "entries": [{"keys": ["a"], "content": "c", "use_regex": True, "extensions": {}, "enabled": True, "insertion_order": 100}],
    }
    assert "extensions" not in book["entries"][0]  # input untouched


def test_merge_several_books():
    first = _book("World", 0, 1)
    first.update({"scan_depth": 2, "token_budget": 500, "recursive_scanning": False, "extensions": {"a": 1}})
    second = _book("People", 1, 2)
    second.update({"scan_depth": 5, "recursive_scanning": True, "extensions": {"a": 2, "b": 3}, "description": "d"})
    merged = merge_lorebooks([first, second])
    assert [e["id"] for e in merged["entries"]] == [0, 1, 3, 2]  # the second id 1 collided
    assert [e["keys"] for e in merged["entries"]] == [["k0"], ["k1"], ["k1"], ["k2"]]
    assert (merged["name"], merged["description"]) == ("World", "d")
    assert (merged["scan_depth"], merged["token_budget"], merged["recursive_scanning"]) == (5, 500, True)
    assert merged["extensions"] == {"a": 1, "b": 3, MERGED_FROM_KEY: ["World", "People"]}


def test_merge_accepts_world_info_entry_maps_and_rejects_junk():
    merged = merge_lorebooks([{"entries": {"5": {"keys": ["x"], "content": "y"}}}])
    assert merged["entries"][0]["keys"] == ["x"]
    assert merge_lorebooks([]) is None
    for bad in ([{"entries": "nope"}], ["not a dict"], [{"entries": [1]}]):
        with pytest.raises(RpError) as info:
            merge_lorebooks(bad)
        assert info.value.code == "card.export.invalid_lorebook"


def test_strip_decorators():
    assert strip_decorators("@@depth 4\n@@@depth 2\n@@activate\nHello\n@@not a decorator") == "Hello\n@@not a decorator"
    assert strip_decorators("plain\ntext") == "plain\ntext"


def test_v2_backfill_has_exactly_the_v2_fields(helpers):
    v2 = build_v2_object(parse_card_json(helpers.v3_card()).card, None)
    assert set(v2["data"]) == {
        "name",
        "description",
        "personality",
        "scenario",
        "first_mes",
        "mes_example",
        "creator_notes",
        "system_prompt",
        "post_history_instructions",
        "alternate_greetings",
        "tags",
        "creator",
        "character_version",
        "extensions",
    }


def test_bad_avatar_is_an_rperror(helpers):
    with pytest.raises(RpError) as info:
        export_card_png(parse_card_json(helpers.v2_card()).card, b"not an image")
    assert info.value.code == "card.avatar.invalid"
