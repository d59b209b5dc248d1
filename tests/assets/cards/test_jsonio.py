from __future__ import annotations

import json

import pytest

from roleplay.assets.cards import jsonio
from roleplay.assets.cards.jsonio import (
    MAX_JSON5_CHARS,
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


def test_json_repair_on_request_warns_with_position():
    value, problems = loads_lenient('{"name": "Alice", "first_mes": "Hi"', allow_repair=True)
    assert value == {"name": "Alice", "first_mes": "Hi"}
    assert [p.code for p in problems] == ["card.json.repaired"]
    assert problems[0].pointer is not None and problems[0].pointer.startswith("char:")


def test_repair_can_be_disabled():
    with pytest.raises(RpError) as info:
        loads_lenient('{"name": "Alice"', allow_repair=False)
    assert info.value.code == "card.json.truncated"


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
        loads_lenient('{"a": ' + "[" * 50_000, allow_repair=True)
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


# --- the lenient path: fast for big files, never a guess unless asked (issue 18 item 5) -----------


@pytest.fixture
def slow_parsers(monkeypatch):
    """Record calls to the pure-Python parsers (they must not run on big files)."""
    calls: list[str] = []

    def spy(name, real):
        def wrapped(text, *args, **kwargs):
            calls.append(name)
            return real(text, *args, **kwargs)

        return wrapped

    monkeypatch.setattr(jsonio.json5, "loads", spy("json5", jsonio.json5.loads))
    monkeypatch.setattr(jsonio.json_repair, "loads", spy("json_repair", jsonio.json_repair.loads))
    return calls


def _big_card_text(tail: str) -> str:
    text = json.dumps({"name": "Big", "description": "lorem ipsum, [dolor] {sit} // amet " * 30_000, "tags": ["a", "b"]})
    return text[:-1] + tail


def test_trailing_comma_in_a_big_file_is_read_strictly_without_slow_parsers(slow_parsers):
    value, problems = loads_lenient(_big_card_text(",\n}"))
    assert value["tags"] == ["a", "b"] and value["description"].startswith("lorem ipsum, [dolor]")
    assert [p.code for p in problems] == ["card.json.lenient"]
    assert slow_parsers == []


def test_several_trailing_commas_and_comments_in_a_big_file_keep_every_value(slow_parsers):
    text = _big_card_text(', /* note, ] */ "x": [1, 2,], // end\n "y": {"z": "a,}",},}')
    value, problems = loads_lenient(text)
    assert value["x"] == [1, 2] and value["y"] == {"z": "a,}"}
    assert "// amet" in value["description"]  # comment-like text inside strings is content
    assert [p.code for p in problems] == ["card.json.lenient"] and slow_parsers == []


def test_big_file_that_needs_json5_is_refused_with_the_reason(slow_parsers):
    text = "{'name': 'x', 'description': '" + "y" * MAX_JSON5_CHARS + "'}"
    with pytest.raises(RpError) as info:
        loads_lenient(text)
    assert info.value.code == "card.json.invalid"
    assert "too large for the JSON5 reader" in info.value.message and info.value.pointer == "char:1"
    assert slow_parsers == []


def test_truncated_json_names_truncation_and_is_not_guessed(slow_parsers):
    for text in ('{"name": "Alice", "first_mes": "Hi"', '{"name": "Alice", "first_mes": "H'):
        with pytest.raises(RpError) as info:
            loads_lenient(text)
        assert info.value.code == "card.json.truncated", text
        assert info.value.details["length"] == len(text)
    assert slow_parsers == []


def test_broken_json_is_not_repaired_unless_asked():
    text = '{"name": "Alice" "first_mes": "Hi"}'  # missing comma: json_repair would guess
    with pytest.raises(RpError) as info:
        loads_lenient(text)
    assert info.value.code == "card.json.invalid"
    value, problems = loads_lenient(text, allow_repair=True)
    assert value == {"name": "Alice", "first_mes": "Hi"}
    assert [p.code for p in problems] == ["card.json.repaired"]


def test_empty_json_text_says_empty():
    with pytest.raises(RpError) as info:
        load_json_bytes(b" \n", code_prefix="asset.json")
    assert info.value.code == "asset.json.empty"


# --- lone surrogates (issue 18 item 4) ------------------------------------------------------------


def test_lone_surrogates_become_replacement_characters_with_a_warning():
    value, problems = loads_lenient('{"name": "A\\ud800", "tags": ["\\udc00x"], "ok": "\\ud83d\\ude00"}', code_prefix="lorebook.json")
    assert value == {"name": "A\ufffd", "tags": ["\ufffdx"], "ok": "\U0001f600"}
    assert [p.code for p in problems] == ["lorebook.json.lone_surrogate"]
    assert problems[0].details["count"] == 2 and problems[0].pointer in ("/name", "/tags/0")
    json.dumps(value, ensure_ascii=False).encode("utf-8")  # storable now


def test_lone_surrogate_in_a_key_is_replaced():
    value, problems = loads_lenient('{"\\udfffk": 1}')
    assert value == {"\ufffdk": 1} and problems[0].pointer == "/\ufffdk"


def test_integer_with_too_many_digits_is_a_coded_error():
    for text in ('{"a": ' + "9" * 5000 + "}", '{"a": ' + "9" * 5000 + ",}"):
        with pytest.raises(RpError) as info:
            loads_lenient(text)
        assert info.value.code == "card.json.number_too_long"
