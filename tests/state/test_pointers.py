"""JSON Pointer handling used for every State path."""

from __future__ import annotations

import pytest

from roleplay.state.pointers import (
    MISSING,
    PointerError,
    format_pointer,
    is_prefix,
    lookup,
    parse_pointer,
    related,
    remove_at,
    replace_at,
)


def test_parse_unescapes_tokens_and_keeps_unicode():
    assert parse_pointer("/characters/李钰/好感度") == ("characters", "李钰", "好感度")
    assert parse_pointer("/a~1b/c~0d") == ("a/b", "c~d")
    assert parse_pointer("") == ()
    assert parse_pointer("/") == ("",)


@pytest.mark.parametrize("bad", ["a", "a/b", "/x~2", "/x~", 3, None])
def test_parse_rejects_malformed(bad):
    with pytest.raises(PointerError):
        parse_pointer(bad)


def test_format_round_trips():
    parts = ("a/b", "c~d", "李钰", "0")
    assert parse_pointer(format_pointer(parts)) == parts


def test_lookup_distinguishes_missing_from_null():
    value = {"a": None, "l": [1, {"x": 2}]}
    assert lookup(value, ("a",)) is None
    assert lookup(value, ("b",)) is MISSING
    assert lookup(value, ("l", "1", "x")) == 2
    assert lookup(value, ("l", "2")) is MISSING
    assert lookup(value, ("l", "01")) is MISSING  # leading zeros are not indices
    assert lookup(value, ("l", "-")) is MISSING
    assert lookup(value, ("a", "x")) is MISSING  # through a scalar


def test_prefix_and_related():
    assert is_prefix((), ("a",))
    assert is_prefix(("a",), ("a", "b"))
    assert not is_prefix(("a", "b"), ("a",))
    assert related(("a", "b"), ("a",)) and related(("a",), ("a",))
    assert not related(("a", "b"), ("a", "c"))


def test_replace_and_remove_copy_only_the_path():
    shared = {"deep": [1, 2]}
    value = {"a": {"b": 1}, "other": shared, "l": [0, 1]}
    new = replace_at(value, ("a", "b"), 2)
    assert new == {"a": {"b": 2}, "other": shared, "l": [0, 1]}
    assert value["a"]["b"] == 1
    assert new["other"] is shared
    assert replace_at(value, ("l", "1"), 9)["l"] == [0, 9] and value["l"] == [0, 1]
    assert replace_at(value, (), 5) == 5
    removed = remove_at(value, ("a", "b"))
    assert removed["a"] == {} and value["a"] == {"b": 1}
    assert remove_at(value, ("l", "0"))["l"] == [1] and value["l"] == [0, 1]
