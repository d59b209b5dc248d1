"""Reading cards and lorebooks into the neutral shape, and SillyTavern macro expansion."""

from compat.mvu_support import entry, make_card

from roleplay.compat.mvu.sources import (
    expand_macros,
    leftover_macros,
    read_book,
    read_card,
)


def test_world_info_and_character_book_entries_read_alike():
    world, problems = read_book(
        {"entries": {"7": {"uid": 7, "comment": "[initvar]", "content": "a: 1", "disable": True}}}, name="w.json", source="w.json"
    )
    assert problems == []
    (only,) = world.entries
    assert (only.uid, only.title, only.enabled, only.loc.pointer) == ("7", "[initvar]", False, "/entries/7/content")
    card_book, _ = read_book({"entries": [entry("t", "x", enabled=False)]}, name="c", source="card", base="/data/character_book")
    assert card_book.entries[0].enabled is False
    assert card_book.entries[0].loc.pointer == "/data/character_book/entries/0/content"


def test_invalid_lorebooks_and_entries_are_reported_not_raised():
    book, problems = read_book([1, 2], name="x", source="x.json")
    assert book is None and problems[0].code == "mvu.source.lorebook_invalid"
    book, problems = read_book({"entries": {"1": "text"}}, name="x", source="x.json")
    assert book.entries == () and problems[0].pointer == "/entries/1"


def test_card_greetings_keep_their_order_and_pointers():
    card, _ = read_card(make_card("hi", ["a", "b"], entries=[entry("[initvar]", "x: 1")]))
    assert [(g.key, g.loc.pointer) for g in card.greetings] == [
        ("default", "/data/first_mes"),
        ("alternate:0", "/data/alternate_greetings/0"),
        ("alternate:1", "/data/alternate_greetings/1"),
    ]
    assert card.books[0].role == "character"


def test_macros_expand_case_insensitively_and_others_are_reported():
    text = "{{user}} {{ Char }} <USER> <bot> <char> {{random::a::b}}"
    assert expand_macros(text, char="理", user="牧师") == "牧师 理 牧师 理 理 {{random::a::b}}"
    assert leftover_macros("{{random::a::b}} {{getvar::x}}") == ["{{getvar::x}}", "{{random::a::b}}"]
