"""inspect_card end to end on small synthetic cards: namespace, openings, fail-closed paths."""

import json

import pytest
from compat.mvu_support import entry, make_card

from roleplay.compat.mvu.adapter import inspect_card, select_opening
from roleplay.errors import RpError
from roleplay.state import apply_bootstrap, empty_projection

RULES = "变量更新规则:\n  悠纪:\n    好感度:\n      type: number\n      range: [-30, 100]\n      check: 好感变化时\n    心情:\n      check: 心情变化时\n"


def card(first="你好\n_.set('悠纪.好感度', 5);//初遇", alternate=None, entries=None):
    return make_card(
        first,
        alternate,
        entries
        if entries is not None
        else [entry("[InitVar]初始", '{"悠纪": {"好感度": [0, "好感"], "心情": "平静"}}', enabled=False), entry("[mvu_update]规则", RULES)],
    )


def test_a_full_card_becomes_a_rules_required_namespace():
    report = inspect_card(card())
    ns = report.namespace
    assert report.detected and ns.status == "ok"
    assert ns.definition["updateMode"] == "rules-required"
    assert ns.initial_value == {"悠纪": {"好感度": 0, "心情": "平静"}}
    assert ns.vwd == {"/悠纪/好感度": "好感"}
    assert [r["id"] for r in ns.definition["rules"]] == ["mvu:/悠纪/好感度:set", "mvu:/悠纪/好感度:increment", "mvu:/悠纪/心情:set"]
    payload = ns.bootstrap()
    assert payload["namespaces"]["story"]["initialValue"] == ns.initial_value
    folded = apply_bootstrap(empty_projection(), payload)
    assert folded["namespaces"]["story"]["definition"]["updateMode"] == "rules-required"


def test_opening_commands_apply_to_the_selected_greeting_only():
    report = inspect_card(card(alternate=["<initvar>\n悠纪:\n  好感度: 50\n  心情: 紧张\n</initvar>\n再会"]))
    default = select_opening(report)
    assert default.namespace.initial_value == {"悠纪": {"好感度": 5, "心情": "平静"}}
    assert default.commands == [{"op": "set", "path": "/悠纪/好感度", "source": "command", "line": 2, "reason": "初遇"}]
    assert default.opening_message_text == "你好"
    alternate = select_opening(report, "alternate", 0)
    assert alternate.has_initvar and alternate.namespace.initial_value == {"悠纪": {"好感度": 50, "心情": "紧张"}}
    assert alternate.opening_message_text == "再会"
    assert report.namespace.initial_value["悠纪"]["好感度"] == 0  # unselected openings do not leak
    with pytest.raises(RpError):
        select_opening(report, "alternate", 3)


def test_a_refused_opening_command_group_keeps_the_initvar_value_and_the_namespace_enabled():
    report = inspect_card(card(first="_.set('悠纪.心情', '开心');\n_.set('悠纪.好感度', 500);"))
    opening = select_opening(report)
    ns = opening.namespace
    assert ns.status == "ok" and ns.definition["updateMode"] == "rules-required"
    assert ns.initial_value == {"悠纪": {"好感度": 0, "心情": "平静"}}  # none of the group applied
    assert opening.commands == []
    found = {d.code: d for d in ns.diagnostics}
    assert "mvu.namespace.disabled" not in found and "could not be built safely" not in " ".join(d.message for d in ns.diagnostics)
    assert found["mvu.command.schema_violation"].details["command"] == 1
    assert found["mvu.opening.commands_refused"].details["severity"] == "warning"
    assert report.namespace.status == "ok"
    folded = apply_bootstrap(empty_projection(), ns.bootstrap())
    assert folded["namespaces"]["story"]["definition"]["updateMode"] == "rules-required"


def test_broken_initvar_gives_a_disabled_empty_namespace_with_located_errors():
    report = inspect_card(card(entries=[entry("[initvar]", "a:\n\tb: 1")]))
    ns = report.namespace
    assert ns.status == "disabled" and ns.initial_value == {} and ns.definition["updateMode"] == "disabled"
    failed = next(d for d in ns.diagnostics if d.code == "mvu.parse.failed")
    assert failed.pointer == "/data/character_book/entries/0/content" and failed.details["line"] == 2
    assert ns.bootstrap()["namespaces"]["story"]["definition"]["updateMode"] == "disabled"


def test_custom_greeting_and_extra_lorebooks_in_mvu_order():
    extra = {"entries": {"1": {"uid": 1, "comment": "[initvar]", "content": '{"世界": {"天气": "晴"}, "悠纪": {"x": 1}}'}}}
    report = inspect_card(
        card(first="hi"), [("extra.json", extra)], custom_greeting="<initvar>\n悠纪:\n  好感度: 9\n  心情: 好\n</initvar>\n自定义"
    )
    assert report.namespace.initial_value["世界"] == {"天气": "晴"}
    assert report.namespace.initial_value["悠纪"] == {"好感度": 0, "心情": "平静"}
    custom = select_opening(report, "custom")
    assert custom.namespace.initial_value == {"悠纪": {"好感度": 9, "心情": "好"}, "世界": {"天气": "晴"}}
    assert custom.opening_message_text == "自定义"


def test_cards_without_mvu_and_scripts_are_reported():
    report = inspect_card(
        make_card("Hello", extensions={"tavern_helper": {"scripts": [{"name": "x"}]}, "regex_scripts": [{"scriptName": "r"}]})
    )
    assert not report.detected and report.namespace.initial_value == {}
    assert report.namespace.definition["updateMode"] == "schema-only"
    assert [d.code for d in report.diagnostics] == ["mvu.script.dropped", "mvu.script.regex_dropped"]


def test_unsupported_templates_are_flagged_at_inspection():
    report = inspect_card(card(entries=[entry("[initvar]", "a: 1"), entry("事件", "<% setvar('a', 2) %>")]))
    assert "mvu.template.write_forbidden" in [d.code for d in report.diagnostics]


def test_zod_schema_is_authoritative_and_a_mismatch_fails_closed():
    schema = {
        "type": "object",
        "properties": {
            "悠纪": {"type": "object", "properties": {"好感度": {"type": "number", "maximum": 100}, "心情": {"type": "string"}}}
        },
    }
    report = inspect_card(card(), zod_schema=schema)
    assert (
        report.namespace.status == "ok"
        and report.namespace.definition["schema"]["properties"]["悠纪"]["properties"]["好感度"]["maximum"] == 100
    )
    bad = {"type": "object", "properties": {"悠纪": {"type": "string"}}}
    assert inspect_card(card(), zod_schema=bad).namespace.status == "disabled"


def test_report_serialises_to_plain_json():
    import json

    document = inspect_card(card()).to_dict()
    assert json.loads(json.dumps(document, ensure_ascii=False)) == document
    assert set(document) == {"detected", "findings", "namespace", "openings", "diagnostics"}


def test_a_crafted_greeting_on_a_plain_card_is_inspected_in_linear_time():
    import time

    greeting = "<initvar>```" * 800 + "\n" + "<jsonpatch>```" * 800 + "\n" + "_.set('a', ((" * 800 + "\n" + "<% if (x) { %" * 800
    start = time.perf_counter()
    report = inspect_card(make_card(greeting))
    # Every `rp new` inspects the card; the regex version needs tens of seconds for this greeting.
    assert time.perf_counter() - start < 5
    assert not report.detected and select_opening(report).namespace.status == "ok"


def test_a_greeting_with_thousands_of_broken_commands_still_bootstraps():
    report = inspect_card(card(first="你好" + "_.set('悠纪.好感度', (" * 20_000))
    ns = select_opening(report).namespace
    assert ns.status == "ok" and len(ns.diagnostics) > 20_000
    carried = ns.bootstrap()["namespaces"]["story"]["setupDiagnostics"]
    assert len(carried) == 100 and carried[-1]["code"] == "mvu.diagnostics.truncated"


def _errors(report, code):
    return [p for p in report.namespace.diagnostics if p.code == code]


def test_a_value_the_state_cannot_hold_disables_the_namespace_with_the_state_problem():
    # Regression: these diagnostics once passed ``code`` twice to diag() (a TypeError, not a report).
    deep = 1
    for _ in range(40):
        deep = {"k": deep}
    report = inspect_card(card(entries=[entry("[InitVar]", json.dumps({"a": deep}), enabled=False)]))
    assert report.namespace.status == "disabled"
    [problem] = _errors(report, "mvu.namespace.invalid")
    assert problem.message == "schemas nest at most 32 levels"
    assert problem.pointer is not None and problem.pointer.startswith("/definition/schema/properties/a/properties/k/properties/k")
    assert problem.details == {"severity": "error", "source": "adapter", "problemCode": "state.schema.too_deep"}

    wide = inspect_card(card(entries=[entry("[InitVar]", json.dumps({f"k{i}": i for i in range(2500)}), enabled=False)]))
    [problem] = _errors(wide, "mvu.namespace.invalid")
    assert wide.namespace.status == "disabled" and problem.details["problemCode"] == "state.schema.too_large"
    assert problem.message == "a schema may hold at most 2000 sub-schemas" and problem.pointer.startswith("/definition/schema/properties/k")


def test_a_zod_schema_that_maps_to_no_restricted_schema_fails_closed_with_a_located_problem():
    # Every keyword is one the mapper keeps, but a kept value is not one the state can judge.
    schema = {"type": "object", "properties": {"悠纪": {"type": "object", "properties": {"好感度": {"type": "numbr"}}}}}
    report = inspect_card(card(), zod_schema=schema, zod_schema_source="schema.json")
    assert report.namespace.status == "disabled"
    [problem] = _errors(report, "mvu.zod.undecidable")
    assert problem.message == "the mapped schema is not a restricted schema: unknown JSON type 'numbr'"
    assert problem.pointer == "/properties/悠纪/properties/好感度/type"
    assert problem.details == {"severity": "error", "source": "schema.json", "problemCode": "state.schema.keyword_invalid"}
