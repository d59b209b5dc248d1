"""InitVar unwrapping, parsing and MVU's merge rules; failures never leave partial data."""

from compat.mvu_support import LILI, entry

from roleplay.compat.mvu.diagnostics import Loc
from roleplay.compat.mvu.initvar import (
    deep_merge,
    greeting_initvar,
    load_initvar,
    unwrap,
)
from roleplay.compat.mvu.sources import read_book

L = Loc("t")


def book(name, entries, role="character"):
    return read_book({"entries": entries}, name=name, source=name, role=role)[0]


def test_xml_wrapper_then_code_fence_are_removed():
    text, loc, notes = unwrap('<initvar>\n```json\n{"from_xml":"ok"}\n```\n</initvar>', L)
    assert text == '{"from_xml":"ok"}' and notes == []
    assert loc.line_offset == 2


def test_one_line_wrapper_is_unwrapped_with_a_warning():
    text, _loc, notes = unwrap('<initvar>{"a":1}</initvar>', L)
    assert text == '{"a":1}' and notes[0].code == "mvu.initvar.single_line_wrapper"


def test_within_a_lorebook_entries_deep_merge_and_arrays_replace():
    b = book(
        "b",
        [
            entry("[initvar]", '{"悠纪":{"喵":"1","喵呜":"2"}, "列表": ["abc","def"]}'),
            entry("[initvar]222", '{"悠纪":{"捏":"3"}, "列表": []}'),
        ],
    )
    result = load_initvar([b], char="c", user="u")
    assert result.ok and result.value == {"悠纪": {"喵": "1", "喵呜": "2", "捏": "3"}, "列表": []}


def test_across_lorebooks_the_merge_is_shallow_and_earlier_books_win():
    first = book("1.2", [entry("[initvar]", '{"悠纪":{"a":1}}')], role="global")
    second = book("1.3", [entry("[initvar]", '{"悠纪":{"杂鱼喵":2}, "新": 1}')], role="character")
    result = load_initvar([second, first], char="c", user="u")
    assert result.value == {"悠纪": {"a": 1}, "新": 1}
    assert [d.code for d in result.diagnostics] == ["mvu.initvar.key_shadowed"]


def test_macros_expand_before_parsing():
    b = book("b", [entry("[initvar]", '{"<user>": {"名字": "{{user}}"}, "c": "{{char}}"}')])
    assert load_initvar([b], char="理", user="牧师").value == {"牧师": {"名字": "牧师"}, "c": "理"}


def test_a_broken_entry_fails_the_whole_result():
    b = book("b", [entry("[initvar]", "a: 1"), entry("[initvar]bad", "a:\n\tb: 1")])
    result = load_initvar([b], char="c", user="u")
    assert not result.ok and result.value == {}
    bad = next(d for d in result.diagnostics if d.code == "mvu.parse.failed")
    assert bad.details["entry"] == "[initvar]bad" and bad.details["line"] == 2


def test_greeting_blocks_merge_and_report_lines():
    text = "hi\n<initvar>\n```yaml\na:\n  b: 1\n```\n</initvar>\n<initvar>\na:\n  c: 2\n</initvar>"
    result = greeting_initvar(text, Loc("g"), char="c", user="u")
    assert result.ok and result.value == {"a": {"b": 1, "c": 2}}
    assert result.lines["/a/b"][0].at(result.lines["/a/b"][1]).line == 5
    assert greeting_initvar("no blocks", Loc("g"), char="c", user="u") is None


def test_deep_merge_does_not_alias_inputs():
    source = {"a": {"b": [1]}}
    merged = deep_merge({}, source)
    merged["a"]["b"].append(2)
    assert source == {"a": {"b": [1]}}


def test_lili_initvar_files_merge(mvu_corpus):
    entries = [
        entry("[initvar]初始变量1", (mvu_corpus / LILI / "[initvar]初始变量1.yaml").read_text("utf-8")),
        entry("[initvar]初始变量2", (mvu_corpus / LILI / "[initvar]初始变量2.yaml").read_text("utf-8")),
    ]
    result = load_initvar([book("理理", entries)], char="理", user="牧师")
    assert result.ok
    assert list(result.value) == ["牧师", "地点", "理", "日期", "天数", "时间"]
    assert result.value["时间"] == ["09:00", "按照进行行动后实际经历的时间进行更新，每次行动后更新，格式为 hh:mm"]


def test_wrapper_and_fence_spans_equal_mvus_regexes_on_tag_soup():
    import random

    from roleplay.compat.mvu.initvar import _FENCE, _XML_WRAPPER, _fence, _xml_wrapper

    rng = random.Random(3)
    pieces = ["<initvar>", "</initvar>", "<INITVAR>", "</Initvar>", "```", "```yaml", "\n", "\n\n", " ", "a: 1", "x"]
    for _ in range(4000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 14)))
        m = _XML_WRAPPER.search(text)
        assert _xml_wrapper(text) == (m.span(1) if m else None), text
        f = _FENCE.search(text)
        assert _fence(text) == (f.span(1) if f else None), text


def test_unwrapping_long_lines_is_linear():
    import time

    for text in ("x" * 50_000 + "\n</initvar>", "```" * 20_000, "<initvar>\n" + "```" * 20_000 + "\n</initvar>"):
        start = time.perf_counter()
        body, _loc, _notes = unwrap(text, Loc("g"))
        # MVU's regexes retry at every offset of the long line (minutes); this bound catches that.
        assert time.perf_counter() - start < 2
        assert body == (text if not text.startswith("<initvar>") else "```" * 20_000)


def test_an_initvar_entry_whose_json_starts_with_a_comment_loads():
    book, _ = read_book(
        {"entries": [entry("[InitVar]", '```json\n// 初始变量\n{"悠纪": {"好感度": [0, "好感"]}}\n```')]}, name="b", source="b"
    )
    result = load_initvar([book], char="c", user="u")
    assert result.ok and result.value == {"悠纪": {"好感度": [0, "好感"]}}
