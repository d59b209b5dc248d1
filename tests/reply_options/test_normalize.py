"""Reading a reply-options answer: lenient about JSON slips, strict about the shape, and the
options cleaned of whitespace, markers, duplicates, over-length text and surplus items."""

from __future__ import annotations

import pytest

from roleplay.errors import RpError
from roleplay.reply_options.normalize import cut, normalize_options, options_from_answer, parse_answer


@pytest.mark.parametrize(
    "text",
    [
        '{"options": ["a", "b"]}',
        '```json\n{"options": ["a", "b"]}\n```',
        '{"options": ["a", "b",]}',  # a trailing comma
        'Here you go: {"options": ["a", "b"]}',  # prose around the object
        '["a", "b"]',  # a bare array of strings
    ],
)
def test_answers_with_json_slips_are_read(text: str) -> None:
    assert parse_answer(text) == ["a", "b"]


@pytest.mark.parametrize("text", ["", "I would say hello.", '{"effects": []}', '{"options": "a"}', "[1, 2]", "x" * 30_000])
def test_answers_of_another_shape_are_invalid(text: str) -> None:
    with pytest.raises(RpError) as exc:
        parse_answer(text)
    assert exc.value.code == "reply_options.invalid"
    assert len(exc.value.details["text"]) <= 500


def test_whitespace_markers_and_non_strings_are_cleaned() -> None:
    raw = ["  我  推开\n门。 ", "1. Knock again", "2) Wait", "- Leave", "• 离开", 3, None, "   ", "", "3 people wave"]
    result = normalize_options(raw, count=8, max_characters=80)
    assert result.options == ["我 推开 门。", "Knock again", "Wait", "Leave", "离开", "3 people wave"]


def test_duplicates_ignore_case_width_and_whitespace() -> None:
    raw = ["Knock again.", "knock  AGAIN.", "Ｋｎｏｃｋ again.", "我推开门", "我 推开 门", "Leave"]
    result = normalize_options(raw, count=8, max_characters=80)
    assert result.options == ["Knock again.", "我推开门", "Leave"] and result.dropped_duplicates == 3


def test_over_length_items_are_cut_and_surplus_items_dropped() -> None:
    long_en = "I walk slowly along the harbour wall, counting the lamps, and wonder who lit them tonight"
    long_zh = "我沿着港口的石墙慢慢走着，一盏一盏地数着灯，心里想着今晚是谁点亮了它们"
    result = normalize_options([long_en, long_zh, "Wait", "Leave", "Sing"], count=3, max_characters=30)
    assert result.options[0] == "I walk slowly along the…" and len(result.options[1]) == 30
    assert result.options[1].endswith("…") and result.options[2] == "Wait"
    assert result.cut == 2 and result.over_count == 2
    assert cut("short", 30) == "short"
    assert cut("abcdefghij klmnopqrstuvwxyz", 12) == "abcdefghij…"  # a space near the cut
    assert cut("abcdefghijklmnopqrstuvwxyz", 12) == "abcdefghijk…"  # none: cut mid-word


def test_an_answer_with_nothing_usable_is_empty() -> None:
    with pytest.raises(RpError) as exc:
        options_from_answer('{"options": ["  ", "", 7]}', count=3, max_characters=80)
    assert exc.value.code == "reply_options.empty"
    assert options_from_answer('{"options": ["a", "A", "b"]}', count=1, max_characters=80) == ["a"]
