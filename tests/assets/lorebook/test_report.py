"""Activation result helpers: slot layout, outlets, explanations."""

from __future__ import annotations

import pytest

from roleplay.assets.lorebook import LoreEngine, Slot, TurnInput, import_lorebook


def engine():
    book = import_lorebook(
        {
            "entries": {
                "0": {"uid": 0, "key": ["x"], "content": "a", "order": 5, "position": 1},
                "1": {"uid": 1, "key": ["x"], "content": "b", "order": 1, "position": 1},
                "2": {"uid": 2, "key": ["x"], "content": "", "position": 0},
                "3": {"uid": 3, "key": ["x"], "content": "o", "position": 7, "outletName": "Map"},
                "4": {"uid": 4, "key": ["nope"], "content": "n", "disable": True},
                "5": {"uid": 5, "key": ["nope"], "content": "n"},
            }
        },
        book_id="b",
    )
    return LoreEngine([book])


def test_slots_sorted_by_order_and_skip_empty_and_outlets():
    result = engine().activate(TurnInput(run_id="r", messages=["x"]))
    slots = result.slots()
    assert set(slots) == set(Slot)
    assert [a.content for a in slots[Slot.CHARACTER_DESCRIPTIONS]] == ["b", "a"]  # ascending order
    assert slots[Slot.WORLD_DESCRIPTION] == ()  # empty content is not injected
    assert "2" in [a.entry_id for a in result.activated]  # ... but it did activate
    assert {k: [a.content for a in v] for k, v in result.outlets().items()} == {"Map": ["o"]}


def test_report_covers_every_entry_and_serialises():
    result = engine().activate(TurnInput(run_id="r", messages=["x"]))
    report = result.report()
    assert [d.entry_id for d in report] == ["2", "3", "4", "5", "0", "1"]  # scan order: order desc, uid
    reasons = {d.entry_id: (d.activated, d.reason) for d in report}
    assert reasons["4"] == (False, "disabled") and reasons["5"] == (False, "no_match")
    assert result.explain("b", "0").to_dict() == {
        "bookId": "b",
        "entryId": "0",
        "activated": True,
        "reason": "key",
        "sweep": 1,
        "details": {"key": "x"},
    }
    with pytest.raises(KeyError):
        result.explain("b", "missing")
