from __future__ import annotations

import json

import pytest

from roleplay.assets.cards.jsonio import (
    MAX_JSON_DEPTH,
    check_json_value,
    decode_json_text,
    load_json_bytes,
    loads_lenient,
)
from roleplay.errors import RpError


def test_strict_json_has_no_warnings():
    assert loads_lenient('{"a": [1, 2]}') == ({"a": [1, 2]}, [])


@pytest.mark.parametrize(
    ("bom", "encoding"),
    [(b"\xef\xbb\xbf", "utf-8"), (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be")],
)
def test_bom_is_honoured(bom, encoding):
    value, problems = load_json_bytes(bom + '{"name": "白棠"}'.encode(encoding))
    assert value == {"name": "白棠"} and problems == []


def test_invalid_utf8_is_rejected_with_offset():
    with pytest.raises(RpError) as info:
        decode_json_text(b'{"a": "\xff"}')
    assert info.value.code == "card.json.encoding"
    assert info.value.pointer == "byte:7"


def test_json5_fallback_warns():
    value, problems = loads_lenient("{name: 'Alice', // comment\n tags: ['a',],}")
    assert value == {"name": "Alice", "tags": ["a"]}
    assert [p.code for p in problems] == ["card.json.lenient"]


def test_json_repair_fallback_warns_with_position():
    value, problems = loads_lenient('{"name": "Alice", "first_mes": "Hi"')
    assert value == {"name": "Alice", "first_mes": "Hi"}
    assert [p.code for p in problems] == ["card.json.repaired"]
    assert problems[0].pointer is not None and problems[0].pointer.startswith("char:")


def test_repair_can_be_disabled():
    with pytest.raises(RpError) as info:
        loads_lenient('{"name": "Alice"', allow_repair=False)
    assert info.value.code == "card.json.invalid"


def test_garbage_is_invalid_not_repaired_into_nothing():
    with pytest.raises(RpError) as info:
        loads_lenient("this is not json at all")
    assert info.value.code == "card.json.invalid"


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 5000, 200_000])
def test_deep_nesting_is_rejected(depth):
    with pytest.raises(RpError) as info:
        loads_lenient("[" * depth + "]" * depth)
    assert info.value.code == "card.json.too_deep"


def test_deep_nesting_in_broken_json_is_rejected_before_lenient_parsers():
    with pytest.raises(RpError) as info:
        loads_lenient('{"a": ' + "[" * 50_000)
    assert info.value.code == "card.json.too_deep"


def test_depth_limit_boundary():
    ok = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert loads_lenient(ok)[1] == []


def test_non_finite_numbers_are_rejected_with_pointer():
    with pytest.raises(RpError) as info:
        loads_lenient('{"data": {"x": [1, NaN]}}')
    assert info.value.code == "card.json.non_finite_number"
    assert info.value.pointer == "/data/x/1"


def test_size_limit():
    with pytest.raises(RpError) as info:
        decode_json_text(b" " * (32 * 1024 * 1024 + 1))
    assert info.value.code == "card.json.too_large"


def test_code_prefix_is_applied():
    with pytest.raises(RpError) as info:
        load_json_bytes(b"nope", code_prefix="asset.json")
    assert info.value.code == "asset.json.invalid"


def test_check_json_value_accepts_wide_values():
    check_json_value({"k": [json.loads("1.5")] * 10_000})
