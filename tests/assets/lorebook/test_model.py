"""Model: enums, sort keys and lookups that the rest of the package relies on."""

from __future__ import annotations

import pytest

from roleplay.assets.lorebook import Position, SelectiveLogic, Slot, import_lorebook


def test_slot_names_match_the_context_sources():
    assert [s.value for s in Slot] == ["world-description", "character-descriptions", "important-rules"]
    assert [int(x) for x in SelectiveLogic] == [0, 1, 2, 3]
    assert Position.AT_DEPTH == 4 and Position.OUTLET == 7


def test_uid_sort_key_numeric_before_text_and_entry_lookup():
    book = import_lorebook(
        {
            "entries": [
                {"id": "zeta", "keys": [], "content": "", "enabled": True, "insertion_order": 1},
                {"id": 10, "keys": [], "content": "", "enabled": True, "insertion_order": 1},
                {"id": 2, "keys": [], "content": "", "enabled": True, "insertion_order": 1},
            ]
        },
        book_id="m",
    )
    ordered = sorted(book.entries, key=lambda e: e.uid_sort_key())
    assert [e.id for e in ordered] == ["2", "10", "zeta"]
    assert book.entry("zeta").uid == "zeta"
    with pytest.raises(KeyError):
        book.entry("nope")
