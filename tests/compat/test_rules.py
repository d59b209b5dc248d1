"""变量更新规则 → exact rules, schema refinements, dynamic groups and fail-closed diagnostics."""

from compat.mvu_support import entry

from roleplay.compat.mvu.rules import derive_rules, parse_range, rule_id, uncovered
from roleplay.compat.mvu.schema import derive_from_data
from roleplay.compat.mvu.sources import read_book
from roleplay.state import validate_definition, validate_value

DATA = {
    "白娅": {"依存度": 35, "着装": {"上装": "a", "下装": "b", "鞋子": "c"}, "称号": {"行尸": {"效果": "x", "自我评价": "y"}}},
    "角色": {"甲": {"好感度": 1}, "乙": {"好感度": 2}},
    "列表": ["x"],
}


def run(rules_yaml, data=DATA, title="[mvu_update]变量更新规则"):
    derived = derive_from_data(data)
    book = read_book({"entries": [entry(title, rules_yaml)]}, name="b", source="card")[0]
    result = derive_rules(list(book.entries), derived.value, derived.schema, char="白娅", user="u")
    definition = {"title": "t", "updateMode": "schema-only", "schema": result.schema, "rules": result.rules}
    assert validate_definition(definition) == []
    assert validate_value(result.schema, derived.value) == []
    return result


def codes(result):
    return [d.code for d in result.diagnostics]


def targets(result):
    return [(r["target"], r["effect"]["op"]) for r in result.rules]


def test_numbers_get_set_and_increment_rules_with_range_bounds():
    result = run("变量更新规则:\n  白娅:\n    依存度:\n      type: number\n      range: 0~100\n      check:\n        - 调整 ±(3~6)\n")
    assert targets(result) == [("/白娅/依存度", "set"), ("/白娅/依存度", "increment")]
    assert result.rules[0]["when"] == "- 调整 ±(3~6)" and result.rules[0]["id"] == "mvu:/白娅/依存度:set"
    node = result.schema["properties"]["白娅"]["properties"]["依存度"]
    assert (node["minimum"], node["maximum"]) == (0, 100)


def test_alternatives_expand_to_exact_pointers_and_missing_ones_are_reported():
    result = run("变量更新规则:\n  白娅:\n    着装.${上装|下装|内衣}:\n      check: 换装时更新\n")
    assert targets(result) == [("/白娅/着装/上装", "set"), ("/白娅/着装/下装", "set")]
    assert "mvu.rules.path_unresolved" in codes(result)


def test_wildcards_over_closed_objects_expand_and_specific_rules_win():
    result = run("变量更新规则:\n  角色.${角色名}.好感度:\n    check: 泛规则\n  角色.甲.好感度:\n    check: 专属规则\n")
    by_target = {r["target"]: r["when"] for r in result.rules if r["effect"]["op"] == "set"}
    assert by_target == {"/角色/甲/好感度": "专属规则", "/角色/乙/好感度": "泛规则"}
    assert "mvu.rules.wildcard_overridden" in codes(result)


def test_index_signature_types_open_a_dynamic_group_without_rules():
    result = run(
        "变量更新规则:\n  白娅:\n    称号:\n      type: |-\n        {\n          [称号名: string]: {\n            效果: string;\n            自我评价?: string;\n          }\n        }\n      check: 获得称号时添加\n"
    )
    assert result.rules == [] and result.dynamic_groups == ["/白娅/称号"]
    node = result.schema["properties"]["白娅"]["properties"]["称号"]
    assert node["additionalProperties"]["required"] == ["效果"] and "获得称号时添加" in node["description"]


def test_wildcard_over_an_open_object_refines_member_type():
    data = {"装备栏": {"$meta": {"extensible": True}, "头": "帽子"}}
    result = run("变量更新规则:\n  装备栏.${部位}:\n    type: string\n    check: 换装备时更新\n", data)
    assert result.dynamic_groups == ["/装备栏"]
    assert result.schema["properties"]["装备栏"]["additionalProperties"] == {"type": "string"}


def test_type_conflicting_with_the_initial_value_fails_closed():
    result = run("变量更新规则:\n  白娅:\n    依存度:\n      type: string\n")
    assert "mvu.rules.type_conflict" in codes(result) and result.rules == []
    assert result.schema["properties"]["白娅"]["properties"]["依存度"] == {"type": "number"}


def test_unreadable_types_and_ranges_fail_closed():
    result = run(
        "变量更新规则:\n  白娅:\n    依存度:\n      type: z.coerce.number().transform(v => _.clamp(v, 0, 100))\n  列表:\n    range: 0~100\n"
    )
    assert "mvu.rules.type_unsupported" in codes(result) and "mvu.rules.range_invalid" in codes(result)
    assert ("/白娅/依存度", "set") not in targets(result)
    assert ("/列表", "append") in targets(result)


def test_range_outside_the_initial_value_is_refused():
    result = run("变量更新规则:\n  白娅:\n    依存度:\n      range: [0, 10]\n")
    assert "mvu.rules.range_conflict" in codes(result)
    assert "maximum" not in result.schema["properties"]["白娅"]["properties"]["依存度"]


def test_conflicting_duplicate_declarations_are_refused():
    result = run("变量更新规则:\n  白娅.依存度:\n    range: 0~100\n  白娅:\n    依存度:\n      range: 0~50\n")
    assert "mvu.rules.conflict" in codes(result) and result.rules == []


def test_ejs_in_rules_is_never_rendered():
    result = run("变量更新规则:\n  # :<%_ if (getvar('stat_data.a') === 1) { _%>\n  白娅:\n    依存度:\n      check: x\n  # :<%_ } _%>\n")
    assert result.rules == [] and codes(result).count("mvu.rules.ejs_unsupported") == 2
    assert result.diagnostics[0].details["line"] == 2


def test_protocol_entries_and_free_form_prose():
    protocol = run("变量输出格式:\n  rule:\n    - use JSON Patch\n", title="[mvu_update]变量输出格式")
    assert codes(protocol) == ["mvu.rules.protocol_dropped"] and not protocol.found
    prose = run("变量更新规则:\n  战斗相关:\n    - 受伤时减少生命\n")
    assert prose.rules == [] and prose.guidance == ["战斗相关: - 受伤时减少生命"]


def test_helpers():
    assert parse_range("0~100") == (0, 100) and parse_range("-20~100") == (-20, 100)
    assert parse_range([-20, 100]) == (-20, 100) and parse_range("[0.5, 1]") == (0.5, 1)
    assert parse_range("a~b") is None and parse_range("5~1") is None
    assert len(rule_id("/" + "长" * 200, "set")) <= 128
    assert uncovered({"a": 1, "b": {"c": 2}}, [{"target": "/b"}]) == ["/a"]
