"""Opening commands: MVU Zod semantics on plain values, schema checks, atomicity, clean text."""

from roleplay.compat.mvu.commands import Command, extract_commands
from roleplay.compat.mvu.diagnostics import Loc
from roleplay.compat.mvu.openings import apply_commands, clean_opening_text
from roleplay.compat.mvu.schema import derive_from_data

L = Loc("greeting")


def run(data, text):
    derived = derive_from_data(data)
    commands, _problems = extract_commands(text, L)
    outcome = apply_commands(derived.value, derived.schema, derived.vwd, commands, L)
    return derived, outcome


def codes(outcome):
    return [d.code for d in outcome.diagnostics]


def test_set_on_a_split_pair_with_and_without_index_zero():
    derived, outcome = run(
        {"health": [100, "生命值"], "悠纪": {"好感度": [0, "d"]}}, "_.set('health', 80);//受到伤害\n_.set('悠纪.好感度[0]', 0, 5);"
    )
    assert outcome.ok and outcome.value == {"health": 80, "悠纪": {"好感度": 5}}
    assert outcome.records[0] == {"op": "set", "path": "/health", "source": "command", "line": 1, "reason": "受到伤害"}
    assert derived.value == {"health": 100, "悠纪": {"好感度": 0}}  # the input is untouched


def test_strict_set_replacing_a_pair_breaks_a_numeric_schema():
    _d, outcome = run({"$meta": {"strictSet": True}, "level": [5, "等级描述"]}, "_.set('level', [5,'等级描述'], 6);")
    assert outcome.ok and outcome.value == {"level": 6}
    _d, outcome = run({"$meta": {"strictSet": True}, "level": [5, "等级描述"]}, "_.set('level', [6, '等级描述']);")
    assert not outcome.ok and "mvu.command.schema_violation" in codes(outcome)


def test_description_slot_and_readonly_paths_are_refused():
    _d, outcome = run({"hp": [1, "d"]}, "_.set('hp[1]', 'x');")
    assert codes(outcome) == ["mvu.command.vwd_description"]
    _d, outcome = run({"_内部": 1}, "_.set('_内部', 2);")
    assert codes(outcome) == ["mvu.command.readonly_path"]


def test_add_insert_delete_and_patches():
    data = {"测试": 10, "主角": {"物品": ["剑", "$__META_EXTENSIBLE__$"], "备忘录": {"$meta": {"extensible": True}}}, "时间": "09:00"}
    text = (
        '<JSONPatch>[{"op": "delta", "path": "/测试", "value": 10},'
        '{"op": "insert", "path": "/主角/物品/-", "value": "盾"},'
        '{"op": "insert", "path": "主角/备忘录/任务", "value": "打扫"}]</JSONPatch>\n'
        "_.add('测试', -5);\n_.set('时间', 10:45);\n_.remove('主角.物品[0]');\n_.insert('主角.物品', 0, '弓');"
    )
    _d, outcome = run(data, text)
    assert outcome.ok, outcome.diagnostics
    assert outcome.value == {"测试": 15, "主角": {"物品": ["弓", "盾"], "备忘录": {"任务": "打扫"}}, "时间": "10:45"}
    assert [r["op"] for r in outcome.records] == ["increment", "append", "set", "increment", "set", "remove", "insert"]


def test_numeric_text_is_converted_for_numeric_fields_with_a_warning():
    _d, outcome = run({"n": 1}, "_.set('n', '42');")
    assert outcome.value == {"n": 42} and codes(outcome) == ["mvu.command.value_normalized"]


def test_any_failure_applies_nothing():
    data = {"a": 1, "b": "x"}
    for text in (
        "_.set('a', 2);\n_.set('b', 3);",
        "_.set('a', 2);\n_.add('b', 1);",
        "_.set('a', 2);\n_.set('missing.deep', 1);",
        "_.set('a', 2);\n_.set('c', 1);",
    ):
        derived, outcome = run(data, text)
        assert not outcome.ok and outcome.value == derived.value and outcome.records == []
        assert outcome.diagnostics[-1].details["command"] == 1 and outcome.diagnostics[-1].details["line"] == 2


def test_arithmetic_is_not_evaluated():
    _d, outcome = run({"n": 1}, "_.set('n', 10 + 2);")
    assert not outcome.ok and outcome.value == {"n": 1}
    assert codes(outcome) == ["mvu.command.value_normalized", "mvu.command.schema_violation"]
    assert "arithmetic is not evaluated" in outcome.diagnostics[0].message


def test_move_and_the_stat_data_prefix():
    data = {"$meta": {"extensible": True}, "a": {"$meta": {"extensible": True}, "x": 1}, "b": {"$meta": {"extensible": True}}}
    _d, outcome = run(data, '<JSONPatch>[{"op": "move", "from": "/a/x", "path": "/b/y"}]</JSONPatch>\n_.set(\'stat_data.b.z\', 2);')
    assert outcome.ok and outcome.value == {"a": {}, "b": {"y": 1, "z": 2}}


def test_clean_text_removes_control_blocks_but_keeps_the_story():
    text = "她笑了。\n_.set('a', 1);//原因\n<UpdateVariable>\n<Analysis>x</Analysis>\n_.set('b', 2);\n</UpdateVariable>\n\n\n\n<StatusPlaceHolderImpl/>\n结束"
    commands, _ = extract_commands(text, L)
    assert clean_opening_text(text, commands) == "她笑了。\n\n结束"
    assert "_.set" in text  # the source stays as it was


def _reference_clean(text, commands):
    """The cleaning as first written with MVU-style regular expressions (quadratic on hostile text)."""
    import re

    spans = sorted((c.start, c.end) for c in commands if c.origin == "command")
    pieces, last = [], 0
    for start, end in spans:
        if start >= last:
            pieces.append(text[last:start])
            last = end
    pieces.append(text[last:])
    out = "".join(pieces)
    for pattern in (
        r"<update(?:variable)?>[\s\S]*?(?:</update(?:variable)?>|$)",
        r"<status_current_variables?>[\s\S]*?</status_current_variables?>|<StatusPlaceHolderImpl\s*/>",
        r"<initvar>[\s\S]*?</initvar>",
        r"<(json_?patch)>[\s\S]*?</\1>",
    ):
        out = re.sub(pattern, "", out, flags=re.IGNORECASE)
    out = re.sub(r"[ \t]+(\r?\n)", r"\1", out)
    out = re.sub(r"(\r?\n){3,}", lambda m: m.group(1) * 2, out)
    return out.strip()


def test_clean_text_equals_the_regex_cleaning_on_tag_soup():
    import random

    rng = random.Random(17)
    pieces = [
        "<update>",
        "</update>",
        "<UpdateVariable>",
        "</updatevariable>",
        "<status_current_variable>",
        "</status_current_variables>",
        "<StatusPlaceHolderImpl />",
        "<initvar>",
        "</INITVAR>",
        "<jsonpatch>",
        "</JSONPATCH>",
        "</json_patch>",
        "_.set('a', 1);",
        "\n",
        "\r\n",
        " ",
        "\t",
        "\r",
        "文",
        "x",
    ]
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 16)))
        commands, _ = extract_commands(text, L)
        assert clean_opening_text(text, commands) == _reference_clean(text, commands), repr(text)


def test_clean_text_is_linear_on_unclosed_tags_and_long_blank_runs():
    import time

    for text in ("<status_current_variable>" * 4_000, "<initvar>" * 10_000, "<jsonpatch>" * 8_000, " " * 100_000 + "x"):
        start = time.perf_counter()
        assert clean_opening_text(text, []) == text.strip()
        # The regex version takes tens of seconds on each of these; the bound only catches that.
        assert time.perf_counter() - start < 2


def test_remove_with_a_second_argument_works_by_value_index_or_key_as_in_mvu():
    marker = "$__META_EXTENSIBLE__$"
    data = {
        "inventory": ["sword", "poison", "rope", marker],
        "items": [{"id": 1}, {"id": 2}, marker],
        "flags": {"$meta": {"extensible": True}, "b": 1, "a": 2, "10": 3, "2": 4},
    }
    text = (
        "_.remove('inventory', 'poison');\n_.unset('items', {id: 2});\n_.delete('inventory', 0);\n"
        "_.remove('flags', 0);//the first key in Object.keys order is '2'\n_.remove('flags', 'b');"
    )
    _d, outcome = run(data, text)
    assert outcome.ok, outcome.diagnostics
    assert outcome.value == {"inventory": ["rope"], "items": [{"id": 1}], "flags": {"a": 2, "10": 3}}
    assert [r["path"] for r in outcome.records] == ["/inventory/1", "/items/1", "/inventory/0", "/flags/2", "/flags/b"]


def test_remove_of_an_absent_value_is_refused_like_mvu():
    _d, outcome = run(
        {"inventory": ["sword", "$__META_EXTENSIBLE__$"], "n": [1, "$__META_EXTENSIBLE__$"]}, "_.remove('inventory', 'poison');"
    )
    assert not outcome.ok and codes(outcome) == ["mvu.command.target_missing"]
    _d, outcome = run({"n": [1, "$__META_EXTENSIBLE__$"]}, "_.remove('n', true);")
    assert codes(outcome) == ["mvu.command.target_missing"] and "no element equal to True" in outcome.diagnostics[0].message
    _d, outcome = run({"b": [True, "$__META_EXTENSIBLE__$"]}, "_.remove('b', 1);")
    assert codes(outcome) == ["mvu.command.target_missing"]  # a number is an index, and there is no index 1


def test_checking_only_what_a_command_changed_equals_checking_the_whole_state(monkeypatch):
    import random

    from roleplay.compat.mvu import openings
    from roleplay.state import validate_value

    schema = {
        "type": "object",
        "additionalProperties": False,
        "required": ["hp", "bag", "who"],
        "properties": {
            "hp": {"type": "integer", "minimum": 0, "maximum": 10},
            "bag": {"type": "array", "maxItems": 3, "minItems": 1, "items": {"type": "string", "maxLength": 3}},
            "who": {"type": "object", "enum": [{"n": "a"}, {"n": "b"}, {"n": "a", "m": 1}], "properties": {"n": {"type": "string"}}},
            "tags": {"type": "object", "additionalProperties": {"type": "integer"}},
            "c": {"const": [1, 2]},
        },
    }
    value = {"hp": 5, "bag": ["x"], "who": {"n": "a"}, "tags": {}, "c": [1, 2]}
    lines = [
        "_.set('hp', 11);",
        "_.set('hp', 3);",
        "_.add('hp', 6);",
        "_.insert('bag', 'y');",
        "_.insert('bag', 'long');",
        "_.remove('bag', 0);",
        "_.remove('bag', 'y');",
        "_.set('who.n', 'b');",
        "_.set('who.n', 'c');",
        "_.insert('who', 'm', 1);",
        "_.remove('who', 'm');",
        "_.set('extra', 1);",
        "_.insert('tags', 't', 2);",
        "_.insert('tags', 'u', 'x');",
        "_.remove('hp');",
        "_.set('c[0]', 3);",
        "_.set('c[0]', 1);",
        "_.insert('bag', 0, 'z');",
        "_.remove('tags', 't');",
    ]
    rng = random.Random(4)
    groups = [" ".join(rng.choice(lines) for _ in range(rng.randint(1, 5))) for _ in range(600)]
    incremental = [apply_commands(value, schema, {}, extract_commands(text, L)[0], L) for text in groups]
    monkeypatch.setattr(openings, "_changed_violations", lambda schema, root, op, pointer: validate_value(schema, root))
    full = [apply_commands(value, schema, {}, extract_commands(text, L)[0], L) for text in groups]
    for text, a, b in zip(groups, incremental, full):
        assert (a.ok, a.value, a.records) == (b.ok, b.value, b.records), text
        assert [d.details.get("command") for d in a.diagnostics][-1:] == [d.details.get("command") for d in b.diagnostics][-1:], text
    assert 40 < sum(o.ok for o in incremental) < 560  # both outcomes are well represented


def test_many_opening_commands_cost_linear_time():
    import time

    data = {"物品": ["剑", "$__META_EXTENSIBLE__$"]}
    text = "_.insert('物品', '-', '刀');" * 3000
    start = time.perf_counter()
    _d, outcome = run(data, text)
    assert outcome.ok and len(outcome.value["物品"]) == 3001
    assert time.perf_counter() - start < 10  # a full validation per command takes minutes here


def test_a_move_without_its_patch_is_refused_and_applies_nothing():
    # Text never yields a move (``_.move`` is retired), so only a hand-built command reaches this:
    # without the JSON-patch op there is no "from", and the move must be refused, not crash.
    derived = derive_from_data({"a": {"x": 1}, "b": {}})
    commands = [Command("set", "set", ["a.x", "2"]), Command("move", "move", ["b.y"], line=3)]
    outcome = apply_commands(derived.value, derived.schema, derived.vwd, commands, L)
    assert not outcome.ok and outcome.value == {"a": {"x": 1}, "b": {}} and outcome.records == []
    [problem] = outcome.diagnostics
    assert problem.code == "mvu.command.unknown" and problem.pointer is None
    assert problem.message == "opening command 1 (_.move / command): unknown command 'move'; no opening command is applied"
    assert problem.details == {"severity": "error", "source": "greeting", "line": 3, "command": 1}
