"""Preset model and pure field operations (roleplay.assets.presets.model)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roleplay.assets.presets.model import (
    MAX_FIELDS,
    Preset,
    add_field,
    contributing_fields,
    move_field,
    parse_preset,
    problems_of,
    remove_field,
    reorder_fields,
    update_field,
)
from roleplay.clock import CountingIds
from roleplay.errors import NotFoundError, ValidationError


def make(*fields: tuple[str, str]) -> Preset:
    """fields: (id, position)."""
    return parse_preset({"name": "P", "fields": [{"id": i, "title": i.upper(), "content": f"text {i}", "position": p} for i, p in fields]})


def test_parse_applies_spec_defaults_and_camel_case_round_trip():
    preset = parse_preset({"name": "  测试  ", "fields": [{"id": "a", "title": "甲"}]})
    f = preset.fields[0]
    assert preset.name == "测试"  # names are stripped
    assert (f.position, f.enabled, f.section_tag, f.content, f.description) == ("top", True, True, "", "")
    dumped = preset.to_json_dict()
    assert dumped["fields"][0]["sectionTag"] is True and "section_tag" not in dumped["fields"][0]
    assert parse_preset(dumped) == preset


def test_fields_are_stored_top_first_keeping_relative_order():
    preset = make(("b1", "bottom"), ("t1", "top"), ("b2", "bottom"), ("t2", "top"))
    assert preset.field_ids() == ("t1", "t2", "b1", "b2")
    assert [f.id for f in preset.fields_at("bottom")] == ["b1", "b2"]


def test_source_ids_and_contributing_fields_skip_disabled_and_blank():
    preset = parse_preset(
        {
            "name": "P",
            "fields": [
                {"id": "on", "title": "x", "content": "写点什么"},
                {"id": "off", "title": "x", "content": "写点什么", "enabled": False},
                {"id": "blank", "title": "x", "content": "  \n\t"},
            ],
        }
    )
    assert [f.source_id for f in contributing_fields(preset)] == ["rp.preset:on"]


def test_every_problem_is_reported_with_a_pointer():
    with pytest.raises(ValidationError) as info:
        parse_preset(
            {
                "name": " ",
                "fields": [
                    {"id": "bad id", "title": "t", "position": "middle", "enabled": 1, "sectionTg": True},
                    {"id": "ok", "title": "t", "content": "a\x00b"},
                ],
            }
        )
    err = info.value
    assert err.code == "preset.invalid"
    got = {(p.code, p.pointer) for p in err.problems}
    assert got == {
        ("preset.blank", "/name"),
        ("preset.bad_format", "/fields/0/id"),
        ("preset.bad_value", "/fields/0/position"),
        ("preset.wrong_type", "/fields/0/enabled"),
        ("preset.unknown_key", "/fields/0/sectionTg"),
        ("preset.control_char", "/fields/1/content"),
    }
    assert err.to_dict()["problems"][0]["pointer"] == "/name"


def test_duplicate_ids_and_total_size_are_rejected_with_pointers():
    with pytest.raises(ValidationError) as dup:
        parse_preset({"name": "P", "fields": [{"id": "a", "title": "1"}, {"id": "a", "title": "2"}]})
    assert [(p.code, p.pointer, p.details["id"]) for p in dup.value.problems] == [("preset.duplicate_field_id", "/fields/1/id", "a")]
    big = [{"id": f"f{i}", "title": "t", "content": "字" * 90_000} for i in range(5)]
    with pytest.raises(ValidationError) as large:
        parse_preset({"name": "P", "fields": big})
    assert large.value.problems[0].code == "preset.too_large"
    assert large.value.problems[0].details == {"total": 450_000, "limit": 400_000}


def test_bounds_on_every_text_and_field_count():
    cases = {
        "/name": {"name": "名" * 81},
        "/description": {"name": "P", "description": "说" * 2001},
        "/fields/0/title": {"name": "P", "fields": [{"id": "a", "title": "t" * 81}]},
        "/fields/0/description": {"name": "P", "fields": [{"id": "a", "title": "t", "description": "d" * 2001}]},
        "/fields/0/content": {"name": "P", "fields": [{"id": "a", "title": "t", "content": "c" * 100_001}]},
        "/fields/0/id": {"name": "P", "fields": [{"id": "a" * 65, "title": "t"}]},
    }
    for pointer, data in cases.items():
        assert [p.pointer for p in problems_of(data)] == [pointer], pointer
    too_many = {"name": "P", "fields": [{"id": f"f{i}", "title": "t"} for i in range(MAX_FIELDS + 1)]}
    assert [(p.code, p.pointer) for p in problems_of(too_many)] == [("preset.too_many", "/fields")]
    assert problems_of([])[0].code == "preset.wrong_type"


def test_add_field_generates_ids_and_inserts_inside_its_position():
    preset = make(("t1", "top"), ("b1", "bottom"))
    ids = CountingIds()
    out = add_field(preset, {"title": "新", "position": "bottom"}, ids=ids, index=0)
    assert out.field_ids() == ("t1", "fld_000001", "b1")
    out = add_field(out, {"title": "尾"}, ids=ids)
    assert out.field_ids() == ("t1", "fld_000002", "fld_000001", "b1")
    assert preset.field_ids() == ("t1", "b1")  # input untouched


def test_add_field_rejects_duplicates_missing_ids_and_bad_index():
    preset = make(("a", "top"))
    with pytest.raises(ValidationError) as dup:
        add_field(preset, {"id": "a", "title": "x"})
    assert dup.value.code == "preset.duplicate_field_id"
    with pytest.raises(ValidationError) as noid:
        add_field(preset, {"title": "x"})
    assert noid.value.code == "preset.field_id_required"
    with pytest.raises(ValidationError) as idx:
        add_field(preset, {"id": "b", "title": "x"}, index=5)
    assert idx.value.code == "preset.index_out_of_range"
    with pytest.raises(ValidationError) as bad:
        add_field(preset, {"id": "b", "title": ""})
    assert bad.value.code == "preset.invalid" and bad.value.problems[0].pointer == "/fields/-/title"


def test_update_field_keeps_id_and_moves_to_end_of_new_position():
    preset = make(("t1", "top"), ("t2", "top"), ("b1", "bottom"))
    out = update_field(preset, "t1", {"content": "新内容", "sectionTag": False})
    assert out.field("t1").content == "新内容" and out.field("t1").section_tag is False
    assert out.field_ids() == preset.field_ids()
    moved = update_field(preset, "t1", {"position": "bottom"})
    assert moved.field_ids() == ("t2", "b1", "t1")
    with pytest.raises(ValidationError) as immut:
        update_field(preset, "t1", {"id": "other"})
    assert immut.value.code == "preset.field_id_immutable"
    with pytest.raises(ValidationError) as unknown:
        update_field(preset, "t1", {"colour": "red"})
    assert unknown.value.problems[0].code == "preset.unknown_key"
    with pytest.raises(ValidationError) as bad:
        update_field(preset, "t1", {"title": "x" * 200})
    assert bad.value.problems[0].code == "preset.too_long"
    with pytest.raises(NotFoundError) as missing:
        update_field(preset, "nope", {"title": "x"})
    assert missing.value.code == "preset.field_not_found"


def test_remove_and_reorder():
    preset = make(("t1", "top"), ("t2", "top"), ("t3", "top"), ("b1", "bottom"))
    assert remove_field(preset, "t2").field_ids() == ("t1", "t3", "b1")
    with pytest.raises(NotFoundError):
        remove_field(preset, "zz")
    assert reorder_fields(preset, "top", ["t3", "t1", "t2"]).field_ids() == ("t3", "t1", "t2", "b1")
    for wrong in (["t1", "t2"], ["t1", "t2", "t3", "b1"], ["t1", "t1", "t2"]):
        with pytest.raises(ValidationError) as err:
            reorder_fields(preset, "top", wrong)
        assert err.value.code == "preset.reorder_mismatch"


def test_move_field_within_and_across_positions():
    preset = make(("t1", "top"), ("t2", "top"), ("b1", "bottom"), ("b2", "bottom"))
    assert move_field(preset, "t2", index=0).field_ids() == ("t2", "t1", "b1", "b2")
    across = move_field(preset, "t1", index=1, position="bottom")
    assert across.field_ids() == ("t2", "b1", "t1", "b2")
    assert across.field("t1").position == "bottom"
    with pytest.raises(ValidationError) as err:
        move_field(preset, "t1", index=3)
    assert err.value.code == "preset.index_out_of_range"


_op = st.one_of(
    st.tuples(st.just("add"), st.sampled_from(["top", "bottom"]), st.integers(0, 10)),
    st.tuples(st.just("move"), st.sampled_from(["top", "bottom"]), st.integers(0, 10)),
    st.tuples(st.just("update"), st.sampled_from(["top", "bottom"]), st.integers(0, 10)),
    st.tuples(st.just("remove"), st.just("top"), st.integers(0, 10)),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_op, max_size=25))
def test_operations_keep_ids_stable_and_storage_top_first(ops):
    ids = CountingIds()
    preset = parse_preset({"name": "P"})
    contents: dict[str, str] = {}
    for kind, position, n in ops:
        existing = preset.field_ids()
        if kind == "add":
            group = len(preset.fields_at(position))
            preset = add_field(preset, {"title": "t", "content": f"c{n}", "position": position}, ids=ids, index=min(n, group))
            new_id = (set(preset.field_ids()) - set(existing)).pop()
            contents[new_id] = f"c{n}"
        elif existing:
            target = existing[n % len(existing)]
            if kind == "move":
                group = len([f for f in preset.fields_at(position) if f.id != target])
                preset = move_field(preset, target, index=min(n, group), position=position)
            elif kind == "update":
                preset = update_field(preset, target, {"position": position})
            else:
                preset = remove_field(preset, target)
                del contents[target]
        # ids never change, content travels with its id, and storage stays top-first
        assert {f.id: f.content for f in preset.fields} == contents
        positions = [f.position for f in preset.fields]
        assert positions == sorted(positions, key=lambda p: p != "top")
        assert parse_preset(preset.to_json_dict()) == preset
