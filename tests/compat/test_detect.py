"""Detection of MVU constructs and where each was found."""

from compat.mvu_support import entry, make_card

from roleplay.compat.mvu.detect import detect, is_mvu, is_update_rules_entry
from roleplay.compat.mvu.sources import read_book, read_card


def kinds(found):
    return [(f.kind, f.entry, f.line) for f in found]


def test_initvar_titles_match_anywhere_case_insensitively_including_disabled_entries():
    titles = ["alpha [initvar]", "[initvar] block", "[INITVAR]", "[initvar]222", "[InitVar]初始变量1", "plain"]
    card, _ = read_card(make_card(entries=[entry(t, "a: 1", enabled=False) for t in titles]))
    found = [f for f in detect(card) if f.kind == "initvar_entry"]
    assert [f.entry for f in found] == titles[:-1]
    assert all("disabled" in f.detail for f in found)
    assert found[0].pointer == "/data/character_book/entries/0/content"


def test_tags_blocks_macros_and_ejs_are_located_by_line():
    content = "line\n{{format_message_variable::stat_data}}\n<%_ if (getvar('stat_data.a') < 2) { _%>\nx\n<%_ } _%>"
    card, _ = read_card(
        make_card(
            "hello\n<UpdateVariable>\n<initvar>\na: 1\n</initvar>\n_.set('a', 2);\n</UpdateVariable>",
            entries=[entry("变量更新规则[mvu_update]", content), entry("常见错误修正[MVU_PLOT]", "{{get_message_variable::stat_data.a}}")],
        )
    )
    found = kinds(detect(card))
    assert ("initvar_block", None, 3) in found and ("command", None, 6) in found
    assert ("mvu_update_tag", "变量更新规则[mvu_update]", None) in found
    assert ("format_message_variable", "变量更新规则[mvu_update]", 2) in found
    assert ("ejs_getvar", "变量更新规则[mvu_update]", 3) in found and ("ejs", "变量更新规则[mvu_update]", 5) in found
    assert ("mvu_plot_tag", "常见错误修正[MVU_PLOT]", None) in found
    assert ("get_message_variable", "常见错误修正[MVU_PLOT]", 1) in found
    assert is_mvu(detect(card))


def test_extra_lorebooks_and_scripts_are_scanned():
    card, _ = read_card(make_card(extensions={"tavern_helper": {"scripts": [{"name": "mvu"}]}}))
    book, _ = read_book({"entries": {"1": {"comment": "[initvar]", "content": "a: 1"}}}, name="g.json", source="g.json")
    found = detect(card, [book])
    assert [(f.kind, f.source) for f in found] == [("initvar_entry", "g.json"), ("script", "card")]


def test_rules_entries_are_found_by_tag_or_heading():
    card, _ = read_card(make_card(entries=[entry("规则", "变量更新规则:\n  a: {}"), entry("[mvu_update]x", "y"), entry("other", "z")]))
    assert [is_update_rules_entry(e) for e in card.books[0].entries] == [True, True, False]


def test_plain_cards_are_not_mvu():
    card, _ = read_card(make_card("Hello {{user}}", entries=[entry("Lore", "text")]))
    assert not is_mvu(detect(card))
