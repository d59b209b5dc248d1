"""The YAML document of an edited asset: readable blocks, and every stored value round-trips."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roleplay.assets.edit_document import from_document, strip_error_comments, to_document, with_error_comments
from roleplay.errors import Problem, RpError

TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=80)
VALUES = st.recursive(
    st.one_of(TEXT, st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.none()),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(TEXT, inner, max_size=3)),
    max_leaves=8,
)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(TEXT, VALUES, min_size=1, max_size=4))
def test_every_value_round_trips(data: dict) -> None:  # type: ignore[type-arg]
    assert from_document(to_document("persona", data, "persona x")) == data


def test_prose_is_a_literal_block_and_dates_stay_text() -> None:
    doc = to_document("writing-style", {"name": "A", "requirements": "one\ntwo\n"}, "writing-style x")
    assert "requirements: |\n  one\n  two\n" in doc
    assert from_document("name: 2024-01-01\nn: yes\n") == {"name": "2024-01-01", "n": "yes"}


@pytest.mark.parametrize(
    ("text", "code", "pointer"),
    [
        ("name: [x\n", "asset.edit.invalid_yaml", None),
        ("a: 1\na: 2\n", "asset.edit.invalid_yaml", None),
        ("- just\n- a list\n", "asset.edit.invalid_document", ""),
        ("name: x\n1: y\n", "asset.edit.invalid_document", "/1"),
        ("x: .nan\n", "asset.edit.invalid_document", "/x"),
    ],
)
def test_bad_documents_are_refused_with_a_code(text: str, code: str, pointer: str | None) -> None:
    with pytest.raises(RpError) as caught:
        from_document(text)
    assert caught.value.code == code and caught.value.pointer == pointer


def test_an_empty_document_means_nothing() -> None:
    assert from_document("# only comments\n\n") is None


def test_error_comments_are_replaced_not_piled_up() -> None:
    exc = RpError("persona.invalid", "bad", problems=[Problem("persona.too_short", "name is empty", "/name")])
    once = with_error_comments("name: ''\n", exc)
    assert once == "# ! persona.too_short: name is empty (at /name)\nname: ''\n"
    assert with_error_comments(once, exc) == once and strip_error_comments(once) == "name: ''\n"
