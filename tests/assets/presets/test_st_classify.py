"""Deterministic classification and macro scanning for the SillyTavern migration."""

from __future__ import annotations

from roleplay.assets.presets.st_classify import classify_prompt, find_macros, macro_handling, macro_name


def test_builtin_prompts_are_narrative_whatever_they_say():
    cls = classify_prompt("jailbreak", "文风", "文风 文笔 修辞 比喻 节奏")
    assert (cls.responsibility, cls.rule) == ("narrative", "builtin")


def test_name_rules_narrative_wins_over_expressive():
    assert classify_prompt("x", "文风设定", "").responsibility == "expressive"
    assert classify_prompt("x", "Prose Style", "").responsibility == "expressive"
    mixed = classify_prompt("x", "文风与格式", "")
    assert (mixed.responsibility, mixed.rule) == ("narrative", "name")
    assert classify_prompt("x", "COT thinking", "").rule == "name"


def test_ascii_terms_match_whole_words_only():
    # "cot" must not fire inside "Cottage", nor "tone" inside "Stonehenge".
    cls = classify_prompt("x", "Cottage at Stonehenge", "")
    assert (cls.responsibility, cls.rule) == ("narrative", "default")


def test_content_score_needs_three_hits_and_a_two_to_one_margin():
    expressive = classify_prompt("x", "杂项", "句式要短，修辞克制，比喻少用，注意节奏。")
    assert (expressive.responsibility, expressive.rule) == ("expressive", "content")
    assert expressive.expressive_hits == 4 and expressive.narrative_hits == 0
    too_few = classify_prompt("x", "杂项", "句式要短，修辞克制。")
    assert too_few.responsibility == "narrative"
    balanced = classify_prompt("x", "杂项", "句式要短，修辞克制，比喻少用。必须推进剧情，禁止替用户说话。")
    assert balanced.responsibility == "narrative" and balanced.narrative_hits >= 2


def test_classification_is_deterministic():
    args = ("id", "Misc", "Use vivid imagery, varied sentence rhythm and a warm tone. Keep metaphors fresh.")
    assert {classify_prompt(*args) for _ in range(5)} == {classify_prompt(*args)}
    assert classify_prompt(*args).responsibility == "expressive"


def test_macro_names_and_counts():
    text = "{{char}} 对 {{ User }} 说：{{random::甲::乙}} {{setvar::好感::1}}{{// 注释}} <USER> <bot> {{char}}"
    assert find_macros(text) == {"char": 2, "user": 1, "random": 1, "setvar": 1, "//": 1, "<user>": 1, "<bot>": 1}
    assert macro_name("roll 1d20") == "roll" and macro_name("random:a,b") == "random"


def test_only_identity_macros_are_kept():
    assert macro_handling("char") == "kept" and macro_handling("user") == "kept"
    for name in ("random", "setvar", "getvar", "time", "<user>", "persona"):
        assert macro_handling(name) == "unsupported"
