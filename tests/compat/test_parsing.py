"""The YAML 1.2 → JSON5 → json-repair chain, its bounded repairs and its diagnostics."""

import pytest

from roleplay.compat.mvu.diagnostics import Loc
from roleplay.compat.mvu.parsing import (
    ParseFailure,
    load_yaml,
    normalize_json_punctuation,
    parse_data,
    resolve_plain_scalar,
)

L = Loc("t")


def ok(text, **kw):
    parsed = parse_data(text, L, **kw)
    assert parsed.ok, parsed.diagnostics
    return parsed


def test_yaml_core_schema_keeps_times_dates_and_yes_as_strings():
    value = ok("当前时间: 10:45\n日期: 2024-04-08\n完整: 2024-04-08 10:45\n开关: yes\n十六: 0x10\n八: 0o17\n下划线: 1_000\n空: ~\n").value
    assert value == {
        "当前时间": "10:45",
        "日期": "2024-04-08",
        "完整": "2024-04-08 10:45",
        "开关": "yes",
        "十六": 16,
        "八": 15,
        "下划线": "1_000",
        "空": None,
    }


@pytest.mark.parametrize(
    "text,expected", [("true", True), ("False", False), ("12", 12), ("-3.5", -3.5), ("1e3", 1000.0), ("null", None), ("abc", "abc")]
)
def test_plain_scalar_resolution(text, expected):
    assert resolve_plain_scalar(text) == expected


def test_explicit_str_tag_and_quotes_keep_text():
    assert ok("a: !!str 10\nb: '10'\n").value == {"a": "10", "b": "10"}


def test_merge_keys_and_non_ascii_anchors():
    value = ok("锚:\n  - &分隔符\n    启用: false\n    顺序: 1\n条目:\n  <<: *分隔符\n  顺序: 2\n").value
    assert value["条目"] == {"启用": False, "顺序": 2}


def test_repeated_groups_merge_recursively_with_a_warning():
    parsed = ok("白娅:\n  依存度: 35\n白娅:\n  着装: 无\n")
    assert parsed.value == {"白娅": {"依存度": 35, "着装": "无"}}
    assert [d.code for d in parsed.diagnostics] == ["mvu.parse.duplicate_key_merged"]


def test_conflicting_repeated_keys_fail_with_the_line():
    parsed = parse_data("a: 1\nb: 2\na: 3\n", L)
    assert not parsed.ok and parsed.value is None
    assert parsed.diagnostics[0].code == "mvu.parse.failed" and parsed.diagnostics[0].details["line"] == 3


def test_yaml_errors_are_errors_not_partial_documents():
    parsed = parse_data("a:\n\tb: 1\n", L)
    assert not parsed.ok
    assert parsed.diagnostics[0].details["line"] == 2


def test_fullwidth_colon_after_a_key_is_a_bounded_repair():
    parsed = ok("白娅：\n  依存度: 35\n")
    assert parsed.value == {"白娅": {"依存度": 35}}
    assert parsed.diagnostics[0].code == "mvu.parse.fullwidth_normalized"


def test_json5_handles_community_json():
    assert ok("{foo: 'bar', count: 2, items: [1, 2,],}").value == {"foo": "bar", "count": 2, "items": [1, 2]}
    assert ok('{"a": 1, // comment\n "b": 2}').method == "json5"


def test_json_repair_fixes_missing_commas_and_brackets_with_a_warning():
    parsed = ok('{"a": 1\n "b": 2}')
    assert parsed.value == {"a": 1, "b": 2} and parsed.method == "json-repair"
    assert parsed.diagnostics[0].code == "mvu.parse.repaired"
    assert ok('{"好感度": [0 "描述"]}').value == {"好感度": [0, "描述"]}
    assert ok('{"a": {"b": 1').value == {"a": {"b": 1}}


def test_fullwidth_json_punctuation_and_chinese_quotes():
    assert ok('{"a"：1，"b"：2}').value == {"a": 1, "b": 2}
    assert ok("{“a”: “x”}").value == {"a": "x"}
    # Inside an ASCII string the characters are content.
    assert normalize_json_punctuation('{"a": "x，y：z"}') == '{"a": "x，y：z"}'


def test_non_finite_numbers_and_wrong_top_level_are_refused():
    assert not parse_data("a: .inf\n", L).ok
    assert not parse_data("{a: NaN}", L).ok
    assert not parse_data("- 1\n- 2\n", L).ok
    assert parse_data("- 1\n- 2\n", L, want="array-or-object").value == [1, 2]


def test_prose_is_not_repaired_into_data():
    parsed = parse_data("just some words", L)
    assert not parsed.ok and parsed.diagnostics[0].code == "mvu.parse.failed"


def test_bom_and_document_marker():
    assert ok("\ufeff---\n变量: 1\n").value == {"变量": 1}


def test_alias_bombs_and_recursion_are_bounded():
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n" for p, c in zip("abcdef", "bcdefg")
    )
    assert not parse_data(bomb, L).ok
    with pytest.raises(ParseFailure):
        load_yaml("a: &x\n  b: *x\n", L)


def test_line_map_points_at_each_value():
    parsed = ok("世界:\n  时间: 1\n  地点: x\n")
    assert parsed.lines["/世界/地点"] == 3


def test_json_opening_with_a_comment_is_read_as_json5_after_yaml():
    parsed = ok('// 初始变量\n{"悠纪": {"好感度": 5}, "列表": [1, 2,]}')
    assert parsed.value == {"悠纪": {"好感度": 5}, "列表": [1, 2]} and parsed.method == "json5"
    parsed = ok('/**\n * 变量初始化\n */\n{\n  "世界": {"时间": "10:45"}\n}')
    assert parsed.value == {"世界": {"时间": "10:45"}} and parsed.method == "json5"
    # Not JSON either: the YAML error (with its line) is what the author sees.
    failed = parse_data("// note\na:\n\tb: 1\n", L)
    assert not failed.ok and failed.diagnostics[0].message.startswith("YAML") and failed.diagnostics[0].details["line"] == 2


def test_an_integer_past_pythons_digit_limit_is_refused_not_raised():
    parsed = parse_data("a: " + "1" * 5000, L)
    assert not parsed.ok and "finite" in parsed.diagnostics[0].message


def test_fullwidth_key_repair_is_linear_and_unchanged_on_blank_line_runs():
    import random
    import re
    import time

    from roleplay.compat.mvu.parsing import normalize_fullwidth_yaml

    original = re.compile(r"^(\s*(?:- )?[^\s#:：'\"{}\[\],][^:：\n]*?)：(?=\s|$)", re.MULTILINE)
    rng = random.Random(2)
    pieces = ["\n", " ", "\t", "\u3000", "- ", "键", "：", ":", "#", "x", "\r", "\u2028"]
    for _ in range(4000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 14)))
        assert normalize_fullwidth_yaml(text) == original.sub(r"\1:", text), repr(text)
    start = time.perf_counter()
    assert normalize_fullwidth_yaml("\n" * 100_000 + "键： 值") == "\n" * 100_000 + "键: 值"
    assert time.perf_counter() - start < 2  # the \s* form takes minutes here


def test_deep_or_long_broken_json_is_reported_not_repaired():
    import time

    start = time.perf_counter()
    for text in ("{```" * 10_000, "{好感度_.add('a', 1);" * 300, "[" + "x" * 70_000):
        parsed = parse_data(text, L)
        assert not parsed.ok and parsed.diagnostics[0].code == "mvu.parse.failed"
    assert time.perf_counter() - start < 3  # json-repair takes several seconds on each
    assert ok('{"a": 1 "b": 2}').method == "json-repair"  # small documents are still repaired
