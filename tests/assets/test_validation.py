"""Shared validation helpers (roleplay.assets.validation)."""

from __future__ import annotations

import pytest

from roleplay.assets.validation import NAME_MAX, AssetModel, Name, Text, clean_label, parse_model, rebuild, text_problem
from roleplay.errors import ValidationError

Title = Name()
Body = Text(10)


class Sample(AssetModel):
    the_title: Title
    body: Body = ""


def test_camel_case_keys_and_strict_scalars():
    sample = parse_model(Sample, "sample", {"theTitle": " 标题 ", "body": "ok"})
    assert sample.the_title == "标题" and sample.to_json_dict() == {"theTitle": "标题", "body": "ok"}
    with pytest.raises(ValidationError) as err:
        parse_model(Sample, "sample", {"theTitle": 5})
    assert [(p.code, p.pointer) for p in err.value.problems] == [("sample.wrong_type", "/theTitle")]


def test_base_pointer_prefixes_problem_locations():
    with pytest.raises(ValidationError) as err:
        parse_model(Sample, "sample", {"theTitle": "x", "body": "0123456789X"}, base=("items", 3))
    problem = err.value.problems[0]
    assert (problem.code, problem.pointer, problem.details) == ("sample.too_long", "/items/3/body", {"max_length": 10})


def test_tab_newline_and_cr_are_allowed_other_controls_are_not():
    assert parse_model(Sample, "sample", {"theTitle": "x", "body": "a\tb\r\nc"}).body == "a\tb\r\nc"
    with pytest.raises(ValidationError) as err:
        parse_model(Sample, "sample", {"theTitle": "x", "body": "a\x1bb"})
    problem = err.value.problems[0]
    assert problem.code == "sample.control_char" and problem.details == {"char": "U+001B", "offset": 1}


def test_non_object_input_and_model_passthrough():
    with pytest.raises(ValidationError) as err:
        parse_model(Sample, "sample", "text")
    assert err.value.code == "sample.invalid" and err.value.problems[0].code == "sample.wrong_type"
    sample = Sample(the_title="x")
    assert parse_model(Sample, "sample", sample) is sample


def test_rebuild_revalidates_changes():
    sample = Sample(the_title="x")
    assert rebuild(sample, "sample", body="new").body == "new"
    with pytest.raises(ValidationError) as err:
        rebuild(sample, "sample", the_title="n" * (NAME_MAX + 1))
    assert err.value.problems[0].code == "sample.too_long"
    with pytest.raises(ValidationError):
        rebuild(sample, "sample", the_title="   ")


# --- the shared character rules (issue 18 items 4 and 11) -----------------------------------------


@pytest.mark.parametrize(
    ("text", "code", "char"),
    [
        ("a\x85b", "sample.control_char", "U+0085"),  # C1 NEL
        ("a\x9bb", "sample.control_char", "U+009B"),  # C1 CSI: an escape sequence on 8-bit terminals
        ("a\x07b", "sample.control_char", "U+0007"),  # BEL
        ("a\ud800b", "sample.lone_surrogate", "U+D800"),
    ],
)
def test_c1_controls_and_lone_surrogates_are_rejected_in_any_text(text, code, char):
    with pytest.raises(ValidationError) as err:
        parse_model(Sample, "sample", {"theTitle": "x", "body": text[:10]})
    problem = err.value.problems[0]
    assert (problem.code, problem.pointer) == (code, "/body")
    assert code == "sample.lone_surrogate" or problem.details["char"] == char


@pytest.mark.parametrize("title", ["Al\nice", "Al\tice", "Ali\u202ece", "A\u2066b\u2069", "Al\u200bice", "\ufeffAlice", "Al\u2028ice"])
def test_names_are_one_line_without_invisible_or_direction_changing_characters(title):
    with pytest.raises(ValidationError) as err:
        parse_model(Sample, "sample", {"theTitle": title})
    assert err.value.problems[0].code == "sample.bad_name_char"


@pytest.mark.parametrize("title", ["👩\u200d💻 Coder", "می\u200cخواهم", "שלום\u200f", "❤\ufe0f", "  padded\n"])
def test_names_keep_joiners_marks_and_variation_selectors(title):
    assert parse_model(Sample, "sample", {"theTitle": title}).the_title == title.strip()


def test_prose_keeps_newlines_bidi_and_zero_width_characters():
    body = "a\n\u202eb\u200b"
    assert parse_model(Sample, "sample", {"theTitle": "x", "body": body}).body == body


def test_text_problem_and_clean_label():
    problem = text_problem("card", "x\x1b[31m", "/description")
    assert (problem.code, problem.pointer, problem.details) == ("card.control_char", "/description", {"char": "U+001B", "offset": 1})
    assert text_problem("card", "fine\n", "/description") is None
    assert clean_label("evil\u202e\nname\udcff") == "evil name\ufffd"
