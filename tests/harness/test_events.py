"""Payload validation: the quick check of plain JSON against the full one (issue 16)."""

from __future__ import annotations

import enum
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roleplay.errors import ValidationError
from roleplay.harness import events
from roleplay.harness.events import MAX_DEPTH, validate_payload


class Flag(enum.IntEnum):
    ON = 1


class Text(str):
    pass


_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),  # NaN and the infinities included
    st.text(max_size=5),
    st.sampled_from([Flag.ON, Text("x"), (1, 2), b"x", 1 + 2j, set()]),
)
_KEYS = st.one_of(st.text(max_size=3), st.sampled_from([1, None, True, 1.5, Text("k")]))
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_KEYS, inner, max_size=4)),
    max_leaves=30,
)


def _full_check_passes(value: Any) -> bool:
    try:
        events._check_json(value, "/payload", 0)
    except ValidationError:
        return False
    return True


@given(_VALUES)
@settings(max_examples=600, deadline=None)
def test_what_the_quick_check_lets_through_the_full_check_accepts(value: Any) -> None:
    """The quick check either vouches for a value or leaves it to the full check: it never lets
    through what the full one refuses (and plain JSON, the usual payload, is vouched for)."""
    if events._plain_json(value, 0):
        assert _full_check_passes(value)


@given(st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=5)),
                    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=3), inner, max_size=4)), max_leaves=30))  # fmt: skip
@settings(max_examples=300, deadline=None)
def test_plain_json_is_vouched_for(value: Any) -> None:
    assert events._plain_json(value, 0)


def _nested(depth: int, leaf: Any) -> Any:
    value = leaf
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


@pytest.mark.parametrize("depth", [MAX_DEPTH - 2, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1])
@pytest.mark.parametrize("leaf", [1, [], {}, "s", [1]])
def test_the_depth_limit_is_the_full_checks(depth: int, leaf: Any) -> None:
    payload = {"commandId": "c", "name": "n", "args": {"x": _nested(depth, leaf)}}
    expected_ok = _full_check_passes(payload)
    try:
        validate_payload("command/run", payload)
        ok = True
    except ValidationError as exc:
        assert exc.code == "event.too_deep"
        ok = False
    assert ok == expected_ok


@pytest.mark.parametrize(
    ("value", "pointer"),
    [
        (float("nan"), "/payload/args/x/0/y"),
        (float("-inf"), "/payload/args/x/0/y"),
        ((1, 2), "/payload/args/x/0/y"),
        (Text("fine"), None),
        (Flag.ON, None),
    ],
)
def test_a_refused_value_is_reported_where_it_is(value: Any, pointer: str | None) -> None:
    payload = {"commandId": "c", "name": "n", "args": {"x": [{"y": value}]}}
    if pointer is None:
        validate_payload("command/run", payload)
        return
    with pytest.raises(ValidationError) as exc:
        validate_payload("command/run", payload)
    assert exc.value.code == "event.invalid_payload" and exc.value.pointer == pointer
