"""Prompt-only conversation rewrites (roleplay.core.prompt_history): roles, SillyTavern's depth,
transformers in registration order, nothing else touched."""

from __future__ import annotations

from typing import Any

import pytest

from roleplay.core.conversation import Entry
from roleplay.core.profile import SessionProfile
from roleplay.core.prompt_history import PromptHistory, prompt_history

pytestmark = pytest.mark.anyio


async def test_transformers_see_role_and_depth_with_the_current_input_at_zero() -> None:
    entries = [Entry("m1", "writing", "opening"), Entry("m2", "user", "hi"), Entry("m3", "non-writing", "note")]
    seen: list[tuple[str, str, int]] = []

    async def tag(history: PromptHistory, reader: Any) -> None:
        history.rewrite(lambda text, role, depth: seen.append((text, role, depth)) or f"{text}@{depth}")  # type: ignore[func-returns-value]

    async def upper(history: PromptHistory, reader: Any) -> None:
        history.rewrite(lambda text, role, depth: text.upper())

    profile = SessionProfile.model_validate({})
    out = await prompt_history([tag, upper], entries, "go", profile, reader=None)  # type: ignore[arg-type]
    assert seen == [("go", "user", 0), ("note", "assistant", 1), ("hi", "user", 2), ("opening", "assistant", 3)]  # newest first
    assert [e.text for e in out.entries] == ["OPENING@3", "HI@2", "NOTE@1"] and out.current_input == "GO@0"
    assert [(e.message_id, e.speaker) for e in out.entries] == [("m1", "writing"), ("m2", "user"), ("m3", "non-writing")]
    assert entries[0].text == "opening"  # the caller's entries are untouched
    none = await prompt_history([], entries, "go", profile, reader=None)  # type: ignore[arg-type]
    assert none.entries == entries and none.current_input == "go" and none.diagnostics == []
