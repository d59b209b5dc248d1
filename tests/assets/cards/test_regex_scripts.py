"""Which card regex scripts change the page and which the prompt (roleplay.assets.cards.regex_scripts),
as SillyTavern's flags say; the replacement and the guard are tested with the page
(tests/web/test_ui_display_scripts.py) and the prompt (tests/assets/cards/test_feature.py)."""

from __future__ import annotations

from typing import Any

from roleplay.assets.cards.regex_scripts import display_scripts, has_regex_scripts, prompt_scripts


def script(name: str, **flags: Any) -> dict[str, Any]:
    return {"scriptName": name, "findRegex": "/x/g", "replaceString": name, "placement": [1, 2], **flags}


def test_markdown_only_is_the_page_prompt_only_the_prompt_and_neither_both() -> None:
    card = {"extensions": {"regex_scripts": [script("page", markdownOnly=True), script("prompt", promptOnly=True), script("both"),
                                             script("off", disabled=True, promptOnly=True)]}}  # fmt: skip
    assert [s.name for s in display_scripts(card).scripts] == ["page", "both"]
    assert [s.name for s in prompt_scripts(card).scripts] == ["prompt", "both"]
    assert prompt_scripts(card).apply("x", "user", 0) == "prompt"  # in order: the second finds no "x" left
    assert has_regex_scripts(card) and not has_regex_scripts({"extensions": {}}) and not has_regex_scripts(None)


def test_depth_and_side() -> None:
    card = {"extensions": {"regex_scripts": [script("old replies", placement=[2], minDepth=2, maxDepth=3)]}}
    scripts = prompt_scripts(card)
    assert [scripts.apply("x", "assistant", d) for d in range(5)] == ["x", "x", "old replies", "old replies", "x"]
    assert scripts.apply("x", "user", 2) == "x"
