"""The linear scanners return exactly what MVU's backtracking regular expressions return."""

import random
import re

from roleplay.compat.mvu.commands import PATCH_BLOCK
from roleplay.compat.mvu.detect import EJS_TAG, INITVAR_BLOCK
from roleplay.compat.mvu.scan import LineIndex, ejs_tags, find_blocks, paren_closes, simple_spans

PIECES = [
    "<jsonpatch>",
    "</jsonpatch>",
    "<JSON_PATCH>",
    "</json_patch>",
    "<Json_Patch>",
    "</JSON_patch>",
    "<jſonpatch>",
    "</jſonpatch>",
    "<initvar>",
    "</initvar>",
    "<INITVAR>",
    "</İnitvar>",
    "<İNITVAR>",
    "```",
    "``",
    "\n",
    " ",
    "\t",
    "x",
    "{",
    "}",
    "_",
    "-",
    "%",
    "<%",
    "%>",
    "<%-",
    "-%>",
    "_%>",
    "<%=",
    "(",
    ")",
    "'",
    '"',
    "`",
    "\\",
    ";",
    "_.set(",
    "<status_current_variable>",
    "</status_current_variables>",
]


def soup(rng, size):
    return "".join(rng.choice(PIECES) for _ in range(rng.randint(0, size)))


def reference_closes(text, start):
    """MVU's findMatchingCloseParen, one scan per origin (the quadratic original)."""
    depth, quote = 1, None
    for i in range(start, len(text)):
        ch = text[i]
        if ch in "\"'`" and (i == 0 or text[i - 1] != "\\"):
            if quote is None:
                quote = ch
            elif ch == quote:
                quote = None
        if quote is None:
            if ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
                if depth == 0:
                    return i
    return -1


def test_block_scanner_matches_the_patch_and_initvar_regexes():
    rng = random.Random(20261202)
    for _ in range(4000):
        text = soup(rng, 24)
        for regex, name, tempered in ((PATCH_BLOCK, "json_?patch", True), (INITVAR_BLOCK, "initvar", False)):
            expected = [(m.start(), m.end(), m.start(2), m.end(2)) for m in regex.finditer(text)]
            got = [(b.start, b.end, b.body_start, b.body_end) for b in find_blocks(text, name, tempered=tempered)]
            assert got == expected, text


def test_simple_spans_match_lazy_block_regexes():
    rng = random.Random(7)
    for _ in range(3000):
        text = soup(rng, 20)
        expected = [m.span() for m in re.finditer(r"<(json_?patch)>[\s\S]*?</\1>", text, re.IGNORECASE)]
        assert simple_spans(text, "", "", backref="json_?patch") == expected, text
        expected = [m.span() for m in re.finditer(r"<status_current_variables?>[\s\S]*?</status_current_variables?>", text, re.IGNORECASE)]
        assert simple_spans(text, "<status_current_variables?>", "</status_current_variables?>") == expected, text


def test_one_pass_paren_matching_equals_a_scan_per_command():
    rng = random.Random(11)
    for _ in range(3000):
        text = soup(rng, 30)
        origins = [m.end() for m in re.finditer(r"_\.set\(", text)]
        assert paren_closes(text, origins) == {o: reference_closes(text, o) for o in origins}, text


def test_ejs_tags_match_the_ejs_regex():
    rng = random.Random(5)
    for _ in range(3000):
        text = soup(rng, 20)
        expected = [(m.start(), m.end(), m.start(1), m.end(1)) for m in EJS_TAG.finditer(text)]
        assert list(ejs_tags(text)) == expected, text


def test_line_index_counts_like_str_count():
    text = "a\nb\n\nc"
    index = LineIndex(text)
    assert [index.line(i) for i in range(len(text) + 1)] == [text.count("\n", 0, i) + 1 for i in range(len(text) + 1)]
