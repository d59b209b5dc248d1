"""Diagnostic construction: severity and every source location travel in the Problem."""

from roleplay.compat.mvu.diagnostics import (
    Loc,
    column_of,
    diag,
    has_errors,
    line_of,
    severity,
)


def test_diag_carries_severity_source_entry_line_and_pointer():
    loc = Loc("card", "/data/character_book/entries/3/content", "[initvar]变量")
    problem = diag("mvu.parse.failed", "bad", loc.at(4, 2), "warning", extra=1)
    assert problem.code == "mvu.parse.failed"
    assert problem.pointer == "/data/character_book/entries/3/content"
    assert problem.details == {"severity": "warning", "source": "card", "entry": "[initvar]变量", "line": 4, "column": 2, "extra": 1}
    assert severity(problem) == "warning"


def test_shifted_locations_map_block_lines_back_to_the_source():
    inner = Loc("greeting").shifted(10)
    assert diag("x", "m", inner.at(2)).details["line"] == 12
    assert diag("x", "m", inner.shifted(5).at(1)).details["line"] == 16


def test_errors_are_detected_by_severity_only():
    assert not has_errors([diag("a", "m", Loc(), "info"), diag("b", "m", Loc(), "warning")])
    assert has_errors([diag("a", "m", Loc())])


def test_line_and_column_are_one_based():
    text = "ab\ncd\nef"
    assert line_of(text, 0) == 1 and line_of(text, 4) == 2 and line_of(text, 7) == 3
    assert column_of(text, 4) == 2


def test_capped_keeps_the_first_diagnostics_and_counts_the_rest():
    from roleplay.compat.mvu.diagnostics import capped

    many = [diag("mvu.x", str(i), Loc("g"), "warning" if i % 2 else "error") for i in range(250)]
    kept = capped(many)
    assert len(kept) == 100 and kept[:99] == many[:99]
    assert kept[-1].code == "mvu.diagnostics.truncated" and kept[-1].details["omitted"] == 151
    assert kept[-1].details["severity"] == "error"
    assert capped(many[:100]) == many[:100]
