"""The deterministic token estimate: per-script rules, additivity, no dependence on the process."""

from __future__ import annotations

import subprocess
import sys

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from roleplay.harness.models import tokens
from roleplay.harness.models.tokens import _stats, _total, count_tokens

TEXT = '她轻轻推开门，月光洒在地板上。"Who is there?" he asked, stepping back 2048 paces.\n\n  Привет 🙂'


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("月光洒在地板上", 7),  # one per CJK character
        ("ひらがなカタカナ한국어", 11),
        ("a", 1),  # at least one per word
        ("the cat", 3),  # ceil((6 + 3 * 2) / 4): an upper bound of the per-word sum
        ("stepping", 3),  # ceil((8 + 3) / 4)
        ("Привет", 4),  # another script: ceil((6 + 1) / 2)
        ("2048", 2),  # digits in groups of three
        ("123456", 2),
        ("a\n\nb", 3),  # a line break run is a token, a single space is not
        ("a b", 2),
        ("a,b.", 4),  # punctuation one each
        ("🙂", 2),  # outside the BMP
    ],
)
def test_count_tokens_follows_the_documented_rules(text: str, expected: int) -> None:
    assert count_tokens(text) == expected


def test_count_tokens_scales_with_the_text_and_is_close_to_additive() -> None:
    one = count_tokens(TEXT)
    assert one > 30
    joined = count_tokens(TEXT + "\n\n" + TEXT)
    # Joining texts may merge a word across the seam, never add more than the separator.
    assert joined <= 2 * one + 1
    assert joined >= 2 * one - 2


def test_count_tokens_is_the_same_in_a_fresh_process_with_another_hash_seed() -> None:
    code = f"from roleplay.harness.models.tokens import count_tokens; print(count_tokens({TEXT!r} * 50))"
    out = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={"PYTHONHASHSEED": seed, "PATH": ""}
        ).stdout.strip()
        for seed in ("1", "2")
    }
    assert out == {str(count_tokens(TEXT * 50))}


# Texts that stress the line-by-line count of long texts: words, digit groups and whitespace runs
# at line ends, combining marks and the separators U+001C–U+001F that only ``re`` calls space.
_PIECES = ["lamp", "灯塔", "12", "345", " ", "  ", "\n", "\n\n", "\t", "\x1c", "\u0301", "Ж", "и", "!", "😀", "\u3000", "\r\n", "a"]


@given(st.lists(st.sampled_from(_PIECES), min_size=0, max_size=400), st.integers(min_value=0, max_value=3))
@settings(max_examples=200, deadline=None)
def test_long_texts_count_exactly_as_one_whole_text(pieces: list[str], repeat: int) -> None:
    """A long text is counted per line from a memo; the sum must equal the whole-text rules."""
    text = "".join(pieces) * (1 + repeat)
    text = text + "x\n" * (4096 // 2) + text  # past the length where lines are counted one by one
    assert count_tokens(text) == _total(_stats(text))
    assert count_tokens(text) == _total(_stats(text))  # again, now from the memo


def test_memo_is_bounded() -> None:
    for i in range(tokens._MEMO_LINES + 10):
        count_tokens(f"line {i}")
    assert len(tokens._memo) <= tokens._MEMO_LINES


def test_recent_long_texts_are_remembered_exactly_and_boundedly() -> None:
    """The last few long texts are kept whole: a repeated count equals a fresh one, and the memo
    holds at most ``_RECENT_TEXTS`` texts, none longer than ``_RECENT_MAX_CHARS``."""
    texts = [f"第{i}轮 lamp {i}\n" * 600 for i in range(tokens._RECENT_TEXTS + 3)]
    first = [count_tokens(t) for t in texts]
    assert first == [_total(_stats(t)) for t in texts]
    assert [count_tokens(t) for t in reversed(texts)] == list(reversed(first))
    assert len(tokens._recent) <= tokens._RECENT_TEXTS
    assert count_tokens(texts[-1]) is dict(tokens._recent)[texts[-1]]
    huge = "x\n" * (tokens._RECENT_MAX_CHARS // 2 + 1)
    assert count_tokens(huge) == _total(_stats(huge))
    assert all(known != huge for known, _ in tokens._recent)


def test_a_recent_long_text_is_found_by_identity_or_equal_content_never_by_its_length_alone() -> None:
    """Recent texts are looked up without hashing them: the same object, or an equal copy, gives the
    remembered count; a different text of the same length is counted itself."""
    tokens._recent.clear()
    text = "第1轮 lamp\n" * 800
    first = count_tokens(text)
    copy = "".join(list(text))
    assert copy == text and copy is not text and count_tokens(copy) == first
    twin = text[:-5] + "!!!!\n"  # the same length, another text (and another count)
    assert len(twin) == len(text) and count_tokens(twin) == _total(_stats(twin)) != first
    assert tokens.count_around(text, "", tokens.NO_STATS, "") == first


@given(
    st.lists(st.sampled_from(_PIECES + ["word\n", "\n  indented", "第一行\n", "12 34\n"]), min_size=0, max_size=300),
    st.lists(
        st.tuples(st.integers(min_value=0, max_value=10**6), st.sampled_from(["", " ", "\n", "x", "\n ", "新\n", "\r\n"])), max_size=4
    ),
)
@settings(max_examples=150, deadline=None)
def test_counting_on_from_a_previous_texts_marks_equals_a_fresh_count(pieces: list[str], edits: list[tuple[int, str]]) -> None:
    """A long text is counted on from the last kept mark of a recent text it starts the same as:
    edits and additions at any point (a space or a line end right at a mark included) must give
    the whole-text count."""
    tokens._recent.clear()
    tokens._marked = []
    body = "".join(pieces) + "harbour line\n" * 400  # past the split length, with several marks
    text = body
    assert count_tokens(text) == _total(_stats(text))
    for at, insert in edits:
        cut = at % (len(text) + 1)
        for variant in (text[:cut] + insert, text[:cut] + insert + text[cut:]):
            assert count_tokens(variant) == _total(_stats(variant)), (cut, insert)
        text = text[:cut] + insert + text[cut:]


def test_marks_land_exactly_on_a_line_end() -> None:
    tokens._recent.clear()
    tokens._marked = []
    text = "".join(f"line {i} of the harbour story\n" for i in range(tokens._MARK_EVERY * 6)) + "tail"
    count_tokens(text)
    marks = tokens._marked[-1][1]
    assert len(marks) == 6 and all(text[end - 1] == "\n" for end, _ in marks)
    # The same text cut right at a mark, then followed by a space or a line end: that mark is no
    # longer a place where the count may be cut.
    end = marks[4][0]
    assert end > tokens._SPLIT_FROM
    for following in (" more", "\n\nmore", "", "x"):
        variant = text[:end] + following
        assert count_tokens(variant) == _total(_stats(variant))


@given(
    st.lists(st.lists(st.sampled_from([*_PIECES, "word\n", "[User]\n", "</section>", "\n\n"]), max_size=40), max_size=60),
    st.integers(min_value=0, max_value=2),
)
@settings(max_examples=150, deadline=None)
def test_counting_by_parts_equals_the_whole_text_count(groups: list[list[str]], pad: int) -> None:
    """Parts counted on their own (memoised) add up to the whole text's count wherever the text is
    cut, a cut inside a run included; parts that do not join up to the text are not trusted."""
    parts = ["".join(g) for g in groups] + ["harbour line\n" * 200 * pad]
    text = "".join(parts)
    for _ in range(2):  # the second time from the memo
        tokens._recent.clear()
        assert tokens.count_parts(text, parts) == _total(_stats(text))
    tokens._recent.clear()
    assert tokens.count_parts(text, [*parts, "extra"]) == _total(_stats(text))
    # The whole text is remembered: the same prompt counted again as a request costs nothing.
    assert count_tokens(text) == _total(_stats(text))


# The counter as it was written first: eight ``regex`` passes over the text. ``_stats`` counts the
# same runs from each character's kind with byte-level passes and must give the same figures for
# every text.
_REF_CJK = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}\p{Bopomofo}]")
_REF_LATIN_WORD = regex.compile(r"\p{Latin}+")
_REF_OTHER_WORD = regex.compile(r"(?:(?![\p{Latin}\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}\p{Bopomofo}])\p{L}\p{M}*)+")
_REF_DIGITS = regex.compile(r"\p{Nd}+")
_REF_SPACE_RUN = regex.compile(r"\s{2,}|[^\S ]")
_REF_REST = regex.compile(r"[^\p{L}\p{M}\p{Nd}\s]")
_REF_ASTRAL = regex.compile(r"[^\p{L}\p{M}\p{Nd}\s\x00-\uffff]")


def _reference_stats(text: str) -> tuple[int, ...]:
    latin = _REF_LATIN_WORD.findall(text)
    other = _REF_OTHER_WORD.findall(text)
    return (
        len(_REF_CJK.findall(text)),
        sum(map(len, latin)),
        len(latin),
        sum(map(len, other)),
        len(other),
        sum(-(-len(run) // 3) for run in _REF_DIGITS.findall(text)),
        len(_REF_SPACE_RUN.findall(text)),
        len(_REF_REST.findall(text)) + len(_REF_ASTRAL.findall(text)),
    )


def _chars(*ranges: tuple[int, int]) -> str:
    return "".join(chr(code) for first, last in ranges for code in range(first, last + 1))


# Alphabets where the rules' classes meet: ASCII control characters and every kind of whitespace
# (U+001C-U+001F are whitespace to ``re`` only, U+0085 and U+00A0 to ``regex``), Latin-1, CJK with
# its punctuation, kana marks (CJK and marks at once) and fullwidth forms, characters outside the
# Basic Multilingual Plane (emoji, astral Han, mathematical letters and digits), combining marks
# after letters of every kind, other scripts and their digits, Latin characters that are not
# letters (Roman numerals), and lone surrogates.
_ALPHABETS = [
    _chars((0x00, 0x7F)),
    _chars((0x00, 0x20), (0x7F, 0x7F), (0x85, 0x85), (0xA0, 0xA0), (0x1680, 0x1680), (0x180E, 0x180E), (0x2000, 0x200D))
    + _chars((0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x2060), (0x3000, 0x3000), (0xFEFF, 0xFEFF))
    + " a",
    _chars((0x80, 0xFF)) + "a z",
    _chars((0x3000, 0x30FF), (0x3100, 0x312F), (0x3400, 0x3410), (0x4DB0, 0x4E10), (0x9FF0, 0xA00F), (0xAC00, 0xAC10))
    + _chars((0xD7A0, 0xD7FF), (0xFF00, 0xFF20), (0x20000, 0x20010), (0x2A6D0, 0x2A6E5))
    + "a1 \n",
    _chars((0x1F300, 0x1F320), (0x1F600, 0x1F610), (0x1F3FB, 0x1F3FF), (0x1D400, 0x1D410), (0x1D7CE, 0x1D7D8), (0x10000, 0x10010))
    + _chars((0xE0000, 0xE0002), (0x10FFFD, 0x10FFFF), (0xFE0F, 0xFE0F))
    + "a \u200d",
    _chars((0x0300, 0x0310), (0x0363, 0x0366), (0x0483, 0x0489), (0x064B, 0x0652), (0x0900, 0x0903), (0x093C, 0x093C))
    + _chars((0x1AB0, 0x1AB3), (0x20D0, 0x20D3), (0x302A, 0x302F), (0x3099, 0x309A), (0xFE20, 0xFE23))
    + "aeЖиبتक中ア1 ",
    _chars((0x0391, 0x03A0), (0x0410, 0x0420), (0x0627, 0x0630), (0x0660, 0x0669), (0x0915, 0x0920), (0x0966, 0x096F))
    + _chars((0x0E01, 0x0E10), (0x2160, 0x2170), (0x00AA, 0x00AA), (0x02B0, 0x02B5), (0xFF10, 0xFF19), (0x1D00, 0x1D05))
    + "ab 12",
    _chars((0xD800, 0xD802), (0xDBFF, 0xDC01), (0xDFFF, 0xDFFF)) + "a中😀 ",
]
_ANY_CHAR = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=())
_TEXTS = st.one_of(
    st.text(_ANY_CHAR, max_size=60),
    *(st.text(st.sampled_from(alphabet), max_size=60) for alphabet in _ALPHABETS),
    st.text(st.one_of(_ANY_CHAR, *(st.sampled_from(alphabet) for alphabet in _ALPHABETS)), max_size=60),
)
# Mostly English with a few other characters, and mostly other characters: texts not all ASCII
# are read by one way or another depending on how much of them is ASCII.
_PROSE = st.lists(
    st.one_of(
        st.sampled_from(["The", " ", "lamp", "keeper's", "harbour", ",", ".", "\n", "\n\n", "  ", "\t", "2048", "x"]),
        st.sampled_from("“”’—…éü中文の😀\u0301\u3000\x85\xa0"),
        st.text(st.sampled_from(_ALPHABETS[5] + _ALPHABETS[3]), max_size=4),
    ),
    max_size=200,
).map("".join)


def _forget(text: str) -> None:
    """Drop the kinds learned for ``text``'s characters, so that ``_stats`` looks them up again."""
    for char in set(text):
        if not char.isascii():
            tokens._KIND_OF[ord(char)] = 0


@given(st.one_of(_TEXTS, _PROSE))
@settings(max_examples=1500, deadline=None)
def test_stats_equal_the_regex_passes_for_every_text(text: str) -> None:
    expected = _reference_stats(text)
    _forget(text)
    assert _stats(text) == expected  # the characters' kinds learned on the way
    assert _stats(text) == expected  # and looked up
    assert all(type(figure) is int for figure in _stats(text))


@given(_TEXTS, _TEXTS, _TEXTS)
@settings(max_examples=300, deadline=None)
def test_stats_equal_the_regex_passes_where_texts_meet(a: str, b: str, c: str) -> None:
    """Runs across the seams of pieces from different alphabets, and the pieces repeated into a
    text long enough that its mostly ASCII or mostly other characters decide how it is read."""
    for text in (a + b + c, (a + b) * 40 + c, "lamp light " * 30 + a + b + c):
        assert _stats(text) == _reference_stats(text)


def test_stats_equal_the_regex_passes_for_every_code_point() -> None:
    """Every code point, each between two "#" (which end every run) and among its neighbours."""
    for first in range(0, 0x110000, 0x8000):
        chars = "".join(map(chr, range(first, first + 0x8000)))
        for text in ("#".join(chars), chars):
            assert _stats(text) == _reference_stats(text), hex(first)


def test_the_kinds_groups_partition_the_characters() -> None:
    """A character's kind has one group: no code point is two of a letter, a mark, a decimal digit
    and whitespace (``regex``'s tables)."""
    everything = "".join(map(chr, range(0x110000)))
    groups = [set(regex.findall(pattern, everything)) for pattern in (r"\p{L}", r"\p{M}", r"\p{Nd}", r"\s")]
    for i, one in enumerate(groups):
        for other in groups[i + 1 :]:
            assert not one & other
