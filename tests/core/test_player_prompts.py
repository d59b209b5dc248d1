"""How a continuation joins the reply it extends."""

from __future__ import annotations

import pytest

from roleplay.core.player_prompts import CONTINUE_INPUT, CONTINUE_MARK, IMPERSONATE_MARK, IMPERSONATE_SYSTEM, join_continuation


@pytest.mark.parametrize(
    ("before", "after", "joined"),
    [
        ("She turned to the", "window and waited.", "She turned to the window and waited."),  # cut mid-sentence
        ("She waited.", "The fog lifted.", "She waited.\n\nThe fog lifted."),  # a finished sentence: a new paragraph
        ("“Stay,” she said.”", "Then silence.", "“Stay,” she said.”\n\nThen silence."),
        ("她转过身，望向", "窗外的雾。", "她转过身，望向窗外的雾。"),  # CJK: no space
        ("她笑了。", "灯又亮了。", "她笑了。\n\n灯又亮了。"),
        ("He said", ", quietly, no.", "He said, quietly, no."),
        ("Line one\n", "line two", "Line one\nline two"),  # whitespace given either side is kept
        ("", "only", "only"),
        ("only", "", "only"),
    ],
)
def test_join_continuation(before: str, after: str, joined: str) -> None:
    assert join_continuation(before, after) == joined


def test_the_marks_open_the_texts_the_demo_and_the_fake_server_recognise() -> None:
    assert CONTINUE_INPUT.startswith(CONTINUE_MARK)
    assert IMPERSONATE_SYSTEM.startswith(IMPERSONATE_MARK)
    assert "{{user}}" in IMPERSONATE_SYSTEM and "{{char}}" in IMPERSONATE_SYSTEM  # expanded per story
