"""Shared validation helpers (roleplay.assets.validation)."""

from __future__ import annotations

import pytest

from roleplay.assets.validation import NAME_MAX, AssetModel, Name, Text, parse_model, rebuild
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
