"""The player's draft in ``rp play``: inserting at the cursor the quick reply setting names."""

from __future__ import annotations

import pytest

from roleplay.core.play_draft import Draft


def test_insert_places_the_cursor_at_the_end_the_start_or_selects_the_text() -> None:
    end = Draft()
    end.insert("你好。")
    end.insert("我来了。")
    assert (end.text, end.shown()) == ("你好。我来了。", "你好。我来了。|")

    start = Draft()
    start.insert("你好。", "start")
    start.insert("嗯，")
    assert start.shown() == "嗯，|你好。"

    select = Draft()
    select.insert("你好。", "select")
    assert select.shown() == "[你好。]"
    select.insert("再见。")  # typing over a selection replaces it
    assert select.shown() == "再见。|"


@pytest.mark.parametrize("cursor", ["end", "start", "select"])
def test_a_snippet_goes_over_the_selection_and_clear_empties_the_draft(cursor: str) -> None:
    draft = Draft("ab", 1, 1)
    draft.insert("XY", cursor)  # type: ignore[arg-type]
    assert draft.text == "aXYb"
    draft.clear()
    assert (draft.text, draft.start, draft.end, draft.shown()) == ("", 0, 0, "|")
