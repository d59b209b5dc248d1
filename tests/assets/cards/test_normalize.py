from __future__ import annotations

import pytest

from roleplay.assets.cards.model import CharacterCard
from roleplay.assets.cards.normalize import parse_card_json, st_depth_prompt, st_talkativeness
from roleplay.errors import RpError


def codes(parsed) -> list[str]:
    return [w.code for w in parsed.warnings]


def test_v1_flat_card(helpers):
    obj = {
        "name": "Aqua",
        "description": "d",
        "personality": "p",
        "scenario": "s",
        "first_mes": "f",
        "mes_example": "m\r\nn",
        "avatar": "none",
        "chat": "1673181146000",
        "create_date": "1673181146000",
    }
    parsed = parse_card_json(obj)
    assert parsed.source_spec == "v1" and parsed.source_spec_version is None
    assert parsed.card.name == "Aqua" and parsed.card.mes_example == "m\r\nn"  # CRLF kept verbatim
    assert parsed.card.extra_root == {}  # TavernAI bookkeeping is not card data
    assert parsed.raw["chat"] == "1673181146000"  # but the raw object keeps it
    assert parsed.lorebook is None and parsed.isolated_prompts.is_empty
    assert codes(parsed) == []


def test_v2_card_with_isolated_prompts_and_extensions(helpers):
    parsed = parse_card_json(helpers.v2_card())
    assert parsed.source_spec == "v2" and parsed.source_spec_version == "2.0"
    card = parsed.card
    assert card.alternate_greetings == ["Hi!", "Yo."]
    assert card.extensions == {"talkativeness": "0.5", "x_custom": {"nested": [1, 2]}}
    assert parsed.isolated_prompts.system_prompt == "Be Alice. {{original}}"
    assert parsed.isolated_prompts.post_history_instructions == "Stay in character."
    assert parsed.isolated_prompts.trusted is False
    assert "system_prompt" not in CharacterCard.model_fields
    assert card.group_only_greetings == [] and card.nickname is None
    assert codes(parsed) == []


def test_v3_card_with_all_v3_fields(helpers):
    obj = helpers.v3_card(
        nickname="Ally",
        creator_notes_multilingual={"en": "hello", "ja": "こんにちは"},
        source=["https://example.org/alice"],
        assets=[
            {"type": "icon", "uri": "embeded://assets/main.png", "name": "main", "ext": "png"},
            {"type": "x_scene", "uri": "https://e.org/bg.webp", "name": "bg", "ext": "webp", "x_note": 1},
        ],
        creation_date=1700000000,
        modification_date=0,
        x_future_field={"a": 1},
    )
    obj["x_root"] = [1]
    parsed = parse_card_json(obj)
    card = parsed.card
    assert parsed.source_spec == "v3"
    assert card.nickname == "Ally" and card.display_name() == "Ally"
    assert card.creator_notes_multilingual == {"en": "hello", "ja": "こんにちは"}
    assert card.source == ["https://example.org/alice"]
    assert [a.uri for a in card.assets] == ["embeded://assets/main.png", "https://e.org/bg.webp"]
    assert card.assets[1].model_dump()["x_note"] == 1
    assert (card.creation_date, card.modification_date) == (1700000000, 0)
    assert card.group_only_greetings == ["Hi all"]
    assert card.extra_data == {"x_future_field": {"a": 1}}
    assert card.extra_root == {"x_root": [1]}


def test_chara_chunk_holding_v3_is_classified_by_spec(helpers):
    assert parse_card_json(helpers.v3_card()).source_spec == "v3"


def test_character_book_is_extracted_verbatim_even_without_extensions(helpers):
    book = {
        "name": "Eldoria",
        "entries": [
            {
                "id": 0,
                "keys": ["eldoria"],
                "content": "x",
                "use_regex": True,
                "enabled": True,
                "insertion_order": 100,
                "extensions": {"position": 0, "depth": 4},
            },
            {"keys": [], "constant": True, "content": "always", "position": 1},  # V3 entry without use_regex
        ],
    }
    parsed = parse_card_json(helpers.v2_card(character_book=book))
    assert parsed.lorebook == book
    assert parsed.lorebook is not book  # a copy: callers may mutate it safely


def test_null_character_book_is_absent(helpers):
    parsed = parse_card_json(helpers.v2_card(character_book=None))
    assert parsed.lorebook is None and codes(parsed) == []


def test_non_object_character_book_is_ignored_with_warning(helpers):
    parsed = parse_card_json(helpers.v2_card(character_book="oops"))
    assert parsed.lorebook is None
    assert parsed.warnings[0].code == "card.lorebook.invalid"
    assert parsed.warnings[0].pointer == "/data/character_book"


def test_root_character_book_fallback(helpers):
    obj = helpers.v2_card()
    obj["character_book"] = {"entries": []}
    parsed = parse_card_json(obj)
    assert parsed.lorebook == {"entries": []}
    assert "card.lorebook.at_root" in codes(parsed)


def test_numbers_and_nulls_are_coerced(helpers):
    parsed = parse_card_json(helpers.v2_card(character_version=1.0, creator=None, scenario=7, tags=[1, "a", None]))
    assert parsed.card.character_version == "1.0"
    assert parsed.card.creator == ""
    assert parsed.card.scenario == "7"
    assert parsed.card.tags == ["1", "a"]
    pointers = {w.pointer for w in parsed.warnings}
    assert {"/data/character_version", "/data/scenario", "/data/tags/0", "/data/tags/2"} <= pointers


def test_string_greetings_and_comma_tags(helpers):
    parsed = parse_card_json(helpers.v2_card(alternate_greetings="1687194031049", tags="a, b,,c"))
    assert parsed.card.alternate_greetings == ["1687194031049"]
    assert parsed.card.tags == ["a", "b", "c"]
    assert codes(parsed).count("card.field.coerced") == 2


def test_structured_value_in_string_field_becomes_json_text(helpers):
    parsed = parse_card_json(helpers.v2_card(description={"a": 1}))
    assert parsed.card.description == '{"a": 1}'
    assert codes(parsed) == ["card.field.coerced"]


def test_talkativeness_variants_stay_verbatim_but_read_as_float(helpers):
    for raw, expected in (("0.5", 0.5), ("1", 1.0), (0.5, 0.5), ("junk", 0.5), (None, 0.5), ("7", 1.0)):
        card = parse_card_json(helpers.v2_card(extensions={"talkativeness": raw})).card
        assert card.extensions["talkativeness"] == raw
        assert st_talkativeness(card) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"prompt": "p", "depth": 2, "role": "user"}, ("p", 2, "user")),
        ({"prompt": "", "depth": 4}, ("", 4, "system")),  # CapoGPT: no role
        ({"prompt": "p", "depth": ""}, ("p", 4, "system")),  # AICharED: "" depth
        ({"prompt": None, "depth": "3", "role": "bogus"}, ("", 3, "system")),
    ],
)
def test_depth_prompt_variants(helpers, raw, expected):
    dp = st_depth_prompt(parse_card_json(helpers.v2_card(extensions={"depth_prompt": raw})).card)
    assert (dp.prompt, dp.depth, dp.role) == expected


def test_depth_prompt_absent(helpers):
    assert st_depth_prompt(parse_card_json(helpers.v2_card(extensions={})).card) is None


def test_v2_root_mirror_fills_missing_data_fields(helpers):
    obj = helpers.v2_card()
    del obj["data"]["first_mes"]
    obj.update({"first_mes": "from root", "chat": "Alice - 2023-5-12 @21h", "fav": False, "creatorcomment": "c"})
    parsed = parse_card_json(obj)
    assert parsed.card.first_mes == "from root"
    assert "card.field.from_root" in codes(parsed)
    assert parsed.card.extra_root == {}  # ST bookkeeping must not leak into exports


def test_spec_without_data_reads_root(helpers):
    obj = {"spec": "chara_card_v2", "spec_version": "2.0", "name": "Bob", "first_mes": "hey"}
    parsed = parse_card_json(obj)
    assert parsed.card.name == "Bob" and parsed.card.first_mes == "hey"
    assert codes(parsed) == ["card.spec.data_missing"]


def test_data_without_spec_is_v2(helpers):
    parsed = parse_card_json({"data": {"name": "Bob"}})
    assert parsed.source_spec == "v2" and "card.spec.missing" in codes(parsed)


@pytest.mark.parametrize(
    ("spec", "version", "code"),
    [
        ("chara_card_v2", "2.1", "card.spec_version.unexpected"),
        ("chara_card_v3", "3.1", "card.spec_version.newer"),
        ("chara_card_v3", "4.0", "card.spec_version.unexpected"),
        ("chara_card_v3", None, "card.spec_version.unexpected"),
    ],
)
def test_odd_spec_versions_warn_but_import(helpers, spec, version, code):
    obj = helpers.v2_card()
    obj["spec"], obj["spec_version"] = spec, version
    parsed = parse_card_json(obj)
    assert parsed.card.name == "Alice"
    assert code in codes(parsed)


def test_unknown_spec_with_card_data_is_read_as_v2(helpers):
    obj = helpers.v2_card()
    obj["spec"] = "chara_card_v9"
    parsed = parse_card_json(obj)
    assert parsed.source_spec == "v2" and "card.spec.unknown" in codes(parsed)


def test_unknown_spec_without_card_data_is_rejected():
    with pytest.raises(RpError) as info:
        parse_card_json({"spec": "something_else"})
    assert info.value.code == "card.json.unsupported_spec" and info.value.pointer == "/spec"


def test_lorebook_spec_is_rejected():
    with pytest.raises(RpError) as info:
        parse_card_json({"spec": "lorebook_v3", "data": {"entries": []}})
    assert info.value.code == "card.json.is_lorebook"


def test_pygmalion_card():
    parsed = parse_card_json(
        {"char_name": "Pyg", "char_persona": "persona", "char_greeting": "hello", "world_scenario": "world", "example_dialogue": "ex"}
    )
    assert parsed.source_spec == "pygmalion"
    card = parsed.card
    assert (card.name, card.description, card.first_mes, card.scenario, card.mes_example) == ("Pyg", "persona", "hello", "world", "ex")


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"entries": {"0": {"key": ["a"]}}}, "lorebook"),
        ({"prompts": [], "prompt_order": []}, "preset"),
        ({"foo": 1}, "neither"),
    ],
)
def test_non_cards_are_rejected_with_a_helpful_reason(obj, message):
    with pytest.raises(RpError) as info:
        parse_card_json(obj)
    assert info.value.code == "card.json.not_a_card"
    assert message in info.value.message


def test_non_object_is_rejected():
    with pytest.raises(RpError) as info:
        parse_card_json(["a"])
    assert info.value.code == "card.json.not_object"


def test_empty_name_is_derived_from_nickname_then_filename(helpers):
    assert parse_card_json(helpers.v3_card(name="", nickname="Nick")).card.name == "Nick"
    parsed = parse_card_json(helpers.v2_card(name="  "), filename="cards/Seraphina.png")
    assert parsed.card.name == "Seraphina"
    assert parsed.warnings[-1].code == "card.name.missing"
    assert parse_card_json(helpers.v2_card(name=None)).card.name == "Unnamed character"


def test_assets_are_normalised(helpers):
    parsed = parse_card_json(helpers.v3_card(assets=[{"uri": "embeded://a.png"}, {"type": "icon"}, "junk"]))
    assert [a.model_dump() for a in parsed.card.assets] == [{"type": "icon", "uri": "embeded://a.png", "name": "main", "ext": "unknown"}]
    assert codes(parsed).count("card.asset.invalid") == 2
    assert parse_card_json(helpers.v3_card(assets="nope")).card.assets[0].uri == "ccdefault:"


def test_dates_are_coerced(helpers):
    parsed = parse_card_json(helpers.v3_card(creation_date="1700000000", modification_date="yesterday"))
    assert parsed.card.creation_date == 1700000000
    assert parsed.card.modification_date is None
    assert {"card.field.coerced", "card.field.invalid"} <= set(codes(parsed))


def test_invalid_extensions_and_multilingual_are_dropped_with_warnings(helpers):
    parsed = parse_card_json(helpers.v3_card(extensions=["x"], creator_notes_multilingual="en"))
    assert parsed.card.extensions == {} and parsed.card.creator_notes_multilingual is None
    assert codes(parsed).count("card.field.invalid") == 2


def test_too_deep_object_is_rejected(helpers):
    deep: dict = {}
    node = deep
    for _ in range(150):
        node["k"] = {}
        node = node["k"]
    with pytest.raises(RpError) as info:
        parse_card_json(helpers.v2_card(extensions=deep))
    assert info.value.code == "card.json.too_deep"


def test_input_is_not_mutated_and_not_aliased(helpers):
    obj = helpers.v2_card()
    parsed = parse_card_json(obj)
    parsed.card.extensions["x_custom"]["nested"].append(3)
    assert obj["data"]["extensions"]["x_custom"]["nested"] == [1, 2]
