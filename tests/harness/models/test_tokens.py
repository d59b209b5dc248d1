"""The deterministic token estimate: per-script rules, additivity, no dependence on the process."""

from __future__ import annotations

import subprocess
import sys

import pytest
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
    assert count_tokens(texts[-1]) is tokens._recent[texts[-1]]
    huge = "x\n" * (tokens._RECENT_MAX_CHARS // 2 + 1)
    assert count_tokens(huge) == _total(_stats(huge))
    assert huge not in tokens._recent


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
