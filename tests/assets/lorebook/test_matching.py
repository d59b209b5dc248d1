"""Key matching: ST ``matchKeys`` semantics, index/automaton equivalence and the regex guard."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roleplay.assets.lorebook.matching import (
    BLANK_WW,
    LITERAL,
    LITERAL_WW,
    REGEX,
    WORD,
    MatcherTable,
    RegexGuard,
    TextIndex,
    classify_key,
    js_trim,
)


@pytest.mark.parametrize(
    ("key", "cs", "ww", "kind", "text"),
    [
        ("Dragon", False, True, WORD, "dragon"),
        ("Dragon", True, True, WORD, "Dragon"),
        ("sea lion", False, True, LITERAL, "sea lion"),
        ("国王", False, True, LITERAL_WW, "国王"),
        ("x-ray", False, True, LITERAL_WW, "x-ray"),
        ("cat", False, False, LITERAL, "cat"),
        ("", False, True, BLANK_WW, ""),
        ("/a+/i", False, True, REGEX, "/a+/i"),
    ],
)
def test_classify_key(key, cs, ww, kind, text):
    assert classify_key(key, cs, ww)[:2] == (kind, text)


def index_for(keys: list[tuple[str, bool, bool]], text: str, automaton: bool = True):
    table = MatcherTable()
    ids = [table.matcher_for(*k) for k in keys]
    table.freeze()
    return ids, TextIndex(table, text, RegexGuard(), use_automaton=automaton)


def test_whole_word_rules_on_text():
    keys = [("cat", False, True), ("国王", False, True), ("x-ray", False, True), ("", False, True), ("sea lion", False, True)]
    ids, idx = index_for(keys, "\x01concat 国王们 x-rays sea lions")
    assert [idx.matches(i) for i in ids] == [False, True, False, True, True]


def test_js_trim_keeps_non_js_whitespace():
    assert js_trim("\u3000 key \ufeff") == "key"
    assert js_trim("\x1ckey") == "\x1ckey"  # Python's strip() would remove \x1c


_alphabet = st.sampled_from(list("ab_ 国王-.\n\x01A"))
_keys = st.lists(st.tuples(st.text(_alphabet, min_size=1, max_size=4), st.booleans(), st.booleans()), min_size=1, max_size=8)


@settings(max_examples=200, deadline=None)
@given(_keys, st.text(_alphabet, max_size=40))
def test_automaton_and_direct_scan_agree(keys, text):
    ids, with_ac = index_for(keys, text, automaton=True)
    _, direct = index_for(keys, text, automaton=False)
    assert [with_ac.matches(i) for i in ids] == [direct.matches(i) for i in ids]


@settings(max_examples=150, deadline=None)
@given(_keys, st.lists(st.text(_alphabet, max_size=15), min_size=1, max_size=4))
def test_composite_index_equals_whole_text(keys, parts):
    table = MatcherTable()
    ids = [table.matcher_for(*k) for k in keys]
    table.freeze()
    guard = RegexGuard()
    pieces = [TextIndex(table, p, guard) for p in parts]
    text = "\n\x01".join(parts)
    composite = TextIndex(table, text, guard, parts=pieces)
    whole = TextIndex(table, text, guard)
    assert [composite.matches(i) for i in ids] == [whole.matches(i) for i in ids]


def test_regex_prefilter_skips_search_when_literal_absent():
    ids, idx = index_for([("/\\bKari(?:an)?\\b/i", False, True)], "nothing relevant")
    assert idx.matches(ids[0]) is False and idx.guard.cut == {} and idx.guard.diagnostics == []
    ids, idx = index_for([("/\\bKari(?:an)?\\b/i", False, True)], "the KARIAN said")
    assert idx.matches(ids[0]) is True


def test_guard_cuts_catastrophic_backtracking():
    table = MatcherTable()
    mid = table.matcher_for("/(a+)+$/", False, True)
    table.freeze()
    guard = RegexGuard(per_search_seconds=0.05, total_seconds=1.0)
    started = time.perf_counter()
    assert TextIndex(table, "a" * 30_000 + "b", guard).matches(mid) is False
    assert time.perf_counter() - started < 1.0
    assert guard.cut == {mid: "lore.regex.timeout"}
    assert guard.diagnostics[0].code == "lore.regex.timeout"
    assert guard.diagnostics[0].details == {"key": "/(a+)+$/"}
    # Cut keys are not retried on other texts in the same activation.
    assert TextIndex(table, "aaa", guard).matches(mid) is False


def test_guard_skips_oversized_text():
    table = MatcherTable()
    mid = table.matcher_for("/a/", False, True)
    table.freeze()
    guard = RegexGuard(max_text_chars=10)
    assert TextIndex(table, "a" * 11, guard).matches(mid) is False
    assert guard.cut[mid] == "lore.regex.text_too_long"


@pytest.mark.parametrize(
    ("key", "text"),
    [
        ("/ab\\x01cd/", "ab\x01cd"),
        ("/caf\\u00e9s/i", "CAFés"),
        ("/smile\\u{1F600}/u", "smile😀"),
        ("/line\\cJnext/", "line\nnext"),
        ("/\\p{L}ove/u", "dove"),
        ("/(?<w>ab)\\k<w>/", "abab"),
    ],
)
def test_regex_keys_with_escapes_match_with_and_without_automaton(key, text):
    for automaton in (True, False):
        ids, idx = index_for([(key, False, True)], text, automaton)
        assert idx.matches(ids[0]) is True, (key, automaton)


def test_regex_prefilter_is_not_run_on_text_the_guard_refuses():
    """Issue 18 item 7: the prefilter is a search too. On a text over ``max_text_chars`` the key
    is cut before its literal is looked for, whether or not the literal is there."""
    for text in ("x" * 11, "Kari" + "x" * 7):
        table = MatcherTable()
        mid = table.matcher_for("/\\bKari(?:an)?\\b/i", False, True)
        table.freeze()
        guard = RegexGuard(max_text_chars=10)
        assert TextIndex(table, text, guard).matches(mid) is False
        assert guard.cut == {mid: "lore.regex.text_too_long"}


def test_regex_prefilter_is_not_run_once_the_budget_is_used_up():
    table = MatcherTable()
    mid = table.matcher_for("/\\bKari(?:an)?\\b/i", False, True)
    table.freeze()
    guard = RegexGuard(total_seconds=0.0)
    assert TextIndex(table, "nothing relevant", guard).matches(mid) is False
    assert guard.cut == {mid: "lore.regex.budget_exhausted"}


def test_regex_prefilter_time_is_charged_to_the_guard():
    table = MatcherTable()
    mid = table.matcher_for("/" + "ab" * 998 + "c/", False, True)
    table.freeze()
    guard = RegexGuard(total_seconds=30.0)  # room for a loaded machine: the point is the charge
    assert TextIndex(table, "ab" * 50_000, guard).matches(mid) is False
    assert guard.spent > 0.0 and guard.cut == {}


def test_regex_literal_across_an_automaton_slice_boundary_is_found():
    from roleplay.assets.lorebook.matching import SLICE_CHARS

    text = "x" * (SLICE_CHARS - 3) + "needle" + "x" * 10
    for automaton in (True, False):
        ids, idx = index_for([("/need+le/", False, True), ("/xneedlex/", False, True)], text, automaton)
        assert [idx.matches(i) for i in ids] == [True, True]


def test_automata_that_stop_early_give_the_same_answers(monkeypatch):
    """The automata run in slices and hand over to one linear search per key when their pace is
    pathological (a long repetitive key against a text that repeats it). Forced here with a clock
    that jumps a second per reading, so every pass stops after its first slice."""
    from roleplay.assets.lorebook import matching

    keys = [
        ("sea lion", False, True),
        ("x-ray", False, True),
        ("国王", False, True),
        ("abab", False, False),
        ("ab-ab", False, True),
        ("/\\bKari(?:an)?\\b/i", False, True),
        ("/zebra\\d/", False, True),
        ("/need+le/", False, True),
    ]
    text = ("the sea lion saw an x-ray of 国王, then KARIAN said ab-ab; " * 3 + "zebra7 abab needle ") * 2
    expected = [index_for(keys, text, automaton=False)[1].matches(i) for i in range(len(keys))]
    assert expected == [True, True, True, True, True, True, True, True]
    ticks = iter(range(10**6))
    monkeypatch.setattr(matching, "SLICE_CHARS", 16)
    monkeypatch.setattr(matching.time, "perf_counter", lambda: float(next(ticks)))
    table = MatcherTable()
    ids = [table.matcher_for(*k) for k in keys]
    table.freeze()
    idx = TextIndex(table, text, RegexGuard(total_seconds=1e12))
    assert [idx.matches(i) for i in ids] == expected
    missing = text.replace("KARIAN", "KAR").replace("needle", "nedle")
    idx = TextIndex(table, missing, RegexGuard(total_seconds=1e12))
    assert [idx.matches(i) for i in ids] == [True, True, True, True, True, False, True, False]
