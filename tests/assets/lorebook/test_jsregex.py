"""JavaScript regex keys: ST's key form and JavaScript semantics on the ``regex`` engine."""

from __future__ import annotations

import pytest

from roleplay.assets.lorebook.jsregex import (
    JsRegexError,
    compile_js_regex,
    parse_regex_key,
    required_literal,
    split_regex_key,
)


@pytest.mark.parametrize(
    ("key", "form"),
    [
        ("/abc/", ("abc", "")),
        ("/abc/gi", ("abc", "gi")),
        ("/a\\/b/", ("a/b", "")),
        ("/a/b/", None),  # unescaped slash inside: not a regex for ST
        ("/abc/x", None),  # unknown flag
        ("abc", None),
        ("//", None),  # empty pattern
    ],
)
def test_key_form(key, form):
    assert split_regex_key(key) == form


@pytest.mark.parametrize(
    ("key", "text", "expected"),
    [
        ("/hello/i", "HeLLo", True),
        ("/\\bcat\\b/", "concat cat", True),
        ("/\\bcat\\b/", "concat", False),
        ("/\\bé/", "é", False),  # \b and \w are ASCII in JavaScript
        ("/\\w+/", "éé", False),
        ("/\\d/", "٣", False),  # Arabic-Indic digit is not \d in JavaScript
        ("/^a$/", "a\n", False),  # $ is end of input without m
        ("/^a$/m", "b\na\n", True),
        ("/^b$/m", "a\rb", True),  # \r is a line terminator in JavaScript
        ("/a.b/", "a\u2028b", False),
        ("/a.b/s", "a\nb", True),
        ("/[^]/", "x", True),
        ("/[]/", "x", False),
        ("/a{,3}/", "a{,3}", True),  # literal in JavaScript, a quantifier in Python
        ("/[^\\W]/", "a", True),
        ("/[^\\W]/", "!", False),
        ("/[\\W\\d]/", "5", True),
        ("/(?<n>a)\\k<n>/", "aa", True),
        ("/\\u{1F600}/u", "😀", True),
        ("/\\cJ/", "\n", True),
        ("/\\a/", "a", True),  # identity escape
        ("/\\s/", "\u3000", True),  # JavaScript \s includes ideographic space
        ("/国王/", "我是国王", True),
        ("/^x/y", "xa", True),
        ("/a/y", "ba", False),  # sticky: anchored at index 0
    ],
)
def test_javascript_semantics(key, text, expected):
    rx = parse_regex_key(key)
    assert rx is not None
    found = rx.compiled.match(text) if rx.sticky else rx.compiled.search(text)
    assert (found is not None) is expected


@pytest.mark.parametrize("key", ["/(unclosed/", "/a/gg", "/[a/", "/a\\/"])
def test_invalid_patterns_are_not_regex_keys(key):
    assert parse_regex_key(key) is None


def test_compile_error_carries_code():
    with pytest.raises(JsRegexError) as err:
        compile_js_regex("(", "")
    assert err.value.code == "lore.regex.invalid" and "(" in err.value.details["pattern"]


@pytest.mark.parametrize(
    ("pattern", "literal"),
    [
        ("\\bName(?:ian|ite)?\\b", "Name"),
        ("colou?r", "colo"),
        ("a|b", None),
        ("(a|b)cde", "cde"),
        ("foo\\.bar", "foo.bar"),
        ("[abc]xyz", "xyz"),
        ("\\d+apple", "apple"),
        (".*", None),
    ],
)
def test_required_literal_is_sound(pattern, literal):
    assert required_literal(pattern) == literal


def test_required_literal_only_ascii_under_ignore_case():
    assert parse_regex_key("/KaRi/i").required == "kari"
    assert parse_regex_key("/Кот/i").required is None
    assert parse_regex_key("/Кот/").required == "Кот"


@pytest.mark.parametrize(
    ("key", "text"),
    [
        ("/ab\\x01cd/", "ab\x01cd"),
        ("/caf\\u00e9s/", "cafés"),
        ("/smile\\u{1F600}!/u", "smile😀!"),
        ("/line\\cJnext/", "line\nnext"),
        ("/\\p{L}ove/u", "love"),
        ("/(?<w>ab)\\k<w>cd/", "ababcd"),
        ("/tab\\tbed/", "tab\tbed"),
    ],
)
def test_regex_keys_with_escapes_fire_through_the_prefilter(key, text):
    """Issue 10 item 7: the escape's characters are not literal text, so the required literal
    must never contain them (it used to, and the prefilter then skipped a matching regex)."""
    rx = parse_regex_key(key)
    assert rx is not None and rx.compiled.search(text) is not None
    assert rx.required is None or rx.required in text


@pytest.mark.parametrize(
    ("pattern", "flags", "literal"),
    [
        ("ab\\x01cd", "", "ab"),
        ("caf\\u00e9s", "", "caf"),
        ("smile\\u{1F600}!", "u", "smile"),
        ("line\\cJnext", "", "line"),
        ("\\p{L}ove", "u", "ove"),
        ("(?<w>ab)\\k<w>cd", "", "cd"),
        ("\\k<name>", "", None),
    ],
)
def test_required_literal_skips_whole_escapes(pattern, flags, literal):
    assert required_literal(pattern, flags) == literal


@pytest.mark.parametrize(
    ("key", "text", "expected"),
    [
        ("/x\\12y/", "x\ny", True),  # no group 12: a legacy octal escape (Annex B), not "\1" then "2"
        ("/(a)\\1/", "aa", True),  # a real backreference stays one
        ("/(a)\\2/", "a\x02", True),  # only one group: \2 is octal
        ("/(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)(k)(l)\\12/", "abcdefghijkll", True),
        ("/\\101/", "A", True),
        ("/\\0101/", "\x081", True),  # \010 then "1": octal takes at most three digits
        ("/\\8/", "8", True),  # \8 and \9 are identity escapes
        ("/[\\101-\\132]/", "Q", True),  # octal in a class
        ("/[\\101-\\132]/", "q", False),
    ],
)
def test_decimal_escapes_follow_annex_b(key, text, expected):
    """Issue 10 item 7: these keys were not regex keys at all (``\\12`` became a reference to a
    missing group, and octal in a class was refused)."""
    rx = parse_regex_key(key)
    assert rx is not None
    assert (rx.compiled.search(text) is not None) is expected
    assert rx.required is None or rx.required in text or not expected


@pytest.mark.parametrize("key", ["/\\2/u", "/[\\1]/u", "/\\01/u"])
def test_decimal_escapes_without_a_group_are_errors_with_u(key):
    assert parse_regex_key(key) is None
