"""Prompt section assembly: order, overrides, tool sections, snapshot hash."""

from __future__ import annotations

import pytest

from roleplay.canonical import sha256_hex
from roleplay.errors import ValidationError
from roleplay.harness.prompts import PromptAssembly, PromptContext, PromptSection, tool_sections
from roleplay.harness.tools import Tool


def ctx(*tools: str) -> PromptContext:
    return PromptContext("ses", frozenset(tools), {"mode": "chat"})


def test_sections_are_ordered_by_order_then_registration() -> None:
    a = PromptAssembly(
        [PromptSection("rules", "Rules.", 100), PromptSection("identity", "You are X.", 0), PromptSection("rules2", "More rules.", 100)]
    )
    out = a.assemble(ctx())
    assert out.section_ids == ["identity", "rules", "rules2"]
    assert out.text == "You are X.\n\nRules.\n\nMore rules."
    assert out.hash == sha256_hex(out.text)


def test_override_keeps_position_and_empty_sections_drop() -> None:
    a = PromptAssembly([PromptSection("identity", "A", 0), PromptSection("rules", "B", 100)])
    a.add(PromptSection("identity", "Roleplay identity", 0))
    a.add(PromptSection("dynamic", lambda c: f"mode={c.extra['mode']}", 50))
    a.add(PromptSection("blank", lambda c: None, 60))
    out = a.assemble(ctx())
    assert out.section_ids == ["identity", "dynamic", "rules"] and out.text.startswith("Roleplay identity\n\nmode=chat")


def test_tool_sections_follow_tool_visibility() -> None:
    tools = [Tool("dice", "", {"type": "object"}, lambda a, c: "", guidance="Roll dice with dice.")]
    a = PromptAssembly([PromptSection("identity", "Hi", 0), *tool_sections(tools)])
    assert a.assemble(ctx("dice")).section_ids == ["identity", "tool:dice"]
    hidden = a.assemble(ctx())
    assert hidden.section_ids == ["identity"] and "dice" not in hidden.text
    assert a.assemble(ctx("dice")).hash != hidden.hash


def test_same_input_same_hash_and_copy_is_independent() -> None:
    a = PromptAssembly([PromptSection("x", "X", 0)])
    b = a.copy()
    b.add(PromptSection("y", "Y", 1))
    assert a.assemble(ctx()).hash == PromptAssembly([PromptSection("x", "X", 0)]).assemble(ctx()).hash
    assert a.ids() == ["x"] and b.ids() == ["x", "y"]
    with pytest.raises(ValidationError):
        a.add(PromptSection("", "nothing"))
